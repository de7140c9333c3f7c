"""Validation of a topology before anything is created.

Every problem is collected, each naming the offending node, link or field
(and the file:line that declared it, when known), and raised together as one
TopologyError: a researcher fixes them in one pass and nothing is ever
half-created. Likely mistakes that are still runnable (a loss of 1 meaning
100%, a delay of whole seconds, a rate in bit/s) come back as warnings;
strict=True turns them into errors.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable

from selena import units
from selena.control.protocol import SPEC_MAX_BYTES
from selena.errors import Problem, TopologyError, UnitError, ValidationError
from selena.hostinfo import GUEST_DOMIDS_MAX, HostInfo
from selena.model import Interface, Link, Node, NodeKind, Topology
from selena.model.cpus import CPU_TIME_MODES, credit_cap, fold_mask, is_share, parse_mask
from selena.model.topology import GUEST_TYPES
from selena.openflow import controller_address
from selena.plan import net_text
from selena.templates import bad_packages

RATE_MIN_BPS = 1e3
RATE_MAX_BPS = 400e9
DELAY_MAX_S = 10.0
QUEUE_MAX_PACKETS = 1_000_000
# fullmatch everywhere: a trailing newline must not pass.
MAC_RE = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
TEMPLATE_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,47}")
# Warnings: values that are valid but usually a unit slip.
SUSPICIOUS_LOSS = 0.5
SUSPICIOUS_DELAY_S = 1.0
SUSPICIOUS_RATE_BPS = 1e6

Add = Callable[..., None]


def validate(topo: Topology, *, templates: Iterable[str] | None = None,
             host: HostInfo | None = None, switch_profiles: Iterable[str] | None = None,
             strict: bool = False) -> list[Problem]:
    """Raise TopologyError listing every problem; return the warnings.

    `templates` are the guest templates available, `host` what the host can
    give (CPUs, memory), `switch_profiles` the switch-model profiles; each
    unchecked when None. With strict=True warnings are errors too.
    """
    problems: list[Problem] = []
    warnings: list[Problem] = []
    # Problems that make others meaningless (a switch of 5000 ports also has
    # interface indexes out of range and derived MACs that repeat): first, and
    # without their consequences.
    first: list[Problem] = []

    def add(kind: str, message: str, where: str | None = None) -> None:
        problems.append(Problem(kind, message, where))

    def warn(kind: str, message: str, where: str | None = None) -> None:
        warnings.append(Problem(kind, message, where))

    _check_experiment(topo, add)
    nodes = list(topo.nodes.values())
    wired = _wired(topo)
    oversized = _too_many_interfaces(nodes, wired, first)
    _check_nodes(topo, nodes, templates, host, add, warn, oversized)
    _check_addresses(topo, nodes, add, oversized)
    by_name = {n.name: n for n in nodes}
    profiles = set(switch_profiles) if switch_profiles is not None else None
    for node in nodes:
        _check_openflow(node, by_name, profiles, add)
    pairs, used = _check_wiring(topo, by_name, add, warn)
    _check_static_arp(topo, by_name, used, add)
    _check_net_size(topo, nodes, wired, oversized, add)
    _check_ports(nodes, used, add, warn)
    _check_shared_interfaces(pairs, used, by_name, add)
    _check_host_memory(nodes, host, add)

    if strict:
        problems += [Problem(w.kind, f"{w.message} (an error with --strict)", w.where)
                     for w in warnings]
    problems = first + problems
    if problems:
        raise TopologyError(problems)
    return warnings


def _check_experiment(topo: Topology, add: Add) -> None:
    if not NAME_RE.fullmatch(topo.name):
        add("bad experiment name",
            f"experiment name {topo.name!r}: use letters, digits, '.', '_', '-' (max 32)")
    try:
        units.tdf(topo.tdf)
    except UnitError as exc:
        add("bad TDF", str(exc))


def _check_nodes(topo: Topology, nodes: list[Node], templates: Iterable[str] | None,
                 host: HostInfo | None, add: Add, warn: Add,
                 oversized: Collection[str]) -> None:
    """Each node's own fields, and the names and ids nodes must not share."""
    for node in nodes:
        _check_cpu_time(node, topo.tdf, host, add, warn)
    if not nodes:
        add("empty topology", f"experiment {topo.name}: the topology has no nodes")
    elif len(nodes) > GUEST_DOMIDS_MAX and (host is None or host.backend != "mininet"):
        add("too many nodes", f"experiment {topo.name}: {len(nodes)} nodes, each a Xen guest; "
            f"Xen runs at most {GUEST_DOMIDS_MAX} guests on a host: make the topology smaller")
    for name, same in _groups(nodes, lambda n: n.name).items():
        if len(same) > 1:
            add("duplicate node name", f"node name {name!r} is used {len(same)} times "
                f"({_places(same)})", same[0].defined_at)
    for node_id, same in _groups(nodes, lambda n: n.id).items():
        if len(same) > 1:
            add("duplicate node id", f"node id {node_id} is used {len(same)} times: "
                f"{_places(same, name=True)}", same[0].defined_at)
    known_templates = set(templates) if templates is not None else None
    for node in nodes:
        _check_node(node, known_templates, host, add, warn, oversized=node.name in oversized)


