"""Nodes, interfaces, links and hubs of an experiment, and the Pythonic API to build them."""

from __future__ import annotations

import enum
import hashlib
import ipaddress
import os
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TypedDict, TypeVar, Unpack

from selena import units
from selena.errors import ArgumentError, UnitError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_SHOWN: dict[str, str | None] = {}   # code file -> how to name it (None: selena's own)


def _shown_name(filename: str) -> str | None:
    if filename not in _SHOWN:
        path = os.path.abspath(filename)
        if path.startswith(_PACKAGE_DIR + os.sep) or filename.startswith("<"):
            _SHOWN[filename] = None
        else:
            relative = os.path.relpath(path)
            _SHOWN[filename] = path if relative.startswith(".." + os.sep) else relative
    return _SHOWN[filename]


def caller_location() -> str | None:
    """`file:line` of the innermost caller outside the selena package: where a
    user's scenario or script declared a node, link or entry, so that
    validation can point there."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        shown = _shown_name(frame.f_code.co_filename)
        if shown is not None:
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return None


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "True or False",
               type(None): "None", tuple: "a tuple", list: "a list"}


def _want(value: object, types: tuple[type, ...], what: str, call: str,
          example: str = "") -> None:
    """Raise ArgumentError at the caller's line unless `value` is one of
    `types` (a bool is not a number here, though Python says it is)."""
    if isinstance(value, types) and (bool in types or not isinstance(value, bool)):
        return
    names = [_TYPE_NAMES.get(t, t.__name__) for t in types if t is not float or int not in types]
    if float in types and int in types:
        names = ["a number" if n == "an integer" else n for n in names]
    want = " or ".join(names) + (f" ({example})" if example else "")
    raise ArgumentError(caller_location(), f"{call}: {what} must be {want}, "
                                           f"not {type(value).__name__} {value!r}")


_T = TypeVar("_T")


def _parsed(parse: Callable[[Any], _T], value: object, what: str, call: str) -> _T:
    """A unit parser's result, its error raised at the caller's line."""
    try:
        return parse(value)
    except UnitError as exc:
        # The unit's own words name the value ("memory '8M' is ..."); say which
        # argument when they do not ("time '5x'" for a delay).
        shown = str(exc) if str(exc).startswith(what) else f"{what}: {exc}"
        raise ArgumentError(caller_location(), f"{call}: {shown}") from None


_TEXT = (str, type(None))
_AMOUNT = (str, int, float)


class MininetWordError(ArgumentError, AttributeError):
    """Mininet's method name used on selena's Topology: one line at the
    caller's line naming selena's word (still an AttributeError, so that
    hasattr() works)."""


# Mininet's words on selena's Topology, with selena's own.
MININET_METHODS = {
    "addHost": "selena's is add_host (topo.add_host('h1', ip='10.0.0.1/24'))",
    "addSwitch": "selena's is add_switch (topo.add_switch('s1'))",
    "addLink": "selena's is add_link (topo.add_link(h1, s1, rate='10Mbit', delay='5ms'))",
    "addController": "selena's is add_controller",
    "addNode": "selena's is add_host or add_switch",
    "hosts": "selena's are [n for n in topo.nodes.values() if n.kind is NodeKind.HOST]",
    "switches": "selena's are [n for n in topo.nodes.values() if n.kind is "
                "NodeKind.SWITCH]",
    "build": "a Mininet Topo's build() is selena.mininet.Topo's; selena's Topology is "
             "built by calling add_host/add_switch/add_link",
}

# Guest types a node can be (Node.virt). An HVM node runs on a device model
# (qemu-system-xen) in Dom0.
GUEST_TYPES = ("pv", "pvh", "hvm")
NODE_OPTIONS = ("template", "id", "vcpus", "cpus", "memory", "tsc_mode", "cpu_time",
                "cpu_share", "packages", "virt")
HOST_OPTIONS = ("ip", "mac", "gateway", "ip6", "gateway6")
SWITCH_OPTIONS = ("controller", "switch_model")
LINK_OPTIONS = ("rate", "delay", "jitter", "loss", "queue", "prio")


def _mininet_hint(key: str, value: object) -> str | None:
    """selena's spelling of a Mininet option, with the value converted."""
    if key == "bw":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"bw= is Mininet's (Mbit/s); selena's is rate=\"{value:g}Mbit\""
        return "bw= is Mininet's (Mbit/s); selena's is rate=\"10Mbit\""
    if key == "max_queue_size":
        return f"max_queue_size= is Mininet's; selena's is queue={value!r} (packets)"
    if key == "use_htb":
        return "use_htb= is Mininet's; selena chooses the qdisc itself: drop it"
    if key in ("port1", "port2"):
        return (f"{key}= is Mininet's; selena names an interface with a (node, index) end: "
                "add_link((h1, 0), (s1, 1))")
    if key in ("intfName1", "intfName2"):
        return f"{key}= is Mininet's; selena's guests name interface i eth<i>: drop it"
    if key == "defaultRoute":
        return "defaultRoute= is Mininet's; selena's is gateway='10.0.0.254'"
    if key == "cpu":
        share = (f"{value:g}" if isinstance(value, int | float) and not isinstance(value, bool)
                 else "0.5")
        return (f"cpu= is Mininet's; selena's is cpu_share={share} (that share of the host's "
                "CPUs per virtual second)")
    if key == "cores":
        return "cores= is Mininet's; selena pins a guest's vCPUs with cpus='2-3'"
    if key == "dpid":
        return "dpid= is Mininet's; selena numbers its switches itself: drop it"
    if key in ("cls", "inNamespace", "privateDirs"):
        return f"{key}= is Mininet's; selena's nodes are Xen guests: drop it"
    if key == "stp":
        return "stp= is Mininet's; selena's is the node's attribute: node.stp = True"
    return None


