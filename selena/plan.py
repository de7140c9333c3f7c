"""Topology -> Plan: what the backend must create, with nothing created yet.

The plan names every Dom0 object (domains, bridges, vifs) so that creation,
status and cleanup agree, and renders each guest's xl configuration.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from selena.control.protocol import net_directives
from selena.errors import ValidationError
from selena.model import Link, Topology
from selena.shaping import Placement, shaping_commands

TEMPLATE_ROOT = Path("/usr/share/selena/templates")
GUEST_CMDLINE = "console=hvc0 clocksource=xen tsc=unstable quiet"
IFNAMSIZ = 15

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("selena.backends", "templates"),
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
)


@dataclass(frozen=True)
class VifPlan:
    name: str          # Dom0-side interface name, at most 15 characters
    mac: str
    bridge: str
    script: str
    index: int = 0     # the guest's interface index: xl's vif order makes it ethN


@dataclass
class GuestPlan:
    node: str
    domain_name: str
    kernel: str
    ramdisk: str
    cmdline: str
    memory_mb: int
    vcpus: int
    cpus: str | None
    vifs: list[VifPlan] = field(default_factory=list)
    template: str = ""
    # Boot-time network directives for the guest agent (PROTOCOL.md, `$S/net`).
    net: str = ""
    # Guest-side shaping (Placement.GUEST): per interface MAC, the tc commands
    # with the guest's device name as "$DEV".
    guest_shaping: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    static_arp: list[tuple[str, str, str]] = field(default_factory=list)  # ip, mac, via mac

    def render_net(self, addresses: list[tuple[str, str]], gateway: str | None,
                   txqueuelen: list[tuple[str, int]]) -> None:
        self.net = net_directives(addresses, gateway=gateway, txqueuelen=txqueuelen,
                                  arp=self.static_arp)


@dataclass(frozen=True)
class SegmentPlan:
    bridge: str
    kind: str          # "ovs" or "linux"
    members: tuple[str, ...]


@dataclass
class Plan:
    experiment: str
    tdf: float
    guests: list[GuestPlan]
    segments: list[SegmentPlan]
    shaping: list[list[str]]

    def xl_config(self, guest: GuestPlan) -> str:
        return _ENV.get_template("xl.cfg.j2").render(experiment=self.experiment, guest=guest)


def short_id(experiment: str) -> str:
    """A 4-hex tag for Dom0 interface names, which are limited to 15 characters."""
    return hashlib.sha256(experiment.encode()).hexdigest()[:4]


def make_plan(topo: Topology, *, bridge_kind: str = "ovs",
              placement: Placement = Placement.DOM0,
              template_root: Path = TEMPLATE_ROOT) -> Plan:
    """Plan a validated topology (see selena.validate)."""
    tag = short_id(topo.name)
    guests: dict[str, GuestPlan] = {}
    vif_names: dict[tuple[str, int], str] = {}
    for node in topo.nodes.values():
        tdir = template_root / node.template
        guests[node.name] = GuestPlan(
            node=node.name, domain_name=f"selena-{topo.name}-{node.name}",
            kernel=str(tdir / "vmlinuz"), ramdisk=str(tdir / "initrd.gz"),
            cmdline=GUEST_CMDLINE, memory_mb=node.memory_mb, vcpus=node.vcpus, cpus=node.cpus,
            template=node.template)
        for iface in node.interfaces:
            vif_names[(node.name, iface.index)] = f"sv{tag}{node.id}.{iface.index}"[:IFNAMSIZ]
    segments: list[SegmentPlan] = []
    shaping: list[list[str]] = []
    script = "vif-openvswitch" if bridge_kind == "ovs" else "vif-bridge"
    members_of: list[tuple[str, list[tuple[str, int]], Link | None]] = []
    for i, link in enumerate(topo.links):
        members_of.append((f"sl{tag}l{i}", [(link.a.node, link.a.iface),
                                             (link.b.node, link.b.iface)], link))
    for i, hub in enumerate(topo.hubs):
        members_of.append((f"sl{tag}h{i}", [(e.node, e.iface) for e in hub.endpoints], None))
    for bridge, members, link in members_of:
        for node_name, index in members:
            node = topo.nodes[node_name]
            iface = node.interface(index)
            assert iface is not None, "validate() before make_plan()"
            vif = VifPlan(vif_names[(node_name, index)], topo.mac_of(node, iface), bridge,
                          script, index)
            guests[node_name].vifs.append(vif)
            if link is not None and placement is Placement.DOM0:
                # Dom0 egress on a vif is the direction towards that guest.
                shaping += shaping_commands(vif.name, link, topo.tdf, placement)
            elif link is not None:
                # Guest egress is the direction away from that guest.
                commands = shaping_commands("$DEV", link, topo.tdf, placement)
                if commands:
                    guests[node_name].guest_shaping.append((vif.mac, commands))
        segments.append(SegmentPlan(bridge, bridge_kind,
                                    tuple(vif_names[m] for m in members)))
    for guest in guests.values():
        # Numerically: the n-th vif in the xl config becomes the guest's eth<n>.
        guest.vifs.sort(key=lambda v: v.index)
    for node_name, index, ip, mac in topo.static_arp:
        guest = guests.get(node_name)
        via = next((v.mac for v in guest.vifs if v.index == index), None) if guest else None
        if via is None:
            raise ValidationError(f"static ARP entry {ip} on {node_name} eth{index}: "
                                  "no such node or the interface is not wired")
        guest.static_arp.append((ip, mac, via))
    for guest in guests.values():
        _plan_net(topo, guest)
    return Plan(topo.name, topo.tdf, list(guests.values()), segments, shaping)


def pool_key(guest: GuestPlan) -> str:
    """Guests with equal keys are interchangeable in the warm pool."""
    return f"{guest.template}-m{guest.memory_mb}-c{guest.vcpus}"


def _plan_net(topo: Topology, guest: GuestPlan) -> None:
    """Addresses, queue lengths and gateway of the interfaces that got a vif
    (the agent waits for each named MAC, so unwired interfaces are left out)."""
    node = topo.nodes[guest.node]
    wired = {vif.index: vif.mac for vif in guest.vifs}
    addresses, qlens = [], []
    gateway = None
    for iface in node.interfaces:
        mac = wired.get(iface.index)
        if mac is None:
            continue
        if iface.ip:
            addresses.append((mac, iface.ip))
        qlens.append((mac, iface.txqueuelen))
        gateway = gateway or iface.gateway
    guest.render_net(addresses, gateway, qlens)


def guest_shaping_script(guest: GuestPlan) -> str | None:
    """A shell script for the guest agent applying the guest-side shaping;
    interfaces are found by MAC (names depend on frontend order)."""
    if not guest.guest_shaping:
        return None
    # iproute2's tc by path: busybox's shell runs its own (limited) tc applet
    # for a bare `tc`, whatever PATH says.
    lines = ["set -e", 'TC=/usr/sbin/tc; [ -x "$TC" ] || TC=/sbin/tc']
    for mac, commands in guest.guest_shaping:
        lines.append(f'DEV=$(for d in /sys/class/net/*; do [ "$(cat $d/address)" = "{mac}" ] '
                     '&& echo "${d##*/}"; done; true)')
        lines.append(f'[ -n "$DEV" ] || {{ echo "no interface with MAC {mac}" >&2; exit 1; }}')
        for argv in commands:
            words = ['"$DEV"' if a == "$DEV" else shlex.quote(a) for a in argv]
            if argv[0] == "tc":
                words[0] = '"$TC"'
            lines.append(" ".join(words))
    return "\n".join(lines) + "\n"
