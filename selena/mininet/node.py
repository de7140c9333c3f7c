"""Mininet's node classes, as names a script or custom file may pass
(`switch=OVSSwitch`, `controller=DefaultController`, `cls=CPULimitedHost`).
selena's hosts are Xen guests and its switches Open vSwitch guests whatever
class is named: these only stand for the choice (selena.mininet.net checks
which are accepted)."""

from __future__ import annotations


class Node:
    """Mininet's base node class (a name only, here)."""


class Host(Node):
    pass


class CPULimitedHost(Host):
    """Accepted as a class; its cpu= is selena's cpu_share and its cores=
    its cpus= (selena.mininet.topo), on any host class."""


class Switch(Node):
    pass


class OVSSwitch(Switch):
    pass


OVSKernelSwitch = OVSSwitch


class OVSBridge(OVSSwitch):
    pass


class UserSwitch(Switch):
    pass


class LinuxBridge(Switch):
    pass


class Controller(Node):
    pass


class DefaultController(Controller):
    pass


class OVSController(Controller):
    pass


class NOX(Controller):
    pass


class Ryu(Controller):
    pass


class RemoteController(Controller):
    """Refused by Mininet(): selena's switches do not dial an outside controller."""


HOSTS = (Host,)
SWITCHES = (Switch,)
