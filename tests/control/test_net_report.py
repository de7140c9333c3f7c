"""A guest whose boot-time network directives fail is an error naming the
guest and the directive, not a guest that silently lacks its addresses."""

from __future__ import annotations

import subprocess

import pytest

from selena.control.channel import Controller
from selena.control.keys import control_keys
from selena.control.xenstore import XenstoreConnection
from selena.errors import GuestSetupError


def test_a_failed_network_directive_is_reported_by_wait_ready(xenstored, agent_binary):
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(5)
    for key in control_keys(5, "exp", net="reboot now"):
        dom0.write(key.path, key.value)
        dom0.set_perms(key.path, list(key.perms))
    agent = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(5)])
    ctl = Controller(dom0)
    try:
        ctl.add_guest("h1", 5)
        with pytest.raises(GuestSetupError) as info:
            ctl.wait_ready(30)
    finally:
        ctl.close()
        agent.kill()
        agent.wait()
        dom0.close()
    assert str(info.value) == "guest h1: network setup failed at directive 0: unknown directive"
