"""Fixtures shared by the host tests: the real agent binary and a fake
xenstored (tests/support), and a fake Xen Dom0 built on both."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from fake_xen import FakeXen
from fake_xenstored import FakeXenstored

from selena.control.xenstore import XenstoreConnection

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "guest-agent" / "build" / "selena-agent"

# Python keeps a SIGINT disposition of SIG_IGN it inherits (nohup, a
# background job of a non-interactive shell), and then no Ctrl-C test sees
# a KeyboardInterrupt: they test selena's handling, so they start from
# Python's default wherever the suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the real agent (`agent_binary`, directly or through
    `fake_xen`) builds it with the C toolchain: it belongs to the `toolchain`
    tier, not to `make check` (docs/contributing.md)."""
    for item in items:
        if "agent_binary" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.toolchain)


@pytest.fixture(scope="session")
def agent_binary() -> Path:
    subprocess.run(["make", "-s", "-C", str(ROOT / "guest-agent")], check=True)
    return AGENT


@pytest.fixture
def xenstored(tmp_path):
    xs = FakeXenstored(str(tmp_path))
    yield xs
    xs.close()


@pytest.fixture
def fake_xen(xenstored, agent_binary):
    """xl, Xenstore and real agents on this host (tests/support/fake_xen.py)."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xen = FakeXen(store=xenstored, dom0=dom0)
    yield xen
    xen.shutdown()
    dom0.close()


# The host's own Dom0 tools. A test of the pure-Python tier (neither `lab`
# nor `toolchain`) must never run them: a sweep test on the code before a
# fix once ran `ovs-vsctl add-br` on the machine running the tests. Stand-ins
# a test puts on its PATH (under pytest's temporary directory) are fine.
HOST_TOOLS = frozenset({
    "xl", "ovs-vsctl", "ovs-ofctl", "ovs-appctl", "ip", "tc", "brctl", "bridge", "ethtool",
    "selena-tdf", "xenstore-write", "xenstore-read", "xenstore-rm", "xenstore-chmod",
    "xenstore-ls", "mn", "modprobe", "sysctl", "iptables"})


# Queries that change nothing, which the doctor's own tests run on purpose
# (on a machine that is not a Dom0: tests/host/test_doctor.py).
READ_ONLY = frozenset({("ovs-vsctl", "show"), ("xl", "info"), ("ip", "-V"),
                       ("selena-tdf", "host"), ("selena-tdf", "get")})


# Where selena writes on a host (its state and lock, `selena host setup`'s
# templates, images and modules file). A pure-Python test must leave them as
# they were: a setup test on the code before a fix once installed templates
# under /usr/share/selena of the machine running the tests.
HOST_PATHS = (Path("/run/selena"), Path("/usr/share/selena"), Path("/var/lib/selena"),
              Path("/etc/modules-load.d/selena.conf"))


def _host_paths_now() -> dict[str, tuple[int, ...] | None]:
    """Each of HOST_PATHS' own mtime and its entries' (None: absent)."""
    seen: dict[str, tuple[int, ...] | None] = {}
    for path in HOST_PATHS:
        try:
            times = [path.stat().st_mtime_ns]
            if path.is_dir():
                times += [entry.stat(follow_symlinks=False).st_mtime_ns
                          for entry in sorted(path.iterdir())]
            seen[str(path)] = tuple(times)
        except OSError:
            seen[str(path)] = None
    return seen


@pytest.fixture(autouse=True)
def _no_host_dom0_tools(request, monkeypatch, tmp_path_factory):
    if request.node.get_closest_marker("lab") or request.node.get_closest_marker("toolchain"):
        yield
        return
    before = _host_paths_now()
    temp = tmp_path_factory.getbasetemp().resolve()
    ran: list[str] = []
    real_popen = subprocess.Popen

    def guarded(args, *rest, **kwargs):
        argv = shlex.split(args) if isinstance(args, str) else [os.fspath(a) for a in args]
        tool = os.path.basename(argv[0]) if argv else ""
        if tool in HOST_TOOLS and (tool, *argv[1:2]) not in READ_ONLY:
            path = (kwargs.get("env") or os.environ).get("PATH")
            found = shutil.which(argv[0], path=path)
            if found is not None and not Path(found).resolve().is_relative_to(temp):
                ran.append(" ".join(argv))
                pytest.fail(f"a pure-Python test ran this host's {tool}: {' '.join(argv)}")
        return real_popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", guarded)
    yield
    assert not ran, f"this host's Dom0 tools ran: {ran}"
    after = _host_paths_now()
    changed = [path for path in before if before[path] != after[path]]
    assert not changed, f"a pure-Python test changed this host's {', '.join(changed)}"