# How often each pair of interfaces is linked, and each interface attached.
Pairs = Counter[frozenset[tuple[str, int]]]
Used = Counter[tuple[str, int]]


def _check_wiring(topo: Topology, by_name: dict[str, Node], add: Add,
                  warn: Add) -> tuple[Pairs, Used]:
    """Check each link and hub; count the pairs and interfaces they join."""
    pairs: Pairs = Counter()
    used: Used = Counter()
    for link in topo.links:
        check_link(link, topo.describe(link), by_name, add, warn)
        pairs[frozenset({(link.a.node, link.a.iface), (link.b.node, link.b.iface)})] += 1
        used[(link.a.node, link.a.iface)] += 1
        used[(link.b.node, link.b.iface)] += 1
    for hub in topo.hubs:
        if len(hub.endpoints) < 2:
            add("hub too small", f"hub {hub.name}: needs at least two interfaces",
                hub.defined_at)
        for ep in hub.endpoints:
            _check_endpoint(f"hub {hub.name}", ep.node, ep.iface, by_name, add, hub.defined_at)
            used[(ep.node, ep.iface)] += 1
    return pairs, used


def _check_ports(nodes: list[Node], used: Used, add: Add, warn: Add) -> None:
    """Nodes on no link or hub."""
    ports_of = Counter(name for name, _iface in used)
    for node in nodes:
        ports = ports_of[node.name]
        if not ports:
            _check_unwired(node, add, warn)


def _check_shared_interfaces(pairs: Pairs, used: Used, by_name: dict[str, Node],
                             add: Add) -> None:
    for pair, count in pairs.items():
        if count > 1:
            ends = "--".join(f"{n}:{_device(by_name, n, i)}" for n, i in sorted(pair))
            add("duplicate link", f"duplicate link {ends} ({count} times)")
    for (node, iface), count in used.items():
        if count > 1 and len({p for p in pairs if (node, iface) in p}) != 1:
            add("interface on several links",
                f"interface {node}:{_device(by_name, node, iface)} is attached to {count} "
                "links or hubs")


def _check_host_memory(nodes: list[Node], host: HostInfo | None, add: Add) -> None:
    if host is not None and host.free_memory_mb is not None:
        total = sum(n.memory_mb for n in nodes)
        if total > host.free_memory_mb:
            add("not enough memory", f"guests need {total} MB of memory in total; the host "
                f"can give {host.free_memory_mb} MB")


def _wired(topo: Topology) -> dict[str, set[int]]:
    """Each node's interfaces on a link or hub (each one a vif)."""
    wired: dict[str, set[int]] = {}
    for link in topo.links:
        for ep in (link.a, link.b):
            wired.setdefault(ep.node, set()).add(ep.iface)
    for hub in topo.hubs:
        for ep in hub.endpoints:
            wired.setdefault(ep.node, set()).add(ep.iface)
    return wired


def _too_many_interfaces(nodes: list[Node], wired: dict[str, set[int]],
                         add: list[Problem]) -> set[str]:
    """Nodes with more interfaces on links than a Xen guest takes (problems
    appended to `add`); their names."""
    found = set()
    for node in nodes:
        count = len(wired.get(node.name, ()))
        limit = max_interfaces(node.vcpus)
        if count <= limit:
            continue
        found.add(node.name)
        cpus = f"{node.vcpus} vCPUs" if node.vcpus > 1 else "1 vCPU"
        fix = ("use several switches, e.g. a tree (--topo tree,DEPTH,FANOUT)"
               if node.kind is NodeKind.SWITCH else "give it fewer links")
        add.append(Problem("too many interfaces",
                           f"node {node.name}: {count} interfaces on links; a Xen guest with "
                           f"{cpus} takes at most {limit} (Xenstore's 1000 entries and 64 "
                           f"grant frames per domain): {fix}", node.defined_at))
    return found


