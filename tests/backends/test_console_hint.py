"""A lost guest's console names the cause: the xl backend reads the console
log xenconsoled keeps (the lab does; Debian with XENCONSOLED_TRACE=guest) and
the control channel adds what it says to the loss."""

from __future__ import annotations

import subprocess
import time

from control_channel import apply_keys

from selena.backends.xl import XlBackend, console_failure
from selena.control.channel import Controller, base_path
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XenstoreConnection

# What the lab's h1 printed when Figure 11's flows filled its 32 MB.
OOM_CONSOLE = (
    "[2026-11-26 20:47:20] / # \x1b[6nOut of memory: Killed process 40 (selena-agent) "
    "total-vm:1184kB, anon-rss:84kB\n"
    "[2026-11-26 20:50:23] Out of memory: Killed process 38 (init) total-vm:2260kB\n"
    "[2026-11-26 20:50:23] Out of memory: Killed process 45 (flowgen) total-vm:1108kB\n")


def test_the_first_failure_line_is_named_with_how_many_more_there_are():
    said = console_failure(OOM_CONSOLE)
    assert said is not None
    assert said.startswith("Out of memory: Killed process 40 (selena-agent)")
    assert said.endswith("(and 2 more such lines)")
    assert "\x1b" not in said and "2026-11-26" not in said
    assert console_failure("[2026-11-26 20:47:20] Kernel panic - not syncing: VFS\n") \
        == "Kernel panic - not syncing: VFS"
    assert console_failure("SELENA-GUEST-READY\n/ # \n") is None      # a silent hang
    # The same name's next domain: the last run's failure is not this one's.
    assert console_failure("[2026-11-26 20:47:03] Logfile Opened\n" + OOM_CONSOLE
                           + "[2026-11-26 21:00:00] Logfile Opened\nSELENA-GUEST-READY\n") \
        is None


def test_the_xl_backend_reads_the_guests_console_log_under_its_host_root(fake_xen, tmp_path):
    logs = tmp_path / "root" / "var" / "log" / "xen" / "console"
    logs.mkdir(parents=True)
    (logs / "guest-selena-fct-h1.log").write_text("boot noise\n" * 5000 + OOM_CONSOLE)
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=tmp_path / "root")
    hint = backend.console_hint("selena-fct-h1")
    assert hint is not None and hint.startswith("Out of memory: Killed process 40")
    assert hint.endswith("(/var/log/xen/console/guest-selena-fct-h1.log)")
    assert backend.console_hint("selena-fct-h2") is None                # no log kept


def test_a_lost_guests_detail_carries_its_console_hint(xenstored, agent_binary):
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(8)
    apply_keys(dom0, 8)
    dom0.write("/local/domain/8/name", "selena-t-h3")
    proc = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(8)])
    asked: list[str] = []

    def hint(name: str) -> str:
        asked.append(name)
        return "Out of memory: Killed process 40 (selena-agent)"

    ctl = Controller(dom0, console_hint=hint)
    try:
        ctl.add_guest("h3", 8)
        ctl.wait_ready(timeout=10)
        handle = ctl.submit("h3", CommandSpec(shell="sleep 60"))
        time.sleep(0.3)
        xenstored.remove_domain(8)
        result = ctl.wait(handle, timeout=10)
    finally:
        ctl.close()
        proc.kill()
        proc.wait()
        dom0.close()
    assert result.state == "lost", result
    assert result.detail == ("its domain is gone; its console: Out of memory: Killed process 40 "
                             "(selena-agent)"), result.detail
    assert asked == ["selena-t-h3"]
    assert base_path(8) == "/local/domain/8/selena"