def _unknown_options(call: str, unknown: dict[str, object], known: tuple[str, ...]) -> None:
    """One line at the caller's line for options selena does not have:
    Mininet's get selena's spelling, others the closest known name."""
    import difflib

    key, value = next(iter(unknown.items()))
    hint = _mininet_hint(key, value)
    if hint is None:
        close = difflib.get_close_matches(key, known, n=1)
        hint = (f"unknown option {key}=" + (f"; did you mean {close[0]}=?" if close else "")
                + f" (options: {', '.join(known)})")
    raise ArgumentError(caller_location(), f"{call}: {hint}")


class NodeKind(enum.Enum):
    HOST = "host"
    SWITCH = "switch"
    CONTROLLER = "controller"


DEFAULT_TEMPLATES = {
    NodeKind.HOST: "tiny-host",
    NodeKind.SWITCH: "ovs-switch",
    NodeKind.CONTROLLER: "of-controller",
}
# What a template needs by default (its template.yaml says the same);
# other templates get DEFAULT_MEMORY_MB.
TEMPLATE_MEMORY_MB = {"tiny-host": 32, "tools-host": 64, "ovs-switch": 256,
                      "of-controller": 256, "debian": 128}
DEFAULT_MEMORY_MB = 128


def numbered_mac(number: int) -> str:
    """The MAC Mininet gives host number `number` (1 -> 00:00:00:00:00:01)."""
    return ":".join(f"{b:02x}" for b in number.to_bytes(6, "big"))


def _check_address_args(call: str, **values: object) -> None:
    examples = {"ip": "'10.0.0.1/24'", "ip6": "'fd00::1/64'", "mac": "'02:00:00:00:00:01'",
                "gateway": "'10.0.0.254'", "gateway6": "'fd00::fe'"}
    for what, value in values.items():
        _want(value, _TEXT, what, call, examples[what])


@dataclass
class Interface:
    index: int
    mac: str | None = None          # None: derived deterministically from the experiment
    ip: str | None = None           # "10.0.1.2/24" (or an IPv6 address with its prefix)
    gateway: str | None = None
    txqueuelen: int = 1000
    ip6: str | None = None          # a second, IPv6 address: "fd00::1/64"
    gateway6: str | None = None

    def addresses(self) -> list[str]:
        """Every address of the interface, with its prefix length."""
        return [a for a in (self.ip, self.ip6) if a]