def _check_net_size(topo: Topology, nodes: list[Node], wired: dict[str, set[int]],
                    oversized: Collection[str], add: Add) -> None:
    """A guest's network directives are one Xenstore value ($S/net): its
    interface names, addresses, routes and neighbour entries must fit."""
    arp: dict[str, list[tuple[str, str, str]]] = {}
    for entry in topo.static_arp:
        node = topo.nodes.get(entry.node)
        iface = node.interface(entry.iface) if node else None
        if node is not None and iface is not None:
            arp.setdefault(node.name, []).append((entry.ip, entry.mac.lower(),
                                                   topo.mac_of(node, iface)))
    for node in nodes:
        indexes = wired.get(node.name)
        if node.name in oversized or not indexes:
            continue
        macs = {i.index: topo.mac_of(node, i) for i in node.interfaces if i.index in indexes}
        try:
            size = len(net_text(node, macs, arp.get(node.name)).encode())
        except (ValueError, ValidationError):
            continue            # a malformed address or MAC, reported on its own
        if size > SPEC_MAX_BYTES:
            add("network settings too long",
                f"node {node.name}: its interface names, addresses, routes and static ARP "
                f"entries take {size} bytes, more than one Xenstore value holds "
                f"({SPEC_MAX_BYTES}): give it fewer interfaces, addresses or ARP entries",
                node.defined_at)


def _groups(nodes: list[Node], key: Callable[[Node], object]) -> dict[object, list[Node]]:
    found: dict[object, list[Node]] = {}
    for node in nodes:
        found.setdefault(key(node), []).append(node)
    return found


def _places(nodes: list[Node], *, name: bool = False) -> str:
    """Where each of several nodes was declared: "h1 at a.py:3, h2 at a.py:4"."""
    return _first_few([(f"{n.name} at " if name else "at ") + (n.defined_at or "?")
                       for n in nodes])


def _first_few(items: list[str], few: int = 5) -> str:
    """"a, b, c, d, e, and 3 more": a long list kept to one readable line."""
    more = f", and {len(items) - few} more" if len(items) > few else ""
    return ", ".join(items[:few]) + more


def _check_unwired(node: Node, add: Add, warn: Add) -> None:
    """A node on no link or hub: its guest would boot alone."""
    at = node.defined_at
    addressed = [a for i in node.interfaces for a in i.addresses()]
    if node.kind is NodeKind.SWITCH:
        if not node.bare_bridge:
            warn("switch without ports", f"node {node.name}: a switch on no link has no "
                 "ports", at)
    elif addressed:
        # Its address would be on no interface of the guest: refuse, not drop it.
        fix = (f"newLink(({node.id}, ...), ...)" if node.first_device
               else f"add_link({node.name}, ...)")     # a listing's own call
        add("address on no link", f"node {node.name}: has address {addressed[0]} but no "
            f"link, so the address would be dropped: {fix} to another node, or leave the "
            "address out", at)
    else:
        warn("node without links", f"node {node.name}: on no link or hub, it can reach "
             "no other node", at)


def _check_cpu_time(node: Node, tdf: float, host: HostInfo | None, add: Add,
                    warn: Add) -> None:
    where = f"node {node.name}"
    if node.cpu_time not in CPU_TIME_MODES:
        add("bad cpu time", f"{where}: cpu_time {node.cpu_time!r}: use "
            f"{' or '.join(repr(m) for m in CPU_TIME_MODES)}", node.defined_at)
        return
    share = node.cpu_share
    if share is not None:
        if not is_share(share):
            add("bad cpu share", f"{where}: cpu_share {share:g} is not a share of the host's "
                "CPUs: give more than 0 and at most 1 (0.25: a quarter of them)",
                node.defined_at)
            return
        if host is not None and host.backend == "mininet":
            warn("cpu share not applied", f"{where}: cpu_share={share:g} is not applied by the "
                 "Mininet baseline (its hosts are processes): drop it to compare like with "
                 "like", node.defined_at)
            return
        if node.cpu_time == "real":
            add("two cpu caps", f"{where}: cpu_time='real' and cpu_share={share:g} both cap "
                "its CPU time: give one", node.defined_at)
            return
    if (node.cpu_time != "real" and share is None) or not 1 <= node.vcpus <= 128:
        return
    host_cpus = host.cpus if host is not None else None
    if share is not None and not host_cpus:
        return              # the cap is the host's to tell: checked where it is known
    try:
        tdf = units.tdf(tdf)
    except UnitError:
        return              # reported as a bad TDF
    try:
        cap = credit_cap(node.vcpus, tdf, node.cpu_time, share, host_cpus)
    except ValueError as exc:
        add("cpu cap out of range", f"{where}: {exc}", node.defined_at)
        return
    exact = 100.0 * (node.vcpus if share is None else share * (host_cpus or 0)) / tdf
    what = "cpu_time='real'" if share is None else f"cpu_share={share:g}"
    if cap and abs(cap - exact) / exact > 0.05:
        warn("coarse cpu cap", f"{where}: {what} at TDF {tdf:g} needs {exact:.2f}% "
             f"of a CPU; Xen's cap is whole percent, so {cap}% ({(cap / exact - 1) * 100:+.0f}%"
             " CPU speed)", node.defined_at)


