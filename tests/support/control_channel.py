"""Helpers of tests/control's `channel` fixture (its conftest.py): a
Controller serving two guests, real agents on the host, the fake xenstored."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from selena.control.channel import Controller
from selena.control.keys import control_keys
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XenstoreConnection

GUESTS = {"h1": 5, "h2": 6}


def apply_keys(xs: XenstoreConnection, domid: int, **kw) -> None:
    for key in control_keys(domid, "exp", **kw):
        xs.write(key.path, key.value)
        xs.set_perms(key.path, list(key.perms))


@contextmanager
def guests_with_agents(xenstored: Any, agent_binary: Any) -> Iterator[XenstoreConnection]:
    """Dom0's connection to the fake xenstored, with GUESTS added, their
    control keys written and a real agent running for each; the agents
    killed and the connection closed afterwards."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    agents = []
    try:
        for domid in GUESTS.values():
            xenstored.add_domain(domid)
            apply_keys(dom0, domid)
        for domid in GUESTS.values():
            sock = xenstored.listen(domid)
            agents.append(subprocess.Popen([str(agent_binary), "--device", sock],
                                           preexec_fn=_as_a_background_job))
        yield dom0
    finally:
        for proc in agents:
            proc.kill()
            proc.wait()
        dom0.close()


def _as_a_background_job() -> None:
    """The dispositions a guest's init gives the agent: tiny-host's starts it
    as `( ... ) &` in a non-interactive sh, which ignores SIGINT and SIGQUIT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def run(ctl: Controller, guest: str, timeout: float = 20, **kw):
    return ctl.run(guest, CommandSpec(**kw), timeout=timeout)


def record_batches(ctl: Controller) -> list[list[str]]:
    """The paths of every read_each() batch the controller's connection
    sends from now on, in order (the list returned fills as it goes)."""
    batches: list[list[str]] = []
    read_each = ctl.xs.read_each

    def recorded(paths: Any) -> Any:
        batches.append(list(paths))
        return read_each(paths)
    # A test double wrapping the method, as a spy: mypy forbids method assignment.
    ctl.xs.read_each = recorded     # type: ignore[method-assign]
    return batches
