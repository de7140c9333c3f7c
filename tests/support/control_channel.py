"""Helpers of tests/control's `channel` fixture (its conftest.py): a
Controller serving two guests, real agents on the host, the fake xenstored."""

from __future__ import annotations

from selena.control.channel import Controller
from selena.control.keys import control_keys
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XenstoreConnection

GUESTS = {"h1": 5, "h2": 6}


def apply_keys(xs: XenstoreConnection, domid: int, **kw) -> None:
    for key in control_keys(domid, "exp", **kw):
        xs.write(key.path, key.value)
        xs.set_perms(key.path, list(key.perms))


def run(ctl: Controller, guest: str, timeout: float = 20, **kw):
    return ctl.run(guest, CommandSpec(**kw), timeout=timeout)
