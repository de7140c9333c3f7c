"""Mininet's `Topo` with Mininet's meanings, turned into a selena Topology.

A custom file written for `mn --custom FILE --topo NAME` subclasses `Topo`
and calls addHost/addSwitch/addLink, with link options in Mininet's units:
bw in Mbit/s, delay and jitter as tc times ('5ms'), loss in percent (0-100),
max_queue_size in packets. Each call is checked as it is made, so a wrong
type is one line at the user's own call (`FILE:LINE: addLink: ...`); the
conversion (`to_topology`) keeps those lines on the nodes and links for
validation. Options that would change what the experiment means are refused
(one line naming the option); harmless ones are accepted and ignored
(docs/topologies.md lists both).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from selena import units
from selena.errors import ArgumentError, UnitError
from selena.model import Link, LinkOptions, Node, Topology, caller_location
from selena.model.cpus import is_share
from selena.model.topology import numbered_mac

# Options accepted for Mininet's sake and ignored: selena's guests are VMs
# (every directory and namespace is private), its switches standalone Open
# vSwitch bridges numbered by name, its shaping chosen per link.
HOST_IGNORED = ("inNamespace", "privateDirs", "cls")
SWITCH_IGNORED = ("dpid", "protocols", "inNamespace", "listenPort", "datapath", "cls",
                  "failMode", "batch", "reconnectms", "opts")
LINK_IGNORED = ("use_htb", "cls", "intfName1", "intfName2", "intf", "r2q", "speedup", "key")
# Options that would change the meaning, with what to do instead.
HOST_REFUSED = {
    "period_us": "Xen's credit2 scheduler enforces cpu= every 10 ms of real time; drop it",
}
LINK_REFUSED = {
    "enable_ecn": "selena's links do not mark ECN",
    "enable_red": "selena's links queue drop-tail (max_queue_size), not RED",
    "params1": "give the addresses on addHost(ip=...)",
    "params2": "give the addresses on addHost(ip=...)",
    "addr1": "give the MAC on addHost(mac=...)",
    "addr2": "give the MAC on addHost(mac=...)",
}
# selena's own options, passed through to Topology.add_host / add_switch.
HOST_SELENA = ("template", "memory", "vcpus", "cpus", "packages", "ip6", "gateway6",
               "tsc_mode", "cpu_time", "cpu_share", "gateway")
SWITCH_SELENA = ("template", "memory", "vcpus", "cpus", "controller", "switch_model")

# The shaping options of Mininet's TCLink.
LINK_WORDS = ("bw", "delay", "jitter", "loss", "max_queue_size")


def natural(text: str) -> list[object]:
    """Mininet's natural sort key: h2 before h10."""
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", str(text))]


def _fail(call: str, message: str) -> ArgumentError:
    return ArgumentError(caller_location(), f"{call}: {message}")


def _name_check(name: object, call: str) -> str:
    if not isinstance(name, str) or not name:
        raise _fail(call, f"the name must be a string such as 'h1', not "
                          f"{type(name).__name__} {name!r}")
    return name


@dataclass
class _Item:
    name: str
    kind: str                       # "host" | "switch" | "controller"
    opts: dict[str, object]
    at: str | None


@dataclass
class _Link:
    a: str
    b: str
    port1: int
    port2: int
    opts: LinkOptions               # selena's add_link keywords, converted
    at: str | None
    given: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Customized:
    """Mininet's custom(cls, **params) (selena.mininet.util.custom): a class
    whose params go to every node or link made with it, over the call's own
    options, as Mininet's customized constructor updates its keywords."""

    cls: object
    params: dict[str, object]

    @property
    def __name__(self) -> str:              # as Mininet names a customized class
        return f"custom({getattr(self.cls, '__name__', self.cls)},{self.params})"


def with_class_params(opts: Mapping[str, object],
                      default: object = None) -> dict[str, object]:
    """`opts` with the params of its cls= (else of `default`, the net's
    class) merged in as Mininet merges them: custom()'s over the options, a
    functools.partial's under them (a call's keywords win over a
    partial's). A plain class adds nothing."""
    cls = opts.get("cls", default)
    if isinstance(cls, Customized):
        return {**opts, **cls.params}
    if isinstance(cls, partial):
        return {**cls.keywords, **opts}
    return dict(opts)


