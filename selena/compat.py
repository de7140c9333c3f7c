"""SELENA's original description style (the ANCS'14 paper, Listings 1 and 2).

A file whose body calls `newNode(...)`, `newLink(...)`, `setArp`, `pushCmd` and
`pushOFRule` at top level runs unchanged: `load_selena_file` executes it with
those names and `NodeType` in scope (no import needed). They can also be
imported explicitly (`from selena.compat import NodeType, newNode, ...`); they
then build the module's default script, `DEFAULT`.

Conventions the listings imply (README, "SELENA's own style"):
- units are the paper's: link rate in Mbit/s, latency in milliseconds
  (one-way, as netem applies it);
- interface tuples are (txqueuelen, MAC or "RANDOM", IP, netmask, gateway);
  the IP is IPv4 or IPv6, the netmask 255.255.255.0, 24 or "/24" (or the
  prefix written on the IP, "fd00::1/64", with the netmask left empty);
- a node's interfaces are eth1, eth2, ... inside the guest (newNode's first
  interface is eth1), so a switch's two ports are eth1/eth2, and OpenFlow
  ports 1/2 once Listing 2 adds them to br0 in that order;
- a "RANDOM" MAC on an interface with IPv4 address a.b.c.d is
  fe:ff:ff:bb:cc:dd (b, c, d in hex): the MACs setArp names;
- NodeType.LINUX_HOST is the tools-host template (busybox plus iperf3, tc,
  netperf, with netserver started at boot); NodeType.LINUX_OVS is an Open
  vSwitch guest whose bridge br0 starts with no ports (Listing 2 adds them);
  NodeType.DEBIAN_HOST is the debian template (newNode(..., packages=[...])
  for Debian packages).
"""

from __future__ import annotations

import contextvars
import enum
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from selena.errors import ScenarioError
from selena.model import Interface, Node, NodeKind, Topology

if TYPE_CHECKING:
    from selena.control.channel import CommandHandle
    from selena.engine import Engine


class NodeType(enum.Enum):
    LINUX_HOST = "tools-host"
    LINUX_OVS = "ovs-switch"
    OF_CONTROLLER = "of-controller"
    # A full Debian guest (SELENA ran unmodified OS images); newNode's
    # packages=[...] adds Debian packages, as add_host's does.
    DEBIAN_HOST = "debian"


_KIND = {NodeType.LINUX_HOST: NodeKind.HOST, NodeType.LINUX_OVS: NodeKind.SWITCH,
         NodeType.OF_CONTROLLER: NodeKind.CONTROLLER, NodeType.DEBIAN_HOST: NodeKind.HOST}
# newNode's first interface is eth1 in the guest.
FIRST_DEVICE = 1


@dataclass(frozen=True)
class SetArp:
    node: str
    iface: str
    ip: str
    mac: str


@dataclass(frozen=True)
class PushCmd:
    node: str
    commands: tuple[str, ...]


@dataclass(frozen=True)
class PushOFRule:
    node: str
    bridge: str
    action: str
    rule: str


Action = SetArp | PushCmd | PushOFRule

# The origin the records of these actions' commands carry (Recorded.origin):
# `selena run` prints what pushCmd's commands printed, as SELENA did.
PUSH_CMD = "pushCmd"
PUSH_OF_RULE = "pushOFRule"


def run_actions(engine: Engine, actions: list[Action]) -> None:
    """SELENA Listing 2 semantics: in file order, each command waited for,
    except a shell command ending in `&`, which is left running until the
    others are done; every record says which action ran it."""
    background: list[CommandHandle] = []
    for action in actions:
        if isinstance(action, SetArp):
            continue                        # applied at boot (plan net directives)
        if isinstance(action, PushCmd):
            for command in action.commands:
                if command.rstrip().endswith("&"):
                    background.append(engine.start(action.node, command.rstrip()[:-1],
                                                   origin=PUSH_CMD))
                else:
                    engine.cmd(action.node, command, origin=PUSH_CMD)
        elif isinstance(action, PushOFRule):
            engine.cmd(action.node, ["ovs-ofctl", action.action, action.bridge, action.rule],
                       origin=PUSH_OF_RULE)
    for handle in background:
        if not handle.done:
            engine.kill(handle, 15)
        engine.wait(handle)