def _check_node(node: Node, templates: set[str] | None, host: HostInfo | None,
                add: Add, warn: Add, *, oversized: bool = False) -> None:
    where = f"node {node.name}"
    at = node.defined_at
    if not NAME_RE.fullmatch(node.name):
        # Quoted: the name may be empty or hold spaces.
        add("bad node name", f"node {node.name!r}: name must be letters, digits, '.', '_', "
            "'-' (max 32)", at)
    if not TEMPLATE_RE.fullmatch(node.template):
        add("bad template name", f"{where}: template name {node.template!r} must be lower-case "
            "letters, digits, '.', '_', '-'", at)
    elif templates is not None and node.template not in templates:
        add("unknown template", f"{where}: unknown template {node.template!r} "
            f"(have: {', '.join(sorted(templates))})", at)
    bad = bad_packages(node.packages)
    if bad:
        add("bad package name", f"{where}: packages {', '.join(bad)} are not Debian package "
            "names (lower-case letters, digits, '+', '-', '.')", at)
    # Dom0 vif names embed the id and interface index within 15 characters.
    if not 0 <= node.id <= 99_999:
        add("node id out of range", f"{where}: id {node.id} out of range (0 to 99999)", at)
    if node.virt not in GUEST_TYPES:
        add("bad guest type", f"{where}: virt {node.virt!r}: use 'pv', 'pvh' or 'hvm'", at)
    if node.tsc_mode not in (None, "native", "emulate"):
        add("bad tsc mode", f"{where}: tsc_mode {node.tsc_mode!r}: use 'native' or 'emulate' "
            "(or leave it unset)", at)
    if not 1 <= node.vcpus <= 128:
        add("vcpus out of range", f"{where}: vcpus {node.vcpus} out of range (1 to 128)", at)
    _check_cpu_mask(node, host, add, warn)
    if not units.MEMORY_MIN_MB <= node.memory_mb <= units.MEMORY_MAX_MB:
        add("memory out of range", f"{where}: memory {node.memory_mb} MiB out of range "
            f"({units.MEMORY_MIN_MB} MiB to 1 TiB)", at)
    _check_interfaces(node, add, oversized)


def _check_cpu_mask(node: Node, host: HostInfo | None, add: Add, warn: Add) -> None:
    if node.cpus is None:
        return
    where = f"node {node.name}"
    at = node.defined_at
    try:
        parse_mask(node.cpus)
        folded = fold_mask(node.cpus, host.cpus) if host and host.cpus else None
    except ValueError as exc:
        add("bad cpu mask", f"{where}: {exc}", at)
        return
    if folded is not None:
        assert host is not None and host.cpus is not None
        warn("cpu mask beyond the host",
             f"{where}: cpu mask {node.cpus} names CPUs this host lacks (it has "
             f"{host.cpus}: 0-{host.cpus - 1}); pinned to {folded} instead "
             f"(CPU n -> n mod {host.cpus})", at)


def _check_interfaces(node: Node, add: Add, oversized: bool) -> None:
    where = f"node {node.name}"
    at = node.defined_at
    for index, count in Counter(i.index for i in node.interfaces).items():
        if count > 1:
            add("duplicate interface", f"{where}: interface {node.device(index)} defined "
                f"{count} times", at)
    for iface in node.interfaces:
        # A node with too many interfaces is reported once, not per index.
        if not 0 <= iface.index <= 99 and not oversized:
            add("interface index out of range",
                f"{where}: interface index {iface.index} out of range (0 to 99)", at)
        if iface.mac and iface.mac.upper() != "RANDOM":
            if not MAC_RE.fullmatch(iface.mac):
                add("malformed MAC", f"{where} {node.device(iface.index)}: malformed MAC "
                    f"{iface.mac!r}", at)
            elif int(iface.mac.split(":")[0], 16) & 1:
                add("multicast MAC", f"{where} {node.device(iface.index)}: MAC {iface.mac} "
                    "is multicast", at)
        if not 0 <= iface.txqueuelen <= 100_000:
            add("queue length out of range",
                f"{where} {node.device(iface.index)}: tx queue length {iface.txqueuelen} out "
                "of range", at)


