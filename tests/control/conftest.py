"""The control-channel tests use the shared fixtures of tests/conftest.py
(the real agent binary, a fake xenstored) and `channel` here: a Controller
serving two guests with real agents (helpers in tests/support/control_channel.py)."""

import pytest
from control_channel import GUESTS, guests_with_agents

from selena.control.channel import Controller


@pytest.fixture
def channel(xenstored, agent_binary):
    with guests_with_agents(xenstored, agent_binary) as dom0:
        ctl = Controller(dom0, tdf=1.0)
        for name, domid in GUESTS.items():
            ctl.add_guest(name, domid)
        ctl.wait_ready(timeout=10)
        yield ctl, dom0, xenstored, agent_binary
        ctl.close()
