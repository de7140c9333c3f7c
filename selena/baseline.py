"""The real-time baseline: a selena topology translated for Mininet.

Mininet runs the same hosts, links and commands in real time on the same
Dom0 (hosts are network namespaces, links veth pairs shaped by Mininet's
TCLink, switches Open vSwitch bridges), so a scenario's metrics can be put
beside selena's at any TDF. The translation is a pure function of the
topology and its plan (`translate`), so it is tested without Mininet; the
mininet backend (selena/backends/mininet.py) builds it.

What translates, one to one:
  host              -> a Mininet host (its own network namespace)
  switch            -> an Open vSwitch bridge in standalone mode (OVSBridge),
                       with rapid spanning tree when the node asks for stp
  hub               -> the same, a learning bridge joining its members
  link rate         -> TCLink bw (Mbit/s, htb), on each end's egress
  link delay/jitter -> TCLink delay/jitter (netem), on each end's egress: a
                       one-way delay per direction, selena's semantics
  link loss         -> TCLink loss in percent (selena's loss is a ratio)
  link queue        -> TCLink max_queue_size (packets)
  interface names, MACs, IPv4/IPv6 addresses, routes, queue lengths, static
  neighbour entries -> the same, from the guest's boot-time directives
Refused, with the node named: OpenFlow controllers and switches with a
controller or a switch model (Mininet's own controllers are not selena's
guests), bare bridges, pinned or multi-vCPU nodes (Mininet hosts share the
Dom0's CPUs; there is nothing to pin), and guest-side shaping.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass, field

from selena.errors import BackendError
from selena.model import Link, Node, NodeKind, Topology
from selena.plan import Plan, VifPlan
from selena.shaping import Placement

# Mininet's node names end up in interface names (s1-eth1): short and plain.
MAX_NAME = 10


@dataclass
class MnLink:
    node1: str
    node2: str
    intf1: str
    intf2: str
    mac1: str | None
    mac2: str | None
    tc: dict[str, object] = field(default_factory=dict)     # TCLink parameters


@dataclass
class MnNet:
    hosts: list[str] = field(default_factory=list)
    switches: list[tuple[str, bool]] = field(default_factory=list)   # (name, stp)
    links: list[MnLink] = field(default_factory=list)
    # Per host: shell commands run in its namespace once the network is up.
    setup: dict[str, list[str]] = field(default_factory=dict)
    # Per switch with static flows: the flows, in Mininet's port numbers.
    flows: dict[str, list[str]] = field(default_factory=dict)


def tc_params(link: Link) -> dict[str, object]:
    params: dict[str, object] = {}
    if link.rate_bps is not None:
        params["bw"] = link.rate_bps / 1e6
    if link.delay_s:
        params["delay"] = f"{link.delay_s * 1e6:.0f}us"
    if link.jitter_s:
        params["jitter"] = f"{link.jitter_s * 1e6:.0f}us"
    if link.loss:
        params["loss"] = link.loss * 100
    if link.queue_packets is not None:
        params["max_queue_size"] = link.queue_packets
    return params


def translate(topo: Topology, plan: Plan) -> MnNet:
    """The Mininet network for a validated topology; BackendError naming
    every item that has no faithful translation."""
    problems: list[str] = []
    if plan.placement is Placement.GUEST:
        problems.append("--shaping guest: Mininet shapes its links itself (TCLink)")
    net = MnNet()
    for node in topo.nodes.values():
        _translate_node(node, net, problems)
    vifs = {(g.node, v.index): v for g in plan.guests for v in g.vifs}
    translated = _translate_links(topo, vifs, net)
    _translate_hubs(topo, vifs, net)
    mn_ports = _name_switch_ports(net)
    _translate_flows(topo, translated, mn_ports, net, problems)
    if problems:
        raise BackendError("the Mininet baseline cannot run this topology:\n  "
                           + "\n  ".join(problems))
    for guest in plan.guests:
        if guest.node in net.hosts:
            net.setup[guest.node] = net_commands(guest.net, {v.mac: topo.nodes[guest.node]
                                                             .device(v.index)
                                                             for v in guest.vifs})
    return net


def _translate_node(node: Node, net: MnNet, problems: list[str]) -> None:
    """Add the node as a Mininet host or switch, or say why it has none."""
    where = f"node {node.name}"
    if len(node.name) > MAX_NAME or not node.name.replace("_", "").isalnum():
        problems.append(f"{where}: Mininet needs a name of at most {MAX_NAME} letters, "
                        "digits and '_'")
    if node.kind is NodeKind.HOST:
        net.hosts.append(node.name)
    elif node.kind is NodeKind.SWITCH:
        if node.controller or node.switch_model:
            problems.append(f"{where}: an OpenFlow switch with a controller or a switch "
                            "model has no Mininet baseline")
        if node.bare_bridge:
            problems.append(f"{where}: a bare bridge (ports added by the scenario) has no "
                            "Mininet baseline")
        net.switches.append((node.name, node.stp))
    else:
        problems.append(f"{where}: a {node.kind.value} node has no Mininet baseline")
    if node.vcpus != 1 or node.cpus:
        problems.append(f"{where}: vcpus/cpus pinning has no Mininet equivalent (hosts "
                        "share Dom0's CPUs)")


def _translate_links(topo: Topology, vifs: dict[tuple[str, int], VifPlan],
                     net: MnNet) -> list[tuple[Link, MnLink]]:
    """Each wired link as a shaped Mininet link; each with its translation."""
    translated: list[tuple[Link, MnLink]] = []
    for link in topo.links:
        a, b = link.a, link.b
        if (a.node, a.iface) not in vifs or (b.node, b.iface) not in vifs:
            continue                                    # reported by validation
        net.links.append(MnLink(
            a.node, b.node, topo.nodes[a.node].device(a.iface),
            topo.nodes[b.node].device(b.iface), vifs[(a.node, a.iface)].mac,
            vifs[(b.node, b.iface)].mac, tc_params(link)))
        translated.append((link, net.links[-1]))
    return translated


def _translate_hubs(topo: Topology, vifs: dict[tuple[str, int], VifPlan],
                    net: MnNet) -> None:
    """A hub as a switch of its own with an unshaped link to each end."""
    for hub in topo.hubs:
        name = f"hub{len(net.switches)}"
        net.switches.append((name, False))
        for i, end in enumerate(hub.endpoints, start=1):
            net.links.append(MnLink(end.node, name, topo.nodes[end.node].device(end.iface),
                                    f"{name}-eth{i}", vifs[(end.node, end.iface)].mac, None))


def _name_switch_ports(net: MnNet) -> dict[tuple[int, int], int]:
    """Name the switch ends of the links; return Mininet's port numbers."""
    # Switch ports: Mininet names them itself; the hosts' names are selena's.
    # A port gets a locally administered MAC of its own: Mininet's veth pair
    # takes both addresses or none ("None" is invalid lladdr otherwise).
    numbers = {name: i for i, (name, _) in enumerate(net.switches, start=1)}
    mn_ports = _port_numbers(net.links)
    for mn_link in net.links:
        for side in (1, 2):
            node = mn_link.node1 if side == 1 else mn_link.node2
            if node in numbers:
                port = mn_ports[(id(mn_link), side)]
                setattr(mn_link, f"intf{side}", f"{node}-eth{port}")
                setattr(mn_link, f"mac{side}", _switch_port_mac(numbers[node], port))
    return mn_ports


