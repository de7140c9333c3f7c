"""The control-channel tests use the shared fixtures of tests/conftest.py
(the real agent binary, a fake xenstored) and `channel` here: a Controller
serving two guests with real agents (helpers in tests/support/control_channel.py)."""

import subprocess

import pytest
from control_channel import GUESTS, apply_keys

from selena.control.channel import Controller
from selena.control.xenstore import XenstoreConnection


@pytest.fixture
def channel(xenstored, agent_binary):
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    agents = []
    for domid in GUESTS.values():
        xenstored.add_domain(domid)
        apply_keys(dom0, domid)
    for domid in GUESTS.values():
        sock = xenstored.listen(domid)
        agents.append(subprocess.Popen([str(agent_binary), "--device", sock]))
    ctl = Controller(dom0, tdf=1.0)
    for name, domid in GUESTS.items():
        ctl.add_guest(name, domid)
    ctl.wait_ready(timeout=10)
    yield ctl, dom0, xenstored, agent_binary
    ctl.close()
    for proc in agents:
        proc.kill()
        proc.wait()
    dom0.close()