@dataclass
class Node:
    name: str
    kind: NodeKind
    template: str
    id: int
    vcpus: int = 1
    cpus: str | None = None         # pinning mask, e.g. "4,5,6,7" or "2-3"
    memory_mb: int = 128
    interfaces: list[Interface] = field(default_factory=list)
    # OpenFlow switches: the controller node they connect to (none: a plain
    # learning switch) and the switch-model profile emulating a hardware
    # switch's control plane on that channel (none: Open vSwitch's own).
    controller: str | None = None
    switch_model: str | None = None
    # The guest names interface index i `eth<i + first_device>`: SELENA's
    # listings number a node's interfaces from eth1.
    first_device: int = 0
    # A switch whose bridge br0 is left without ports: the scenario adds them
    # itself, as SELENA's Listing 2 does with ovs-vsctl add-port.
    bare_bridge: bool = False
    # A standalone switch in a topology with loops runs the rapid spanning
    # tree protocol (Open vSwitch's RSTP).
    stp: bool = False
    # Static OpenFlow entries (ovs-ofctl add-flow syntax, OpenFlow 1.3) for a
    # switch without a controller: its bridge forwards by these alone (fail
    # mode secure, no learning, no flooding), so a topology with loops needs
    # no spanning tree and can use every path.
    flows: list[str] = field(default_factory=list)
    # The guest's TSC: None for the hypervisor's default (emulated, hence
    # dilated, for a dilated guest), "native" (the opt-out: raw RDTSC, faster)
    # or "emulate".
    tsc_mode: str | None = None
    # The guest's type: "pv" (default), "pvh" (the same kernel in an HVM
    # container, as Xen distributions without PV run guests) or "hvm" (the
    # same kernel on an emulated PC: firmware, PCI, PIT, RTC, HPET, on a
    # device model in Dom0). PVH and HVM guests' TSC is emulated unless
    # tsc_mode says "native".
    virt: str = "pv"
    # "dilated" (default): the guest's CPU seems TDF times faster, as in
    # SELENA; "real": capped to 100/TDF % per vCPU, the speed of TDF 1.
    cpu_time: str = "dilated"
    # Mininet's CPULimitedHost cpu=: the guest may use this share of the
    # host's CPUs (0 to 1) per virtual second, at any TDF (a Xen cap that
    # follows the TDF); None: no such cap.
    cpu_share: float | None = None
    # Debian packages installed on top of a disk-image template (debian or
    # one based on it): an image variant built once per package list.
    packages: tuple[str, ...] = ()
    defined_at: str | None = field(default=None, compare=False)

    def device(self, index: int) -> str:
        """The guest's name for interface `index`."""
        return f"eth{index + self.first_device}"

    def interface(self, index: int) -> Interface | None:
        return next((i for i in self.interfaces if i.index == index), None)

    def add_interface(self, index: int, ip: str | None = None, *, mac: str | None = None,
                      gateway: str | None = None, txqueuelen: int = 1000,
                      ip6: str | None = None, gateway6: str | None = None) -> Interface:
        """Another interface (ethN by index); validate() reports duplicates."""
        call = f"add_interface({index!r}, ...)"
        _want(index, (int,), "the index", call)
        _want(txqueuelen, (int,), "txqueuelen", call)
        _check_address_args(call, ip=ip, mac=mac, gateway=gateway, ip6=ip6, gateway6=gateway6)
        iface = Interface(index, mac=mac, ip=ip, gateway=gateway, txqueuelen=txqueuelen,
                          ip6=ip6, gateway6=gateway6)
        self.interfaces.append(iface)
        return iface


@dataclass(frozen=True)
class Endpoint:
    node: str
    iface: int

    def __str__(self) -> str:
        return f"{self.node}:eth{self.iface}"



class NodeOptions(TypedDict, total=False):
    """add_node's keywords that add_host, add_switch and add_controller
    pass on."""

    template: str | None
    id: int | None
    vcpus: int
    cpus: str | None
    memory: str | int | None
    tsc_mode: str | None
    cpu_time: str
    cpu_share: float | None
    packages: Sequence[str] | str | None
    virt: str


class LinkOptions(TypedDict, total=False):
    """add_link's shaping keywords, as the --topo builders and a --link spec
    pass them on to every link."""

    rate: str | float | None
    delay: str | float
    jitter: str | float
    loss: str | float
    queue: int | None
    prio: bool