def selena_mac(ip: str) -> str:
    """The MAC of a "RANDOM" interface with IPv4 address a.b.c.d: fe:ff:ff:b:c:d
    (with an IPv6 address, its last three bytes)."""
    b, c, d = ipaddress.ip_address(ip).packed[-3:]
    return f"fe:ff:ff:{b:02x}:{c:02x}:{d:02x}"


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list",
               tuple: "a tuple"}


def _check(value: object, kinds: type | tuple[type, ...], what: str, call: str) -> None:
    if isinstance(value, bool) or not isinstance(value, kinds):
        types = (kinds,) if isinstance(kinds, type) else kinds
        want = "a number" if set(types) == {int, float} else " or ".join(
            _KIND_NAMES.get(k, k.__name__) for k in types)
        raise ScenarioError(f"{call}: {what} must be {want}, got {value!r}")


@dataclass
class SelenaScript:
    """What a SELENA-style file describes: a topology and its scenario actions."""

    topology: Topology
    actions: list[Action] = field(default_factory=list)
    _names: dict[int, str] = field(default_factory=dict)
    # The file's globals after it ran (a clean-API file defines `topology` or `build`).
    namespace_after_run: dict[str, object] = field(default_factory=dict)

    def newNode(self, node_id: int, name: str, node_type: NodeType,  # noqa: N802
                interfaces: list[tuple], vcpus: int = 1, cpu_mask: str | None = None,
                memory: str | int | None = None,
                packages: list[str] | tuple[str, ...] | None = None) -> None:
        call = f"newNode({node_id!r}, {name!r}, ...)"
        _check(node_id, int, "the node id", call)
        _check(name, str, "the name", call)
        if not isinstance(node_type, NodeType):
            raise ScenarioError(f"{call}: the type must be a NodeType member "
                                f"({', '.join(t.name for t in NodeType)}), got {node_type!r}")
        _check(interfaces, (list, tuple), "the interfaces", call)
        _check(vcpus, int, "vcpus", call)
        if cpu_mask is not None:
            _check(cpu_mask, str, "the VCPU mask", call)
        if memory is not None:
            _check(memory, (str, int), "the memory", call)
        if packages is not None:
            _check(packages, (list, tuple), "the packages", call)
            if node_type is not NodeType.DEBIAN_HOST:
                raise ScenarioError(f"{call}: packages need NodeType.DEBIAN_HOST (a Debian "
                                    f"image), not {node_type.name}")
        if node_id in self._names:
            raise ScenarioError(f"{call}: node id {node_id} is already {self._names[node_id]!r}")
        node = self.topology.add_node(name, _KIND[node_type], template=node_type.value,
                                      id=node_id, vcpus=vcpus, cpus=cpu_mask, memory=memory,
                                      packages=packages)
        node.first_device = FIRST_DEVICE
        node.bare_bridge = node_type is NodeType.LINUX_OVS
        for index, spec in enumerate(interfaces):
            node.interfaces.append(_interface(name, index, spec))
        self._names[node_id] = name

    def newLink(self, a: tuple[int, int], b: tuple[int, int],  # noqa: N802
                rate_mbps: float, latency_ms: float) -> None:
        call = f"newLink({a!r}, {b!r}, ...)"
        for end in (a, b):
            if not (isinstance(end, tuple) and len(end) == 2
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in end)):
                raise ScenarioError(f"{call}: each end must be (node id, interface number), "
                                    f"got {end!r}")
        _check(rate_mbps, (int, float), "the rate (Mbit/s)", call)
        _check(latency_ms, (int, float), "the latency (ms)", call)
        link = self.topology.add_link((self._name(a[0]), a[1]), (self._name(b[0]), b[1]),
                                      rate=float(rate_mbps) * 1e6,
                                      delay=float(latency_ms) / 1000)
        # Validation's advice on likely unit slips speaks newLink's units.
        link.given.update({"style": "listing", "rate_mbps": rate_mbps,
                           "latency_ms": latency_ms})

    def setArp(self, node_id: int, iface: str, ip: str, mac: str) -> None:  # noqa: N802
        call = f"setArp({node_id!r}, {iface!r}, ...)"
        _check(iface, str, "the interface", call)
        _check(ip, str, "the IP address", call)
        _check(mac, str, "the MAC address", call)
        node = self._node(node_id)
        self.topology.add_static_arp(node, _device_index(node, iface, call), ip, mac)
        self.actions.append(SetArp(node.name, iface, ip, mac))

    def pushCmd(self, node_id: int, commands: list[str]) -> None:  # noqa: N802
        call = f"pushCmd({node_id!r}, ...)"
        _check(commands, (list, tuple), "the commands", call)
        for command in commands:
            _check(command, str, "each command", call)
        self.actions.append(PushCmd(self._name(node_id), tuple(commands)))

    def pushOFRule(self, node_id: int, bridge: str, action: str, rule: str) -> None:  # noqa: N802
        call = f"pushOFRule({node_id!r}, ...)"
        for what, value in (("the bridge", bridge), ("the action", action), ("the rule", rule)):
            _check(value, str, what, call)
        node = self._node(node_id)
        if node.kind is not NodeKind.SWITCH:
            raise ScenarioError(f"{call}: node {node.name} is a {node.kind.value}, "
                                "not a switch (OpenFlow rules need NodeType.LINUX_OVS)")
        self.actions.append(PushOFRule(node.name, bridge, action, rule))

    def _name(self, node_id: int) -> str:
        return self._node(node_id).name

    def _node(self, node_id: int) -> Node:
        if isinstance(node_id, bool) or not isinstance(node_id, int):
            raise ScenarioError(f"a node id must be an int, got {node_id!r}")
        if node_id not in self._names:
            raise ScenarioError(f"node id {node_id} is used before newNode({node_id}, ...)")
        return self.topology.nodes[self._names[node_id]]

    def namespace(self) -> dict[str, object]:
        return {"NodeType": NodeType, "newNode": self.newNode, "newLink": self.newLink,
                "setArp": self.setArp, "pushCmd": self.pushCmd,
                "pushOFRule": self.pushOFRule}


