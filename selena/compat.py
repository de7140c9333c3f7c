"""SELENA's original description style (the ANCS'14 paper, Listings 1 and 2).

A file whose body calls `newNode(...)`, `newLink(...)`, `setArp`, `pushCmd` and
`pushOFRule` at top level runs unchanged: `load_selena_file` executes it with
those names and `NodeType` in scope (no import needed). They can also be
imported explicitly (`from selena.compat import NodeType, newNode, ...`); they
then build the module's default script, `DEFAULT`.

Units are the paper's: link rate in Mbit/s, latency in milliseconds (one-way,
as netem applies it); interface tuples are (txqueuelen, MAC or "RANDOM", IP,
netmask, gateway).
"""

from __future__ import annotations

import contextvars
import enum
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from selena.errors import ScenarioError
from selena.model import Interface, NodeKind, Topology


class NodeType(enum.Enum):
    LINUX_HOST = "tiny-host"
    LINUX_OVS = "ovs-switch"
    OF_CONTROLLER = "of-controller"


_KIND = {NodeType.LINUX_HOST: NodeKind.HOST, NodeType.LINUX_OVS: NodeKind.SWITCH,
         NodeType.OF_CONTROLLER: NodeKind.CONTROLLER}


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
                memory: str | None = None) -> None:
        if not isinstance(node_type, NodeType):
            raise ScenarioError(f"newNode({node_id}, {name!r}): type must be a NodeType, "
                                f"got {node_type!r}")
        node = self.topology.add_node(name, _KIND[node_type], template=node_type.value,
                                      id=node_id, vcpus=vcpus, cpus=cpu_mask, memory=memory)
        for index, spec in enumerate(interfaces):
            node.interfaces.append(_interface(name, index, spec))
        self._names[node_id] = name

    def newLink(self, a: tuple[int, int], b: tuple[int, int],  # noqa: N802
                rate_mbps: float, latency_ms: float) -> None:
        self.topology.add_link((self._name(a[0]), a[1]), (self._name(b[0]), b[1]),
                               rate=float(rate_mbps) * 1e6, delay=float(latency_ms) / 1000)

    def setArp(self, node_id: int, iface: str, ip: str, mac: str) -> None:  # noqa: N802
        self.actions.append(SetArp(self._name(node_id), iface, ip, mac))

    def pushCmd(self, node_id: int, commands: list[str]) -> None:  # noqa: N802
        self.actions.append(PushCmd(self._name(node_id), tuple(commands)))

    def pushOFRule(self, node_id: int, bridge: str, action: str, rule: str) -> None:  # noqa: N802
        self.actions.append(PushOFRule(self._name(node_id), bridge, action, rule))

    def _name(self, node_id: int) -> str:
        if node_id not in self._names:
            raise ScenarioError(f"node id {node_id} is used before newNode({node_id}, ...)")
        return self._names[node_id]

    def namespace(self) -> dict[str, object]:
        return {"NodeType": NodeType, "newNode": self.newNode, "newLink": self.newLink,
                "setArp": self.setArp, "pushCmd": self.pushCmd,
                "pushOFRule": self.pushOFRule}


def _interface(node: str, index: int, spec: tuple) -> Interface:
    if not isinstance(spec, tuple) or len(spec) != 5:
        raise ScenarioError(f"newNode {node!r} interface {index}: want (queue length, MAC, IP, "
                            f"netmask, gateway), got {spec!r}")
    qlen, mac, ip, netmask, gateway = spec
    if not ip:
        return Interface(index, mac=None if str(mac).upper() == "RANDOM" else mac,
                         txqueuelen=int(qlen))
    try:
        prefix = ipaddress.ip_network(f"0.0.0.0/{netmask}").prefixlen
    except ValueError:
        raise ScenarioError(
            f"newNode {node!r} interface {index}: bad netmask {netmask!r}") from None
    return Interface(index, mac=None if str(mac).upper() == "RANDOM" else mac,
                     ip=f"{ip}/{prefix}", gateway=gateway or None, txqueuelen=int(qlen))


def load_selena_file(path: str | Path, name: str | None = None, tdf: float = 1.0) -> SelenaScript:
    """Execute a SELENA-style description file and return what it describes."""
    path = Path(path)
    script = SelenaScript(Topology(name or path.stem.replace("_", "-"), tdf=tdf))
    namespace = script.namespace_after_run
    namespace.update({"__file__": str(path), "__name__": "__selena_scenario__"})
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
