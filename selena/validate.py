"""Validation of a topology before anything is created.

All problems are collected, each naming the offending node, link or field, and
raised together as one TopologyError: a researcher fixes them in one pass and
nothing is ever half-created.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable

from selena.errors import TopologyError
from selena.model import Link, Node, NodeKind, Topology

TDF_MIN, TDF_MAX = 1.0, 1000.0
RATE_MAX_BPS = 400e9
DELAY_MAX_S = 10.0
QUEUE_MAX_PACKETS = 1_000_000
MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
CPUS_RE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def validate(topo: Topology, *, templates: Iterable[str] | None = None,
             host_free_mb: int | None = None,
             switch_profiles: Iterable[str] | None = None) -> None:
    """Raise TopologyError listing every problem; return None if the topology is sound.

    `templates` are the guest templates available; `host_free_mb` the memory
    the host can give guests; `switch_profiles` the switch-model profiles
    (each unchecked when None).
    """
    problems: list[str] = []
    add = problems.append

    if not NAME_RE.match(topo.name):
        add(f"experiment name {topo.name!r}: use letters, digits, '.', '_', '-' (max 32)")
    if not TDF_MIN <= topo.tdf <= TDF_MAX:
        add(f"TDF {topo.tdf:g} is out of range ({TDF_MIN:g} to {TDF_MAX:g})")
    if round(topo.tdf * 1000) != topo.tdf * 1000:
        add(f"TDF {topo.tdf!r} has more than three decimals")

    nodes = list(topo.nodes.values())
    if not nodes:
        add(f"experiment {topo.name}: the topology has no nodes")
    for name, count in Counter(n.name for n in nodes).items():
        if count > 1:
            add(f"node name {name!r} is used {count} times")
    for node_id, count in Counter(n.id for n in nodes).items():
        if count > 1:
            add(f"node id {node_id} is used {count} times")
    known_templates = set(templates) if templates is not None else None
    for node in nodes:
        _check_node(topo, node, known_templates, add)

    _check_addresses(topo, nodes, add)
    by_name = {n.name: n for n in nodes}
    profiles = set(switch_profiles) if switch_profiles is not None else None
    for node in nodes:
        _check_openflow(node, by_name, profiles, add)
    pairs: Counter[frozenset[tuple[str, int]]] = Counter()
    used: Counter[tuple[str, int]] = Counter()
    for link in topo.links:
        _check_link(link, by_name, add)
        pairs[frozenset({(link.a.node, link.a.iface), (link.b.node, link.b.iface)})] += 1
        used[(link.a.node, link.a.iface)] += 1
        used[(link.b.node, link.b.iface)] += 1
    for hub in topo.hubs:
        if len(hub.endpoints) < 2:
            add(f"hub {hub.name}: needs at least two interfaces")
        for ep in hub.endpoints:
            _check_endpoint(f"hub {hub.name}", ep.node, ep.iface, by_name, add)
            used[(ep.node, ep.iface)] += 1
    for node_name, index, ip, mac in topo.static_arp:
        where = f"static ARP entry on {node_name} eth{index}"
        if node_name not in by_name:
            add(f"{where}: no node named {node_name!r}")
        elif (node_name, index) not in used:
            add(f"{where}: the interface is not attached to a link or hub")
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            add(f"{where}: malformed IP address {ip!r}")
        if not MAC_RE.match(mac):
            add(f"{where}: malformed MAC address {mac!r}")
    for pair, count in pairs.items():
        if count > 1:
            ends = "--".join(f"{n}:eth{i}" for n, i in sorted(pair))
            add(f"duplicate link {ends} ({count} times)")
    for (node, iface), count in used.items():
        if count > 1 and len({p for p in pairs if (node, iface) in p}) != 1:
            add(f"interface {node}:eth{iface} is attached to {count} links or hubs")

    if host_free_mb is not None:
        total = sum(n.memory_mb for n in nodes)
        if total > host_free_mb:
            add(f"guests need {total} MB of memory in total; the host can give {host_free_mb} MB")

    if problems:
        raise TopologyError(problems)


def _check_node(topo: Topology, node: Node, templates: set[str] | None, add) -> None:
    where = f"node {node.name}"
    if not NAME_RE.match(node.name):
        add(f"{where}: name must be letters, digits, '.', '_', '-' (max 32)")
    if templates is not None and node.template not in templates:
        add(f"{where}: unknown template {node.template!r} (have: {', '.join(sorted(templates))})")
    # Dom0 vif names embed the id and interface index within 15 characters.
    if not 0 <= node.id <= 99_999:
        add(f"{where}: id {node.id} out of range (0 to 99999)")
    if not 1 <= node.vcpus <= 128:
        add(f"{where}: vcpus {node.vcpus} out of range (1 to 128)")
    if node.cpus is not None and not CPUS_RE.match(node.cpus):
        add(f"{where}: cpu mask {node.cpus!r} is not like '4,5,6,7' or '2-3'")
    if not 16 <= node.memory_mb <= 1024 * 1024:
        add(f"{where}: memory {node.memory_mb} MB out of range (16 MB to 1 TB)")
    for iface, count in Counter(i.index for i in node.interfaces).items():
        if count > 1:
            add(f"{where}: interface eth{iface} defined {count} times")
    for iface in node.interfaces:
        if not 0 <= iface.index <= 99:
            add(f"{where}: interface index {iface.index} out of range (0 to 99)")
        if iface.mac and iface.mac.upper() != "RANDOM":
            if not MAC_RE.match(iface.mac):
                add(f"{where} eth{iface.index}: malformed MAC {iface.mac!r}")
            elif int(iface.mac.split(":")[0], 16) & 1:
                add(f"{where} eth{iface.index}: MAC {iface.mac} is multicast")
        if not 0 <= iface.txqueuelen <= 100_000:
            add(f"{where} eth{iface.index}: tx queue length {iface.txqueuelen} out of range")


def _check_openflow(node: Node, by_name: dict[str, Node], profiles: set[str] | None,
                    add) -> None:
    where = f"node {node.name}"
    if node.controller is None:
        if node.switch_model is not None:
            add(f"{where}: switch_model {node.switch_model!r} needs a controller "
                "(the model sits on the OpenFlow channel)")
        return
    if node.kind is not NodeKind.SWITCH:
        add(f"{where}: only switches have a controller")
        return
    controller = by_name.get(node.controller)
    if controller is None:
        add(f"{where}: controller {node.controller!r} is not a node of this topology")
        return
    if controller.kind is not NodeKind.CONTROLLER:
        add(f"{where}: controller {node.controller!r} is a {controller.kind.value}, "
            "not a controller node (add_controller)")
        return
    if profiles is not None and node.switch_model is not None \
            and node.switch_model not in profiles:
        add(f"{where}: unknown switch_model profile {node.switch_model!r} "
            f"(have: {', '.join(sorted(profiles))})")
    management = [i for i in node.interfaces if i.ip]
    if len(management) != 1:
        add(f"{where}: an OpenFlow switch needs exactly one interface with an IP address "
            f"(its management port toward {controller.name}); it has {len(management)}")
        return
    if controller_address(node, controller) is None:
        add(f"{where}: its management address {management[0].ip} shares no subnet with "
            f"controller {controller.name}")


def controller_address(switch: Node, controller: Node) -> str | None:
    """The controller's address on the switch's management subnet."""
    own = next((i.ip for i in switch.interfaces if i.ip), None)
    if own is None:
        return None
    try:
        network = ipaddress.ip_interface(own).network
        for iface in controller.interfaces:
            if iface.ip and ipaddress.ip_interface(iface.ip).ip in network:
                return str(ipaddress.ip_interface(iface.ip).ip)
    except ValueError:
        return None     # malformed addresses are reported on their own
    return None


def _check_addresses(topo: Topology, nodes: list[Node], add) -> None:
    ips: Counter[str] = Counter()
    macs: Counter[str] = Counter()
    for node in nodes:
        for iface in node.interfaces:
            macs[topo.mac_of(node, iface)] += 1
            if iface.ip is None:
                continue
            where = f"node {node.name} eth{iface.index}"
            try:
                addr = ipaddress.ip_interface(iface.ip)
            except ValueError:
                add(f"{where}: malformed IP {iface.ip!r} (want ADDRESS/PREFIX)")
                continue
            if "/" not in iface.ip:
                add(f"{where}: IP {iface.ip} needs a prefix length, e.g. {iface.ip}/24")
            ips[str(addr.ip)] += 1
            if iface.gateway:
                try:
                    gw = ipaddress.ip_address(iface.gateway)
                    if gw not in addr.network:
                        add(f"{where}: gateway {gw} is outside {addr.network}")
                except ValueError:
                    add(f"{where}: malformed gateway {iface.gateway!r}")
    for ip, count in ips.items():
        if count > 1:
            add(f"IP {ip} is used by {count} interfaces")
    for mac, count in macs.items():
        if count > 1:
            add(f"MAC {mac} is used by {count} interfaces")


def _check_endpoint(where: str, node_name: str, iface: int, by_name: dict[str, Node],
                    add) -> Node | None:
    node = by_name.get(node_name)
    if node is None:
        add(f"{where}: unknown node {node_name!r}")
        return None
    if node.interface(iface) is None:
        add(f"{where}: node {node_name} has no interface eth{iface}")
        return None
    return node


def _check_link(link: Link, by_name: dict[str, Node], add) -> None:
    where = str(link)
    a = _check_endpoint(where, link.a.node, link.a.iface, by_name, add)
    b = _check_endpoint(where, link.b.node, link.b.iface, by_name, add)
    if link.a == link.b:
        add(f"{where}: both ends are the same interface")
    if link.rate_bps is not None and not 1e3 <= link.rate_bps <= RATE_MAX_BPS:
        add(f"{where}: rate {link.rate_bps:g} bit/s out of range (1 kbit/s to 400 Gbit/s)")
    if not 0 <= link.delay_s <= DELAY_MAX_S:
        add(f"{where}: delay {link.delay_s:g} s out of range (0 to {DELAY_MAX_S:g} s)")
    if not 0 <= link.jitter_s <= link.delay_s:
        add(f"{where}: jitter {link.jitter_s:g} s must be between 0 and the delay")
    if not 0 <= link.loss <= 1:
        add(f"{where}: loss {link.loss:g} out of range (0 to 100%)")
    if link.queue_packets is not None and not 1 <= link.queue_packets <= QUEUE_MAX_PACKETS:
        add(f"{where}: queue {link.queue_packets} packets out of range (1 to {QUEUE_MAX_PACKETS})")
    if a is None or b is None:
        return
    ia, ib = a.interface(link.a.iface), b.interface(link.b.iface)
    if ia and ib and ia.ip and ib.ip:
        try:
            na = ipaddress.ip_interface(ia.ip).network
            nb = ipaddress.ip_interface(ib.ip).network
        except ValueError:
            return  # reported with the address
        if na != nb:
            add(f"{where}: ends are in different subnets ({na} and {nb})")