def _device_index(node: Node, device: str, call: str) -> int:
    """The interface index behind a guest device name (eth1 is the first)."""
    for iface in node.interfaces:
        if node.device(iface.index) == device:
            return iface.index
    have = ", ".join(node.device(i.index) for i in node.interfaces) or "none"
    raise ScenarioError(f"{call}: node {node.name} has no interface {device!r} (it has {have}; "
                        "SELENA numbers a node's interfaces from eth1)")


def _where(node: str, index: int) -> str:
    """newNode's interface as the listing numbers it and as the guest names it."""
    return f"newNode {node!r} interface {index} (eth{index + FIRST_DEVICE})"


def _interface(node: str, index: int, spec: tuple) -> Interface:
    if not isinstance(spec, tuple) or len(spec) != 5:
        raise ScenarioError(f"{_where(node, index)}: want (queue length, MAC, IP, netmask, "
                            f"gateway), got {spec!r}")
    qlen, mac, ip, netmask, gateway = spec
    if isinstance(qlen, bool) or not isinstance(qlen, int):
        raise ScenarioError(f"{_where(node, index)}: the queue length must be an int, got "
                            f"{qlen!r}")
    random = str(mac).upper() == "RANDOM"
    if not ip:
        return Interface(index, mac=None if random else mac, txqueuelen=qlen)
    address, prefix = _address(node, index, ip, netmask)
    return Interface(index, mac=selena_mac(address) if random else mac,
                     ip=f"{address}/{prefix}", gateway=gateway or None, txqueuelen=qlen)