def _translate_flows(topo: Topology, translated: list[tuple[Link, MnLink]],
                     mn_ports: dict[tuple[int, int], int], net: MnNet,
                     problems: list[str]) -> None:
    """Static flows with selena's port numbers rewritten to Mininet's."""
    # Per switch: selena's port number (interface index + 1) -> Mininet's.
    renumber: dict[str, dict[int, int]] = {}
    for link, mn_link in translated:
        for end, side in ((link.a, 1), (link.b, 2)):
            renumber.setdefault(end.node, {})[end.iface + 1] = mn_ports[(id(mn_link), side)]
    for node in topo.nodes.values():
        if node.kind is NodeKind.SWITCH and node.flows and not node.controller:
            net.flows[node.name] = _mininet_flows(node, renumber.get(node.name, {}),
                                                  problems)


# The port references a static flow may make; anything else naming a port
# (enqueue, output(port=...), set_field to in_port, ...) is refused.
_PORT_REF = re.compile(r"(in_port=|output:)(\d+)")
_OTHER_PORT_REF = re.compile(r"enqueue|output\(|in_port[^=]|->in_port|group:")


def _mininet_flows(node: Node, ports: dict[int, int], problems: list[str]) -> list[str]:
    """The switch's static flows with selena's port numbers (interface index
    + 1) rewritten to Mininet's (`ports`, from the order of its links)."""
    flows = []
    for flow in node.flows:
        if _OTHER_PORT_REF.search(flow):
            problems.append(f"node {node.name}: flow {flow!r} names ports in a way the "
                            "Mininet baseline does not translate (only in_port=N and output:N)")
            continue
        unknown = [m.group(2) for m in _PORT_REF.finditer(flow) if int(m.group(2)) not in ports]
        if unknown:
            problems.append(f"node {node.name}: flow {flow!r} names port {unknown[0]}, "
                            "which is not wired")
            continue
        flows.append(_PORT_REF.sub(lambda m: f"{m.group(1)}{ports[int(m.group(2))]}", flow))
    return flows