@dataclass
class Link:
    """A point-to-point link. `delay_s` is one-way: each direction adds it once."""

    a: Endpoint
    b: Endpoint
    rate_bps: float | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0
    queue_packets: int | None = None
    # Strict-priority queueing by IP precedence in each direction
    # (selena/shaping/prio.py); needs a rate.
    prio: bool = False
    defined_at: str | None = field(default=None, compare=False)
    # The values as the user wrote them ("1%", 0.5, ...): validation warns
    # about likely unit slips, which the parsed values no longer show.
    given: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def __str__(self) -> str:
        return f"link {self.a}--{self.b}"


@dataclass(frozen=True)
class StaticArp:
    """A permanent neighbour entry set at boot (the paper's setArp)."""

    node: str
    iface: int
    ip: str
    mac: str
    defined_at: str | None = field(default=None, compare=False)


@dataclass
class Hub:
    """One shared L2 segment joining several interfaces."""

    name: str
    endpoints: list[Endpoint] = field(default_factory=list)
    defined_at: str | None = field(default=None, compare=False)


NodeRef = "Node | str | tuple[Node | str, int]"


@dataclass
class Topology:
    name: str
    tdf: float = 1.0
    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    hubs: list[Hub] = field(default_factory=list)
    # Permanent neighbour entries set at boot (the paper's setArp).
    static_arp: list[StaticArp] = field(default_factory=list)
    # Interfaces already attached, per node: keeps add_link O(1) on large topologies.
    _attached: dict[str, set[int]] = field(default_factory=dict, init=False, repr=False,
                                           compare=False)

    def __getattr__(self, name: str) -> object:
        # Only reached for a missing attribute: Mininet's words get selena's.
        if name in MININET_METHODS:
            raise MininetWordError(caller_location(), f"Topology has no {name}: "
                                                      f"{MININET_METHODS[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}",
                             name=name, obj=self)

    def __post_init__(self) -> None:
        _want(self.name, (str,), "the name", "Topology(...)", "'pair'")
        _want(self.tdf, (int, float, str), "tdf", "Topology(...)", "10")

    # -- building ----------------------------------------------------------------

    def wired_interfaces(self, node: Node | str) -> list[int]:
        """Indexes of the node's interfaces attached to a link or hub."""
        name = node.name if isinstance(node, Node) else node
        return sorted(self._attached.get(name, ()))

    def add_static_arp(self, node: Node | str, iface: int, ip: str, mac: str) -> None:
        """A permanent ARP (IPv4) or neighbour (IPv6) entry on node's interface
        `iface`, applied at boot; `mac` must be the MAC of the interface that
        holds `ip`, when that interface is part of the topology."""
        call = "add_static_arp"
        _want(node, (Node, str), "the node", call)
        _want(iface, (int,), "the interface index", call)
        _want(ip, (str,), "the IP address", call, "'10.0.0.2'")
        _want(mac, (str,), "the MAC address", call, "'02:00:00:00:00:02'")
        name = node.name if isinstance(node, Node) else node
        self.static_arp.append(StaticArp(name, iface, ip, mac, caller_location()))

    def add_node(self, name: str, kind: NodeKind, *, template: str | None = None,
                 id: int | None = None, vcpus: int = 1, cpus: str | None = None,
                 memory: str | int | None = None, tsc_mode: str | None = None,
                 cpu_time: str = "dilated", cpu_share: float | None = None,
                 packages: Sequence[str] | str | None = None, virt: str = "pv",
                 **unknown: object) -> Node:
        """Add a node; errors about it are reported by validation, not here.
        memory: "512M" (= "512MB" = "512MiB"), "1G", or a number of MiB; None
        gives the template's default (TEMPLATE_MEMORY_MB).
        cpu_time: "dilated" or "real" (see Node.cpu_time).
        cpu_share: a share of the host's CPUs per virtual second, 0.25 (see
        Node.cpu_share; Mininet's CPULimitedHost cpu=).
        packages: Debian packages for a debian-based template ("memcached"
        or ["memcached", "ptpd"]).
        virt: the guest's type, "pv" (default), "pvh" or "hvm"."""
        call = f"add_{kind.value if isinstance(kind, NodeKind) else 'node'}({name!r}, ...)"
        if unknown:
            _unknown_options(call, unknown, NODE_OPTIONS + (
                HOST_OPTIONS if kind is NodeKind.HOST else
                SWITCH_OPTIONS if kind is NodeKind.SWITCH else ()))
        _want(name, (str,), "the name", call, "'h1'")
        _want(kind, (NodeKind,), "the kind", call)
        _want(template, _TEXT, "template", call)
        _want(id, (int, type(None)), "id", call)
        _want(vcpus, (int,), "vcpus", call)
        _want(cpus, _TEXT, "cpus", call, "'2-3'")
        _want(tsc_mode, _TEXT, "tsc_mode", call)
        _want(cpu_time, (str,), "cpu_time", call)
        _want(cpu_share, (int, float, type(None)), "cpu_share", call, "0.25")
        _want(virt, (str,), "virt", call, "'pvh'")
        _want(packages, (str, list, tuple, type(None)), "packages", call)
        for package in () if packages is None or isinstance(packages, str) else packages:
            _want(package, (str,), "each package", call)
        template = template or DEFAULT_TEMPLATES[kind]
        if memory is None:
            memory_mb = TEMPLATE_MEMORY_MB.get(template, DEFAULT_MEMORY_MB)
        else:
            memory_mb = _parsed(units.memory_mb, memory, "memory", call)
        node = Node(
            name=name, kind=kind, template=template,
            id=len(self.nodes) if id is None else id, vcpus=vcpus, cpus=cpus,
            memory_mb=memory_mb, defined_at=caller_location(), tsc_mode=tsc_mode,
            cpu_time=cpu_time, virt=virt,
            cpu_share=None if cpu_share is None else float(cpu_share),
            packages=(packages,) if isinstance(packages, str) else tuple(packages or ()),
        )
        # Duplicate names are kept apart so validation can name them.
        key = name if name not in self.nodes else f"{name}#{len(self.nodes)}"
        self.nodes[key] = node
        return node

    def add_host(self, name: str, ip: str | None = None, *, mac: str | None = None,
                 gateway: str | None = None, ip6: str | None = None,
                 gateway6: str | None = None, **kwargs: Unpack[NodeOptions]) -> Node:
        """A host; ip/ip6 (with gateways) address its first interface, eth0."""
        _check_address_args(f"add_host({name!r}, ...)", ip=ip, mac=mac, gateway=gateway,
                            ip6=ip6, gateway6=gateway6)
        node = self.add_node(name, NodeKind.HOST, **kwargs)
        if ip is not None or mac is not None or ip6 is not None:
            node.interfaces.append(Interface(0, mac=mac, ip=ip, gateway=gateway, ip6=ip6,
                                             gateway6=gateway6))
        return node

    def use_host_template(self, template: str,
                          names: Collection[str] | None = None) -> list[str]:
        """Hosts (all, or those in `names`) still on the default template move
        to `template`, with its default memory where theirs was the old
        default's; the names of those moved, in order. For options that pick
        the hosts' template of a topology made elsewhere (--host-template,
        --test iperf); hosts on any other template stay on it."""
        default = DEFAULT_TEMPLATES[NodeKind.HOST]
        moved = []
        for node in self.nodes.values():
            if node.kind is not NodeKind.HOST or node.template != default \
                    or (names is not None and node.name not in names):
                continue
            if node.memory_mb == TEMPLATE_MEMORY_MB[default]:
                node.memory_mb = TEMPLATE_MEMORY_MB.get(template, DEFAULT_MEMORY_MB)
            node.template = template
            moved.append(node.name)
        return moved

    def number_host_macs(self) -> list[str]:
        """mn's --mac: each host's first interface without a MAC of its own
        takes its IPv4 address's host number as MAC (10.0.0.3/8 ->
        00:00:00:00:00:03), as Mininet's autoSetMacs does; the hosts given one."""
        numbered = []
        for node, iface, address in self._hosts_ipv4():
            if iface.mac and iface.mac.upper() != "RANDOM":
                continue
            iface.mac = numbered_mac(int(address.ip) - int(address.network.network_address))
            numbered.append(node.name)
        return numbered

    def static_arp_between_hosts(self) -> int:
        """mn's --arp: every host a permanent ARP entry for every other host's
        first IPv4 address and that interface's MAC (its own or derived);
        how many were added."""
        entries = self.arp_entries_between_hosts()
        for node, ip, mac in entries:
            self.add_static_arp(node, 0, ip, mac)
        return len(entries)

    def arp_entries_between_hosts(self) -> list[tuple[str, str, str]]:
        """(host, IPv4 address, MAC) for every host and every other host's
        first IPv4 address and that interface's MAC: the entries of mn's
        --arp and Mininet's staticArp."""
        addressed = self._hosts_ipv4()
        return [(node.name, str(address.ip), self.mac_of(other, iface))
                for node, _, _ in addressed
                for other, iface, address in addressed if other is not node]

    def _hosts_ipv4(self) -> list[tuple[Node, Interface, ipaddress.IPv4Interface]]:
        """Each host whose first interface has an IPv4 address, with both (an
        address that does not parse is validation's to name)."""
        found = []
        for node in self.nodes.values():
            iface = node.interface(0) if node.kind is NodeKind.HOST else None
            if iface is None or not iface.ip:
                continue
            try:
                address = ipaddress.ip_interface(iface.ip)
            except ValueError:
                continue
            if isinstance(address, ipaddress.IPv4Interface):
                found.append((node, iface, address))
        return found

    def add_switch(self, name: str, *, controller: Node | str | None = None,
                   switch_model: str | None = None,
                   **kwargs: Unpack[NodeOptions]) -> Node:
        """An Open vSwitch guest. With a controller it is an OpenFlow switch
        (its interface with an IP address is the management port toward the
        controller, the others are datapath ports); switch_model names a
        profile in switch-model/profiles (e.g. "pica8-p3290")."""
        call = f"add_switch({name!r}, ...)"
        _want(controller, (Node, str, type(None)), "controller", call)
        _want(switch_model, _TEXT, "switch_model", call)
        node = self.add_node(name, NodeKind.SWITCH, **kwargs)
        node.controller = controller.name if isinstance(controller, Node) else controller
        node.switch_model = switch_model
        return node

    def add_controller(self, name: str, ip: str | None = None,
                       **kwargs: Unpack[NodeOptions]) -> Node:
        """An OpenFlow controller guest (of-controller: os-ken with selena's
        reactive learning switch, listening on TCP 6653)."""
        _check_address_args(f"add_controller({name!r}, ...)", ip=ip)
        node = self.add_node(name, NodeKind.CONTROLLER, **kwargs)
        if ip is not None:
            node.interfaces.append(Interface(0, ip=ip))
        return node

    def add_link(self, a: Node | str | tuple[Node | str, int],
                 b: Node | str | tuple[Node | str, int], *,
                 rate: str | float | None = None, delay: str | float = 0,
                 jitter: str | float = 0, loss: str | float = 0,
                 queue: int | None = None, prio: bool = False, **unknown: object) -> Link:
        """Link two nodes. A node alone uses its first unlinked interface, or a new one.
        prio: each direction queues by IP precedence in three strict-priority
        bands (6-7, 4-5, the rest) instead of one FIFO; needs a rate."""
        call = "add_link"
        if unknown:
            _unknown_options(call, unknown, LINK_OPTIONS)
        _want(rate, (*_AMOUNT, type(None)), "rate", call, "'100Mbit', or bit/s")
        _want(delay, _AMOUNT, "delay", call, "'5ms', or seconds")
        _want(jitter, _AMOUNT, "jitter", call, "'1ms', or seconds")
        _want(loss, _AMOUNT, "loss", call, "'1%', or a ratio")
        _want(queue, (int, type(None)), "queue", call, "packets, e.g. 100")
        _want(prio, (bool,), "prio", call)
        rate_bps = None if rate is None else _parsed(units.rate_bps, rate, "rate", call)
        delay_s = _parsed(units.seconds, delay, "delay", call)
        jitter_s = _parsed(units.seconds, jitter, "jitter", call)
        loss_ratio = _parsed(units.ratio, loss, "loss", call)
        link = Link(self._attach(a, call), self._attach(b, call),
                    rate_bps=rate_bps, delay_s=delay_s, jitter_s=jitter_s,
                    loss=loss_ratio, queue_packets=queue, prio=prio,
                    defined_at=caller_location(),
                    given={"rate": rate, "delay": delay, "jitter": jitter, "loss": loss})
        self.links.append(link)
        return link

    def add_hub(self, name: str, *members: Node | str | tuple[Node | str, int]) -> Hub:
        _want(name, (str,), "the name", "add_hub")
        hub = Hub(name, [self._attach(m, f"add_hub({name!r}, ...)") for m in members],
                  caller_location())
        self.hubs.append(hub)
        return hub

    def _attach(self, ref: Node | str | tuple[Node | str, int], call: str = "add_link") -> Endpoint:
        if isinstance(ref, tuple):
            if len(ref) != 2 or not isinstance(ref[0], Node | str) \
                    or isinstance(ref[1], bool) or not isinstance(ref[1], int):
                raise ArgumentError(caller_location(), f"{call}: an end (node, interface "
                                    f"index) must be like (h1, 0), not {ref!r}")
        else:
            _want(ref, (Node, str), "each end", call, "a node, its name, or (node, index)")
        endpoint = self._endpoint(ref)
        self._attached.setdefault(endpoint.node, set()).add(endpoint.iface)
        return endpoint

    def _endpoint(self, ref: Node | str | tuple[Node | str, int]) -> Endpoint:
        if isinstance(ref, tuple):
            node, index = ref
            return Endpoint(node.name if isinstance(node, Node) else node, index)
        name = ref.name if isinstance(ref, Node) else ref
        node_obj = self.nodes.get(name)
        if node_obj is None:
            return Endpoint(name, 0)  # validation reports the unknown node
        used = self._attached.get(name, set())
        for iface in node_obj.interfaces:
            if iface.index not in used:
                return Endpoint(name, iface.index)
        index = max((i.index for i in node_obj.interfaces), default=-1) + 1
        node_obj.interfaces.append(Interface(index))
        return Endpoint(name, index)

    # -- reading -----------------------------------------------------------------

    def endpoints(self) -> list[Endpoint]:
        found = [e for link in self.links for e in (link.a, link.b)]
        found += [e for hub in self.hubs for e in hub.endpoints]
        return found

    def openflow_ports(self, node: Node | str) -> dict[str, int]:
        """The OpenFlow port of switch `node` toward each linked neighbour
        (interface index + 1, as selena's bridges number their ports)."""
        name = node.name if isinstance(node, Node) else node
        ports = {}
        for link in self.links:
            if link.a.node == name:
                ports[link.b.node] = link.a.iface + 1
            elif link.b.node == name:
                ports[link.a.node] = link.b.iface + 1
        return ports

    def describe(self, link: Link) -> str:
        """"link h1:eth0--s1:eth2", each end named by the device its guest has
        (a listing's interface 0 is eth1; str(link) gives bare indexes)."""
        return f"link {self.end_name(link.a)}--{self.end_name(link.b)}"

    def end_name(self, end: Endpoint) -> str:
        node = self.nodes.get(end.node)
        return f"{end.node}:{node.device(end.iface) if node else f'eth{end.iface}'}"

    def mac_of(self, node: Node, iface: Interface) -> str:
        """The interface's MAC: explicit, or derived from experiment, node id and index.

        Derived MACs are locally administered (02:...), stable across runs and
        unique within the experiment for every node id validation accepts
        (0 to 99999): an id's 17th bit flips a bit of the experiment's octet,
        so ids below 65536 keep the MACs they always had.
        """
        if iface.mac and iface.mac.upper() != "RANDOM":
            return iface.mac.lower()
        exp = hashlib.sha256(self.name.encode()).digest()
        octets = (0x02, exp[0], exp[1] ^ ((node.id >> 16) & 255), (node.id >> 8) & 255,
                  node.id & 255, iface.index & 255)
        return ":".join(f"{b:02x}" for b in octets)