def _address(node: str, index: int, ip: object, netmask: object) -> tuple[str, int]:
    """An interface's address and prefix length from newNode's (IP, netmask):
    IPv4 or IPv6, the netmask as 255.255.255.0, 24 or "/24", or the prefix
    written on the address ("10.0.0.1/24", "fd00::1/64") with no netmask."""
    where = _where(node, index)
    if not isinstance(ip, str):
        raise ScenarioError(f"{where}: the IP address must be a string, got {ip!r}")
    text, _, written = ip.partition("/")
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        raise ScenarioError(f"{where}: {ip!r} is not an IPv4 or IPv6 address") from None
    given = [m for m in (written, netmask) if m not in (None, "")]
    if not given:
        raise ScenarioError(f"{where}: {ip} needs a netmask or prefix length (e.g. "
                            f"{'255.255.255.0 or 24' if address.version == 4 else '64'})")
    prefixes = set()
    for mask in given:
        if isinstance(mask, bool) or not isinstance(mask, str | int):
            raise ScenarioError(f"{where}: the netmask must be a string or a prefix length, "
                                f"got {mask!r}")
        try:
            network = ipaddress.ip_network(f"{address}/{str(mask).strip().lstrip('/')}",
                                           strict=False)
        except ValueError:
            raise ScenarioError(f"{where}: {mask!r} is not a netmask or prefix length for "
                                f"IPv{address.version} address {address}") from None
        prefixes.add(network.prefixlen)
    if len(prefixes) > 1:
        raise ScenarioError(f"{where}: {ip} and netmask {netmask!r} disagree "
                            f"(/{' vs /'.join(str(p) for p in sorted(prefixes))})")
    return str(address), prefixes.pop()


def load_selena_file(path: str | Path, name: str | None = None, tdf: float = 1.0, *,
                     main: bool = False) -> SelenaScript:
    """Execute a SELENA-style (or clean-API) description file and return what
    it describes. Errors in the file are raised as they happen; the loader
    (selena.loader) turns them into messages naming the file and line.
    `main`: run it as `__main__` (a script; the loader stops it at its
    Experiment)."""
    path = Path(path)
    script = SelenaScript(Topology(name or path.stem.replace("_", "-"), tdf=tdf))
    namespace = script.namespace_after_run
    namespace.update({"__file__": str(path),
                      "__name__": "__main__" if main else "__selena_scenario__"})
    namespace.update(script.namespace())
    try:
        code = compile(path.read_text(), str(path), "exec")
    except SyntaxError as exc:
        raise ScenarioError(f"{path}:{exc.lineno}: {exc.msg}") from None
    token = _ACTIVE.set(script)
    try:
        exec(code, namespace)  # noqa: S102 - the user's own experiment description
    finally:
        _ACTIVE.reset(token)
    return script


# The importable functions (`from selena.compat import newNode`) act on the
# script being loaded by load_selena_file, or on DEFAULT outside of it, so a
# file that imports them explicitly describes the same thing as one that
# relies on the injected names.
DEFAULT = SelenaScript(Topology("selena"))
_ACTIVE: contextvars.ContextVar[SelenaScript] = contextvars.ContextVar("selena_script")


def newNode(*args, **kwargs):  # noqa: N802 - the paper's name
    return _ACTIVE.get(DEFAULT).newNode(*args, **kwargs)


def newLink(*args, **kwargs):  # noqa: N802
    return _ACTIVE.get(DEFAULT).newLink(*args, **kwargs)


def setArp(*args, **kwargs):  # noqa: N802
    return _ACTIVE.get(DEFAULT).setArp(*args, **kwargs)


def pushCmd(*args, **kwargs):  # noqa: N802
    return _ACTIVE.get(DEFAULT).pushCmd(*args, **kwargs)


def pushOFRule(*args, **kwargs):  # noqa: N802
    return _ACTIVE.get(DEFAULT).pushOFRule(*args, **kwargs)