# How many interfaces (vifs) one Xen PV guest takes. Mininet's switches have
# no port limit; a guest meets these first (Xen 4.17 and Linux 6.1 netfront,
# read in their sources; docs/topologies.md has the table):
# - Xenstore: xenstored (oxenstored and the C one alike) lets a domain own 1000
#   entries. Each vif's frontend directory holds entries the guest owns: 7
#   written by libxl (the directory, backend, backend-id, state, handle, mac,
#   trusted) and 12 by netfront with one queue (ring refs, split event
#   channels, multi-queue-num-queues, six feature flags, xdp-headroom); with
#   several queues 8 plus 5 per queue. The guest's base keys and its agent take
#   about 25, and the agent writes commands' output as entries: 51 one-queue
#   vifs leave nothing for that.
# - grant table: 64 frames (gnttab_max_frames) of 512 v1 entries, 8 reserved;
#   netfront reserves 256 + 256 grants per queue plus its two rings: 63 vifs.
# - watches (100 per domain, one per vif) and event channels (1023, two per
#   queue) come later.
# netfront opens one queue per vCPU, up to 8 (netback: up to Dom0's CPUs).
# The margin: 200 entries for commands and their unacknowledged output.
XENSTORE_ENTRIES = 1000
XENSTORE_BASE = 25
XENSTORE_MARGIN = 200
GRANT_ENTRIES = 64 * 512 - 8
GRANTS_PER_QUEUE = 256 + 256 + 2
NETFRONT_MAX_QUEUES = 8


def max_interfaces(vcpus: int = 1) -> int:
    """The most interfaces on links a guest with `vcpus` vCPUs takes."""
    queues = max(1, min(vcpus, NETFRONT_MAX_QUEUES))
    # libxl's 7, netfront's 8 per vif and 4 per queue (5: a directory each when several)
    per_vif = 7 + 8 + (4 if queues == 1 else 5 * queues)
    by_xenstore = (XENSTORE_ENTRIES - XENSTORE_BASE - XENSTORE_MARGIN) // per_vif
    by_grants = GRANT_ENTRIES // (queues * GRANTS_PER_QUEUE)
    return min(by_xenstore, by_grants)


# A switch guest with one vCPU (the default): 40 ports.
MAX_SWITCH_PORTS = max_interfaces(1)


def _check_static_flows(node: Node, add: Add) -> None:
    where = f"node {node.name}"
    at = node.defined_at
    if node.kind is not NodeKind.SWITCH:
        add("flows on a non-switch", f"{where}: only switches take static OpenFlow flows", at)
    elif node.controller is not None:
        add("flows with a controller", f"{where}: static flows are for a switch without a "
            f"controller (its controller {node.controller} owns the flow table)", at)
    elif node.stp:
        add("flows with stp", f"{where}: static flows replace the spanning tree; "
            "give one or the other", at)
    for flow in node.flows:
        if not isinstance(flow, str) or not flow.strip() or any(c in flow for c in "\n\r\0"):
            add("malformed flow", f"{where}: flow {flow!r} is not one ovs-ofctl flow "
                "(a non-empty string on one line)", at)


def _check_openflow(node: Node, by_name: dict[str, Node], profiles: set[str] | None,
                    add: Add) -> None:
    where = f"node {node.name}"
    at = node.defined_at
    if node.flows:
        _check_static_flows(node, add)
    if node.controller is None:
        if node.switch_model is not None:
            add("switch model without controller",
                f"{where}: switch_model {node.switch_model!r} needs a controller "
                "(the model sits on the OpenFlow channel)", at)
        return
    if node.kind is not NodeKind.SWITCH:
        add("controller on a non-switch", f"{where}: only switches have a controller", at)
        return
    controller = by_name.get(node.controller)
    if controller is None:
        add("unknown controller",
            f"{where}: controller {node.controller!r} is not a node of this topology", at)
        return
    if controller.kind is not NodeKind.CONTROLLER:
        add("controller is not a controller",
            f"{where}: controller {node.controller!r} is a {controller.kind.value}, "
            "not a controller node (add_controller)", at)
        return
    if profiles is not None and node.switch_model is not None \
            and node.switch_model not in profiles:
        add("unknown switch model", f"{where}: unknown switch_model profile "
            f"{node.switch_model!r} (have: {', '.join(sorted(profiles))})", at)
    management = [i for i in node.interfaces if i.ip]
    if len(management) != 1:
        add("switch management port",
            f"{where}: an OpenFlow switch needs exactly one interface with an IP address "
            f"(its management port toward {controller.name}); it has {len(management)}", at)
        return
    if controller_address(node, controller) is None:
        add("switch management subnet",
            f"{where}: its management address {management[0].ip} shares no subnet with "
            f"controller {controller.name}", at)