def _switch_port_mac(switch: int, port: int) -> str:
    """02:... is locally administered, outside Xen's 00:16:3e the guests use."""
    if switch > 0xffff or port > 0xff:
        raise BackendError(f"the Mininet baseline numbers at most 65535 switches of 255 "
                           f"ports (switch {switch}, port {port})")
    return f"02:4d:4e:{switch >> 8:02x}:{switch & 0xff:02x}:{port:02x}"


def _port_numbers(links: list[MnLink]) -> dict[tuple[int, int], int]:
    """Mininet numbers a node's ports in the order its links are added:
    (id of the link, side 1 or 2) -> that end's port number, in one pass."""
    seen: dict[str, int] = {}
    numbers: dict[tuple[int, int], int] = {}
    for link in links:
        for side, node in ((1, link.node1), (2, link.node2)):
            seen[node] = seen.get(node, 0) + 1
            numbers[(id(link), side)] = seen[node]
    return numbers


def net_commands(directives: str, names: dict[str, str]) -> list[str]:
    """Shell commands doing in a namespace what the guest agent does with
    its boot-time directives (guest-agent/PROTOCOL.md): the interfaces
    already have their final names."""
    q = shlex.quote
    commands = []
    for line in directives.splitlines():
        word, *args = line.split()
        if word == "name":
            continue
        if word == "addr":
            dev, cidr = names[args[0]], args[1]
            if ipaddress.ip_interface(cidr).version == 6:
                commands.append(f"sysctl -qw net.ipv6.conf.{dev}.accept_dad=0")
            commands.append(f"ip addr add {q(cidr)} dev {dev} && ip link set {dev} up")
        elif word in ("mtu", "txqueuelen"):
            commands.append(f"ip link set {names[args[0]]} {word} {int(args[1])}")
        elif word == "route":
            commands.append(f"ip route replace {q(args[0])} via {q(args[1])}")
        elif word == "arp":
            commands.append(f"ip neigh replace {q(args[0])} lladdr {q(args[1])} dev "
                            f"{names[args[2]]} nud permanent")
        else:
            raise BackendError(f"boot directive {line!r} has no Mininet translation")
    return commands