def link_options(opts: Mapping[str, object], call: str) -> LinkOptions:
    """Mininet's TCLink options as selena's add_link keywords; a wrong type
    or value is one line at the caller's line."""
    out: LinkOptions = {}
    for key, value in opts.items():
        if key in LINK_IGNORED:
            continue
        if key in LINK_REFUSED:
            raise _fail(call, f"option {key}= is not supported: {LINK_REFUSED[key]}")
        if key not in ("bw", "delay", "jitter", "loss", "max_queue_size"):
            raise _fail(call, f"unknown link option {key}= (Mininet's TCLink takes "
                              f"{', '.join(LINK_WORDS)}, use_htb)")
        if value is None or (key in ("bw", "loss") and value == 0):
            continue                # Mininet: not set (bw 0: no rate limit)
        if key == "bw":
            out["rate"] = _bw(value, call)
        elif key == "delay":
            out["delay"] = _tc_time(key, value, call)
        elif key == "jitter":
            out["jitter"] = _tc_time(key, value, call)
        elif key == "loss":
            out["loss"] = _loss(value, call)
        else:
            out["queue"] = _queue(value, call)
    return out


def _bw(value: object, call: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _fail(call, f"bw is a number of Mbit/s (bw=10), not "
                          f"{type(value).__name__} {value!r}")
    return float(value) * 1e6


def _tc_time(key: str, value: object, call: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise _fail(call, f"{key}={value!r} has no unit; write {key}='{value}ms' "
                          f"(Mininet's {key} is a tc time: '5ms', '100us', '1s')")
    if not isinstance(value, str):
        raise _fail(call, f"{key} is a tc time such as '5ms', not "
                          f"{type(value).__name__} {value!r}")
    try:
        units.seconds(value)
    except UnitError as exc:
        raise _fail(call, f"{key}: {exc}") from None
    return value


def _loss(value: object, call: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(call, f"loss is a percentage from 0 to 100 (loss=1), not "
                          f"{type(value).__name__} {value!r}")
    if not 0 <= value <= 100:
        raise _fail(call, f"loss={value!r} is not a percentage from 0 to 100")
    return f"{value}%"


def _queue(value: object, call: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(call, f"max_queue_size is a number of packets (100), not "
                          f"{type(value).__name__} {value!r}")
    return value

class Topo:
    """Mininet's Topo: subclass it and override build(self, *args, **params),
    or call addHost/addSwitch/addLink from __init__ after Topo.__init__(self)."""

    def __init__(self, *args: object, **params: object) -> None:
        # Mininet passes these as dicts; whatever else comes is dict()'s to refuse.
        self.hopts = dict(params.pop("hopts", None) or {})      # type: ignore[call-overload]
        self.sopts = dict(params.pop("sopts", None) or {})      # type: ignore[call-overload]
        self.lopts = dict(params.pop("lopts", None) or {})      # type: ignore[call-overload]
        self._items: dict[str, _Item] = {}
        self._links: list[_Link] = []
        self.ports: dict[str, dict[int, tuple[str, int]]] = {}
        self.build(*args, **params)

    def build(self, *args: object, **params: object) -> None:
        """Override to add nodes and links."""

    # -- building (Mininet's names) ------------------------------------------------

    def addNode(self, name: str, **opts: object) -> str:  # noqa: N802 - Mininet's name
        if opts.get("isSwitch"):
            opts.pop("isSwitch")
            return self._add(name, "switch", opts, "addNode")
        return self._add(name, "host", opts, "addNode")

    def addHost(self, name: str, **opts: object) -> str:  # noqa: N802
        """A host; ip='10.0.0.1/24' (no prefix: /8, Mininet's), mac=,
        defaultRoute='via 10.0.0.254'."""
        # As Mininet: hopts are the options of a call that gives none.
        return self._add(name, "host", dict(opts or self.hopts), "addHost")

    def addSwitch(self, name: str, **opts: object) -> str:  # noqa: N802
        return self._add(name, "switch", dict(opts or self.sopts), "addSwitch")

    def addLink(self, node1: str, node2: str, port1: int | None = None,  # noqa: N802
                port2: int | None = None, key: object = None, **opts: object) -> int:
        """A link; TCLink's options in Mininet's units (bw Mbit/s, delay and
        jitter '5ms', loss percent, max_queue_size packets). Returns its key."""
        call = "addLink"
        for end in (node1, node2):
            _name_check(end, call)
            if end not in self._items:
                raise _fail(call, f"no node named {end!r} yet (add it with addHost or "
                                  "addSwitch before linking it)")
        if node1 == node2:
            raise _fail(call, f"link from {node1} to itself")
        for what, port in (("port1", port1), ("port2", port2)):
            if port is not None and (isinstance(port, bool) or not isinstance(port, int)
                                     or port < 0):
                raise _fail(call, f"{what} is a port number (1), not "
                                  f"{type(port).__name__} {port!r}")
        merged = with_class_params(dict(opts or self.lopts))
        converted = link_options(merged, call)
        port1, port2 = self.addPort(node1, node2, port1, port2)
        self._links.append(_Link(node1, node2, port1, port2, converted, caller_location(),
                                 merged))
        return len(self._links) - 1

    def addPort(self, src: str, dst: str, sport: int | None = None,  # noqa: N802
                dport: int | None = None) -> tuple[int, int]:
        """Mininet's port numbering: a switch's ports from 1, a host's from 0."""
        sport = self._free_port(src, sport)
        self.ports[src][sport] = (dst, -1)
        dport = self._free_port(dst, dport)
        self.ports[dst][dport] = (src, sport)
        self.ports[src][sport] = (dst, dport)
        return sport, dport

    def _free_port(self, node: str, port: int | None) -> int:
        taken = self.ports.setdefault(node, {})
        if port is None:
            port = len(taken) + (1 if self.isSwitch(node) else 0)
            while port in taken:
                port += 1
        elif port in taken:
            raise _fail("addLink", f"{node} port {port} is already linked to "
                                   f"{taken[port][0]}")
        elif self.isSwitch(node) and port == 0:
            raise _fail("addLink", f"{node} port 0: a switch's ports start at 1")
        return port

    def _add(self, name: str, kind: str, opts: dict[str, object], call: str) -> str:
        _name_check(name, call)
        if name in self._items:
            raise _fail(call, f"{name!r} is already a {self._items[name].kind} of this topology")
        call = f"{call}({name!r})"
        opts = with_class_params(opts)
        if kind == "host":
            _host_options(opts, call)
        else:
            _switch_options(opts, call)
        self._items[name] = _Item(name, kind, dict(opts), caller_location())
        return name

    # -- reading (Mininet's names) -------------------------------------------------

    def nodes(self, sort: bool = True) -> list[str]:
        names = list(self._items)
        return sorted(names, key=natural) if sort else names

    def hosts(self, sort: bool = True) -> list[str]:
        return [n for n in self.nodes(sort) if self._items[n].kind == "host"]

    def switches(self, sort: bool = True) -> list[str]:
        return [n for n in self.nodes(sort) if self._items[n].kind == "switch"]

    def links(self, sort: bool = False, withKeys: bool = False,  # noqa: N803
              withInfo: bool = False) -> list[tuple]:
        found = []
        for key, link in enumerate(self._links):
            a, b = link.a, link.b
            if sort and natural(b) < natural(a):
                a, b = b, a
            info = {"node1": link.a, "node2": link.b, "port1": link.port1,
                    "port2": link.port2, **link.given}
            row: tuple = (a, b)
            if withKeys:
                row += (key,)
            if withInfo:
                row += (info,)
            found.append(row)
        return sorted(found, key=lambda r: (natural(r[0]), natural(r[1]))) if sort else found

    def isSwitch(self, n: str) -> bool:  # noqa: N802
        item = self._items.get(n)
        return item is not None and item.kind == "switch"

    def nodeInfo(self, name: str) -> dict[str, object]:  # noqa: N802
        return dict(self._items[name].opts)

    def setNodeInfo(self, name: str, info: Mapping[str, object]) -> None:  # noqa: N802
        self._items[name].opts = dict(info)

    def port(self, src: str, dst: str) -> tuple[int, int] | list[tuple[int, int]]:
        found = [(p, p2) for p, (other, p2) in self.ports.get(src, {}).items()
                 if other == dst]
        return found[0] if len(found) == 1 else found

    def convertTo(self, *args: object, **kwargs: object) -> None:  # noqa: N802
        raise _fail("convertTo", "not supported: selena's Topo has no graph object")


def _host_options(opts: dict[str, object], call: str) -> None:
    for key, value in opts.items():
        if key in HOST_IGNORED or key in HOST_SELENA:
            continue
        if key in HOST_REFUSED:
            raise _fail(call, f"option {key}= is not supported: {HOST_REFUSED[key]}")
        if key in ("ip", "mac"):
            if value is not None and not isinstance(value, str):
                example = "'10.0.0.1/24'" if key == "ip" else "'00:00:00:00:00:01'"
                raise _fail(call, f"{key} must be a string such as {example}, not "
                                  f"{type(value).__name__} {value!r}")
        elif key == "defaultRoute":
            if value is not None and not (isinstance(value, str)
                                          and re.fullmatch(r"(via\s+)?\S+", value.strip())):
                raise _fail(call, f"defaultRoute must be 'via 10.0.0.254', not {value!r}")
        elif key == "cpu":
            _cpu_share(value, call)
        elif key == "cores":
            if "cpus" in opts:
                raise _fail(call, "cores= and cpus= both pin the guest's vCPUs: give one")
            _cores_mask(value, call)
        elif key == "sched":
            if value not in (None, "cfs"):
                raise _fail(call, f"sched={value!r} is not supported: Xen's credit2 cap is "
                                  "what cpu= gives (Mininet's 'cfs'); drop sched=")
        else:
            raise _fail(call, f"unknown host option {key}= (Mininet's ip=, mac=, "
                              f"defaultRoute=; selena's {', '.join(HOST_SELENA)})")


def _cpu_share(value: object, call: str) -> float | None:
    """CPULimitedHost's cpu=: a share of the host's CPUs (-1 or None: no
    limit, Mininet's default) as selena's cpu_share."""
    if value is None or value == -1:
        return None
    if (not isinstance(value, int | float) or isinstance(value, bool)
            or not is_share(value)):
        raise _fail(call, f"cpu={value!r} is not a share of the host's CPUs: give a number "
                          "above 0 and at most 1 (cpu=0.25), or -1 for no limit")
    return float(value)


def _cores_mask(value: object, call: str) -> str:
    """CPULimitedHost's cores= (a core, a list of them, or Mininet's "0-1"
    text) as selena's cpus= pinning mask."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return str(value)
    if (isinstance(value, list | tuple) and value
            and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                    for c in value)):
        return ",".join(str(c) for c in value)
    if isinstance(value, str) and value:
        return value            # a mask: checked as cpus= is
    raise _fail(call, f"cores={value!r} is not a core or cores: give 1, [0, 1] or '0-1'")


def _switch_options(opts: dict[str, object], call: str) -> None:
    for key, value in opts.items():
        if key in SWITCH_IGNORED or key in SWITCH_SELENA:
            if key == "failMode" and value not in (None, "standalone"):
                raise _fail(call, f"failMode={value!r} is not supported: selena's switches "
                                  "are standalone learning bridges (failMode='standalone')")
            continue
        if key == "stp":
            if not isinstance(value, bool):
                raise _fail(call, f"stp must be True or False, not {value!r}")
            continue
        raise _fail(call, f"unknown switch option {key}= (Mininet's dpid=, stp=, "
                          f"failMode='standalone'; selena's {', '.join(SWITCH_SELENA)})")


def _ip(value: str | None, number: int, base: ipaddress.IPv4Network | ipaddress.IPv6Network
        ) -> str:
    """Mininet's address for a host: the given one (no prefix: the base's),
    else the number-th address of the base."""
    if value:
        return value if "/" in value else f"{value}/{base.prefixlen}"
    return f"{base.network_address + number}/{base.prefixlen}"


def to_topology(topo: Topo, name: str, *, ip_base: str = "10.0.0.0/8",
                auto_macs: bool = False,
                classes: Mapping[str, object] | None = None) -> Topology:
    """The selena Topology a Topo describes, numbered as Mininet does: hosts
    in natural order take ip_base's addresses 1, 2, ... (an explicit ip= still
    uses up its number), switches follow, and each link joins the ports
    addLink numbered (a switch's port p is its interface p-1, eth(p-1) in the
    guest; a host's port p is eth<p>). `classes`: the net's host, switch
    and link classes (Mininet(host=..., ...)), whose custom() params go to
    every node and link without a cls= of its own."""
    classes = classes or {}
    if not isinstance(topo, Topo):
        raise ArgumentError(None, f"topology {name!r} must be a mininet Topo, not "
                                  f"{type(topo).__name__}")
    base = ipaddress.ip_network(ip_base, strict=False)
    result = Topology(name)
    number = 0
    for host in topo.hosts():
        item = topo._items[host]
        number += 1
        opts = with_class_params(item.opts, classes.get("host"))
        # _host_options let only a string or None through as ip.
        ip = _ip(opts.pop("ip", None), number, base)  # type: ignore[arg-type]
        mac = opts.pop("mac", None)
        if mac is None and auto_macs:
            mac = numbered_mac(number)
        route = opts.pop("defaultRoute", None)
        if route and "gateway" not in opts:
            opts["gateway"] = str(route).split()[-1]
        # CPULimitedHost's, in selena's words (checked by _host_options).
        share = _cpu_share(opts.pop("cpu", None), "addHost")
        if share is not None:
            opts["cpu_share"] = share
        if opts.get("cores") is not None:
            opts["cpus"] = _cores_mask(opts.pop("cores"), "addHost")
        extra = {k: v for k, v in opts.items() if k in HOST_SELENA}
        # add_host checks these keywords' types itself (at the user's line).
        _made(item, partial(result.add_host, host, ip=ip, mac=mac, **extra))  # type: ignore[arg-type]
    for switch in topo.switches():
        item = topo._items[switch]
        switch_opts = with_class_params(item.opts, classes.get("switch"))
        extra = {k: v for k, v in switch_opts.items() if k in SWITCH_SELENA}
        # add_switch checks these keywords' types itself (at the user's line).
        node = _made(item, partial(result.add_switch, switch, **extra))  # type: ignore[arg-type]
        node.stp = bool(switch_opts.get("stp", False))
    for link in topo._links:
        ends = [(end, port - 1 if topo.isSwitch(end) else port)
                for end, port in ((link.a, link.port1), (link.b, link.port2))]
        for end, index in ends:
            node = result.nodes[end]
            if node.interface(index) is None:
                node.add_interface(index)
        link_opts = link.opts
        if "cls" not in link.given and classes.get("link") is not None:
            link_opts = link_options(with_class_params(link.given, classes["link"]), "addLink")
        _made(link, partial(result.add_link, ends[0], ends[1], **link_opts))
    return result


_Made = TypeVar("_Made", Node, Link)


def _made(item: _Item | _Link, make: Callable[[], _Made]) -> _Made:
    """Create a node or link, at the user's line: both its record and any
    error about it name the addHost/addLink call."""
    try:
        made = make()
    except ArgumentError as exc:
        raise ArgumentError(item.at, exc.message) from None
    made.defined_at = item.at
    return made


# -- Mininet's own topologies (mininet.topo), named and numbered as Mininet's ------


class SingleSwitchTopo(Topo):
    """k hosts on one switch."""

    # A Mininet topology's build() takes its own arguments, not Topo's.
    def build(self, k: int = 2, **_opts: object) -> None:  # type: ignore[override]
        self.k = k
        switch = self.addSwitch("s1")
        for h in range(1, k + 1):
            self.addLink(self.addHost(f"h{h}"), switch)


class SingleSwitchReversedTopo(Topo):
    """k hosts on one switch, h1 on its last port."""

    # A Mininet topology's build() takes its own arguments, not Topo's.
    def build(self, k: int = 2) -> None:  # type: ignore[override]
        self.k = k
        switch = self.addSwitch("s1")
        for h in range(1, k + 1):
            self.addLink(self.addHost(f"h{h}"), switch, port1=0, port2=k - h + 1)


class MinimalTopo(SingleSwitchTopo):
    """Two hosts on one switch (mn's default)."""

    # A Mininet topology's build() takes its own arguments, not Topo's.
    def build(self) -> None:  # type: ignore[override]
        super().build(k=2)


class LinearTopo(Topo):
    """k switches in a line, n hosts on each."""

    # A Mininet topology's build() takes its own arguments, not Topo's.
    def build(self, k: int = 2, n: int = 1, **_opts: object) -> None:  # type: ignore[override]
        self.k, self.n = k, n
        last = None
        for i in range(1, k + 1):
            switch = self.addSwitch(f"s{i}")
            for j in range(1, n + 1):
                host = self.addHost(f"h{i}" if n == 1 else f"h{j}s{i}")
                self.addLink(host, switch)
            if last:
                self.addLink(switch, last)
            last = switch