def interface_networks(node: Node, index: int) -> list[ipaddress.IPv4Network |
                                                     ipaddress.IPv6Network]:
    """The subnets of a node's interface (malformed addresses left out)."""
    iface = node.interface(index)
    found = []
    for address in iface.addresses() if iface else []:
        try:
            found.append(ipaddress.ip_interface(address).network)
        except ValueError:
            continue
    return found


def _check_addresses(topo: Topology, nodes: list[Node], add: Add,
                     oversized: Collection[str] = ()) -> None:
    ips: dict[str, list[Node]] = {}
    macs: dict[str, list[tuple[Node, Interface]]] = {}
    for node in nodes:
        for iface in node.interfaces:
            # Derived MACs repeat past index 255: a consequence of too many
            # interfaces, reported as that.
            if node.name not in oversized or (iface.mac and iface.mac.upper() != "RANDOM"):
                macs.setdefault(topo.mac_of(node, iface), []).append((node, iface))
            parsed = _check_interface_ips(node, iface, ips, add)
            _check_gateways(node, iface, parsed, add)
    for ip, holders in ips.items():
        if len(holders) > 1:
            add("duplicate IP", f"IP {ip} is used by {len(holders)} interfaces: "
                f"{_places(holders, name=True)}", holders[0].defined_at)
    for mac, users in macs.items():
        if len(users) > 1:
            shown = _first_few([f"{n.name} {n.device(i.index)} at {n.defined_at or '?'}"
                                for n, i in users])
            add("duplicate MAC", f"MAC {mac} is used by {len(users)} interfaces: {shown}; "
                "give each its own mac= (or none: selena derives a unique one)",
                users[0][0].defined_at)


IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface


def _check_interface_ips(node: Node, iface: Interface, ips: dict[str, list[Node]],
                         add: Add) -> dict[int, IPInterface]:
    """Check an interface's ip and ip6; note who holds each address; return
    the well-formed ones by IP version."""
    where = f"node {node.name} {node.device(iface.index)}"
    at = node.defined_at
    parsed: dict[int, IPInterface] = {}
    for field_name, address in (("ip", iface.ip), ("ip6", iface.ip6)):
        if address is None:
            continue
        try:
            addr = ipaddress.ip_interface(address)
        except ValueError:
            add("malformed IP", f"{where}: malformed IP {address!r} "
                "(want ADDRESS/PREFIX)", at)
            continue
        if "/" not in address:
            add("IP without prefix",
                f"{where}: IP {address} needs a prefix length, e.g. {address}/"
                f"{24 if addr.version == 4 else 64}", at)
        if field_name == "ip6" and addr.version != 6:
            add("ip6 is not IPv6", f"{where}: ip6 {address} is not an IPv6 address", at)
        ips.setdefault(str(addr.ip), []).append(node)
        if addr.version in parsed:
            add("two IPv6 addresses",
                f"{where}: ip and ip6 are both IPv6; give ip an IPv4 address", at)
        parsed[addr.version] = addr
    return parsed


def _check_gateways(node: Node, iface: Interface, parsed: dict[int, IPInterface],
                    add: Add) -> None:
    where = f"node {node.name} {node.device(iface.index)}"
    at = node.defined_at
    for field_name, gateway in (("gateway", iface.gateway), ("gateway6", iface.gateway6)):
        if not gateway:
            continue
        try:
            gw = ipaddress.ip_address(gateway)
        except ValueError:
            add("malformed gateway", f"{where}: malformed {field_name} {gateway!r}", at)
            continue
        own = parsed.get(gw.version)
        if own is None:
            add("gateway without address", f"{where}: {field_name} {gw} but no "
                f"IPv{gw.version} address on the interface", at)
        elif gw not in own.network:
            add("gateway outside subnet", f"{where}: gateway {gw} is outside {own.network}", at)


def _address_holders(by_name: dict[str, Node]) -> dict[str, tuple[Node, int]]:
    """Which node and interface holds each (well-formed) address."""
    holders: dict[str, tuple[Node, int]] = {}
    for node in by_name.values():
        for iface in node.interfaces:
            for address in iface.addresses():
                try:
                    holders[str(ipaddress.ip_interface(address).ip)] = (node, iface.index)
                except ValueError:
                    continue
    return holders


def _check_static_arp(topo: Topology, by_name: dict[str, Node],
                      used: Counter[tuple[str, int]], add: Add) -> None:
    holders = _address_holders(by_name)
    for entry in topo.static_arp:
        where = f"static ARP entry on {entry.node} {_device(by_name, entry.node, entry.iface)}"
        at = entry.defined_at
        node = by_name.get(entry.node)
        if node is None:
            add("ARP entry on unknown node", f"{where}: no node named {entry.node!r}", at)
        elif node.interface(entry.iface) is None:
            add("ARP entry on missing interface",
                f"{where}: node {entry.node} has no interface {node.device(entry.iface)}", at)
        elif (entry.node, entry.iface) not in used:
            add("ARP entry on unwired interface",
                f"{where}: the interface is not attached to a link or hub", at)
        try:
            ip = ipaddress.ip_address(entry.ip)
        except ValueError:
            add("ARP entry with malformed IP", f"{where}: malformed IP address {entry.ip!r}", at)
            ip = None
        if not MAC_RE.fullmatch(entry.mac):
            add("ARP entry with malformed MAC",
                f"{where}: malformed MAC address {entry.mac!r}", at)
            continue
        if ip is None or node is None or node.interface(entry.iface) is None:
            continue
        networks = [n for n in interface_networks(node, entry.iface) if n.version == ip.version]
        if not networks:
            add("ARP entry off-link", f"{where}: the interface has no IPv{ip.version} address, "
                f"so {ip} is not on its link", at)
        elif not any(ip in n for n in networks):
            add("ARP entry off-link", f"{where}: {ip} is outside the interface's subnet "
                f"{', '.join(str(n) for n in networks)}", at)
        holder = holders.get(str(ip))
        if holder is not None:
            other, index = holder
            iface = other.interface(index)
            assert iface is not None
            real = topo.mac_of(other, iface)
            if real != entry.mac.lower():
                add("ARP entry with wrong MAC",
                    f"{where}: MAC {entry.mac} for {ip}, but {other.name} "
                    f"{other.device(index)}, which holds {ip}, has MAC {real}", at)


def _device(by_name: dict[str, Node], node: str, index: int) -> str:
    """The guest's name for a node's interface (a listing's start at eth1)."""
    known = by_name.get(node)
    return known.device(index) if known else f"eth{index}"


def _check_endpoint(where: str, node_name: str, iface: int, by_name: dict[str, Node],
                    add: Add, at: str | None = None) -> Node | None:
    node = by_name.get(node_name)
    if node is None:
        add("unknown node", f"{where}: unknown node {node_name!r}", at)
        return None
    if node.interface(iface) is None:
        have = ", ".join(node.device(i.index) for i in node.interfaces) or "none"
        add("missing interface", f"{where}: node {node_name} has no interface "
            f"{node.device(iface)} (it has {have})", at)
        return None
    return node


def check_link(link: Link, where: str, by_name: dict[str, Node], add: Add,
               warn: Add) -> None:
    """One link's problems through `add` and its likely unit slips through
    `warn`: validation's check, and a link change's during a run (schedule)."""
    at = link.defined_at
    a = _check_endpoint(where, link.a.node, link.a.iface, by_name, add, at)
    b = _check_endpoint(where, link.b.node, link.b.iface, by_name, add, at)
    if link.a.node == link.b.node:
        add("link to itself", f"{where}: link from {link.a.node} to itself (a link joins "
            "two different nodes)", at)
    if link.rate_bps is not None and not RATE_MIN_BPS <= link.rate_bps <= RATE_MAX_BPS:
        add("rate out of range", f"{where}: rate {link.rate_bps:g} bit/s out of range "
            f"(1 kbit/s to 400 Gbit/s){_bare_rate_hint(link)}", at)
    if not 0 <= link.delay_s <= DELAY_MAX_S:
        add("delay out of range",
            f"{where}: delay {link.delay_s:g} s out of range (0 to {DELAY_MAX_S:g} s)", at)
    if not 0 <= link.jitter_s <= link.delay_s:
        add("jitter out of range",
            f"{where}: jitter {link.jitter_s:g} s must be between 0 and the delay", at)
    if not 0 <= link.loss <= 1:
        given = link.given.get("loss")
        # Mininet's loss=5 is 5 percent; selena's number is a ratio.
        hint = (f"; loss is a ratio: for {given:g} percent (Mininet's loss={given:g}) write "
                f"loss=\"{given:g}%\"" if isinstance(given, int | float)
                and not isinstance(given, bool) and 1 < given <= 100 else "")
        shown = given if isinstance(given, str) else f"{link.loss:g}"     # as written
        add("loss out of range", f"{where}: loss {shown} out of range (0 to 100%){hint}", at)
    if link.queue_packets is not None and not 1 <= link.queue_packets <= QUEUE_MAX_PACKETS:
        add("queue out of range", f"{where}: queue {link.queue_packets} packets out of range "
            f"(1 to {QUEUE_MAX_PACKETS})", at)
    if link.prio and link.rate_bps is None:
        add("priority queue without a rate", f"{where}: prio needs a rate (the priority "
            "queue is where packets wait for the rate limit)", at)
    _warn_unit_slips(link, where, warn)
    if a is None or b is None:
        return
    by_family_a = {n.version: n for n in interface_networks(a, link.a.iface)}
    by_family_b = {n.version: n for n in interface_networks(b, link.b.iface)}
    for version in sorted(set(by_family_a) & set(by_family_b)):
        if by_family_a[version] != by_family_b[version]:
            add("ends in different subnets", f"{where}: ends are in different subnets "
                f"({by_family_a[version]} and {by_family_b[version]})", at)


def _warn_unit_slips(link: Link, where: str, warn: Add) -> None:
    at = link.defined_at
    given = link.given
    if given.get("style") == "listing":
        _warn_listing_slips(link, where, warn)
        return
    loss = given.get("loss")
    if isinstance(loss, int | float) and not isinstance(loss, bool) \
            and SUSPICIOUS_LOSS <= loss <= 1:
        warn("likely unit slip", f"{where}: loss={loss!r} is a ratio, so {loss * 100:g}% of "
             f"packets are lost; for {loss:g} percent write loss=\"{loss:g}%\"", at)
    if SUSPICIOUS_DELAY_S <= link.delay_s <= DELAY_MAX_S:
        hint = (f"; for milliseconds write delay=\"{given['delay']}ms\""
                if isinstance(given.get("delay"), int | float) else "")
        warn("likely unit slip", f"{where}: delay {link.delay_s:g} s one-way is unusually "
             f"long{hint}", at)
    if link.rate_bps is not None and 1e3 <= link.rate_bps < SUSPICIOUS_RATE_BPS:
        warn("likely unit slip", f"{where}: rate {link.rate_bps:g} bit/s is below 1 Mbit/s"
             f"{_bare_rate_hint(link)}", at)


def _warn_listing_slips(link: Link, where: str, warn: Add) -> None:
    """newLink(a, b, rate, latency) takes Mbit/s and milliseconds (the
    paper's units): advice in those units, with the number to write."""
    at = link.defined_at
    latency = link.given.get("latency_ms")
    if isinstance(latency, int | float) and 0 < latency < 0.001:
        warn("likely unit slip", f"{where}: newLink's latency is in milliseconds, so "
             f"{latency:g} is {latency * 1000:g} µs; for {latency:g} s write {latency * 1000:g}",
             at)
    if SUSPICIOUS_DELAY_S <= link.delay_s <= DELAY_MAX_S:
        warn("likely unit slip", f"{where}: newLink's latency is in milliseconds, so "
             f"{latency!r} is {link.delay_s:g} s one-way, unusually long", at)
    if link.rate_bps is not None and 1e3 <= link.rate_bps < SUSPICIOUS_RATE_BPS:
        warn("likely unit slip", f"{where}: rate {_rate_text(link.rate_bps)} is below 1 "
             f"Mbit/s{_listing_rate_hint(link)}", at)


def _listing_rate_hint(link: Link) -> str:
    rate = link.given.get("rate_mbps")
    if not isinstance(rate, int | float) or isinstance(rate, bool) or rate <= 0:
        return ""
    if rate * 1e6 > RATE_MAX_BPS:
        # Most likely bit/s, as the Python API takes a bare number.
        return (f"; newLink's rate is in Mbit/s, so {rate:g} is {_rate_text(rate * 1e6)}: "
                f"for {_rate_text(rate)} write {rate / 1e6:g}")
    return f"; newLink's rate is in Mbit/s ({rate:g} is {_rate_text(rate * 1e6)})"


def _rate_text(bps: float) -> str:
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def _bare_rate_hint(link: Link) -> str:
    if link.given.get("style") == "listing":
        return _listing_rate_hint(link)
    rate = link.given.get("rate")
    # Only where Mbit/s would make it a rate at all (not for 0 or -5).
    if isinstance(rate, int | float) and not isinstance(rate, bool) \
            and RATE_MIN_BPS <= rate * 1e6 <= RATE_MAX_BPS:
        return f"; a bare number is bit/s: for Mbit/s write rate=\"{rate:g}Mbit\""
    return ""
