"""Topology -> Plan: what the backend must create, with nothing created yet.

The plan names every Dom0 object (domains, bridges, vifs) so that creation,
status and cleanup agree, and renders each guest's xl configuration.
"""

from __future__ import annotations

import hashlib
import ipaddress
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from selena import units
from selena.control.protocol import SPEC_MAX_BYTES, net_directives
from selena.errors import TemplateError, ValidationError
from selena.model import Link, Node, Topology
from selena.model.cpus import credit_cap, fold_mask
from selena.openflow import SwitchSetup, switch_setups
from selena.shaping import Placement, shaping_commands
from selena.templates import TemplateSpec, load_template, normalise_packages, variant_disk

TEMPLATE_ROOT = Path("/usr/share/selena/templates")
IFNAMSIZ = 15
# A node's tsc_mode as xl's configuration names it.
XL_TSC_MODES = {"native": "native", "emulate": "always_emulate"}



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
    tsc_mode: str | None = None     # xl's tsc_mode, None for the default
    virt: str = "pv"                # xl's type: "pv", "pvh" or "hvm"
    cpu_time: str = "dilated"       # "real": capped to 100/TDF % per vCPU
    disk: str | None = None         # a read-only root image (debian templates)
    cpu_share: float | None = None  # of the host's CPUs per virtual second (Node.cpu_share)
    host_cpus: int | None = None    # the host's, where known: a cpu_share's cap needs them

    @property
    def cpu_capped(self) -> bool:
        """Whether the guest's CPU cap follows the TDF."""
        return self.cpu_time == "real" or self.cpu_share is not None

    def cpu_cap(self, tdf: float) -> int:
        """The credit2 cap (percent of one CPU, 0 = none) at `tdf`; ValueError
        if Xen cannot give it, or for a cpu_share where the host's CPUs are
        not known."""
        return credit_cap(self.vcpus, tdf, self.cpu_time, self.cpu_share, self.host_cpus)


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
    # Dom0-side shaping: each vif with the link it shapes (egress toward its guest).
    shaped: list[tuple[str, Link]]
    placement: Placement = Placement.DOM0
    # Set up through the agents once they run: each switch's bridge.
    switches: list[SwitchSetup] = field(default_factory=list)
    # What the plan was made from (backends that are not Xen translate it).
    topology: Topology | None = field(default=None, repr=False, compare=False)
    _index: dict[str, list[int]] = field(default_factory=dict, init=False, repr=False,
                                         compare=False)
    _index_key: tuple[int, int] | None = field(default=None, init=False, repr=False,
                                               compare=False)

    def guest(self, node: str) -> GuestPlan:
        for guest in self.guests:
            if guest.node == node:
                return guest
        raise KeyError(node)

    @property
    def tdf_text(self) -> str:
        return units.tdf_text(self.tdf)

    @property
    def shaping(self) -> list[list[str]]:
        """The Dom0 tc commands at the plan's TDF."""
        return self.shaping_at(self.tdf)

    def shaping_at(self, tdf: float, vifs: set[str] | None = None) -> list[list[str]]:
        """The Dom0 tc commands shaping every vif (or those in `vifs`) at
        `tdf`: rates / TDF and delays x TDF, so each link keeps its virtual
        rate and delay at any TDF."""
        commands: list[list[str]] = []
        if vifs is None:
            chosen = self.shaped
        else:
            # One guest's vifs by lookup (in the plan's order): a scan of every
            # shaped vif per guest made rendering a plan quadratic.
            index = self._shaped_index()
            chosen = [self.shaped[i] for i in sorted(i for v in vifs for i in index.get(v, ()))]
        for vif, link in chosen:
            commands += shaping_commands(vif, link, tdf, self.placement)
        return commands

    def _shaped_index(self) -> dict[str, list[int]]:
        key = (id(self.shaped), len(self.shaped))
        if self._index_key != key:
            self._index = {}
            for i, (vif, _) in enumerate(self.shaped):
                self._index.setdefault(vif, []).append(i)
            self._index_key = key
        return self._index


def short_id(experiment: str) -> str:
    """A 4-hex tag for Dom0 interface names, which are limited to 15 characters."""
    return hashlib.sha256(experiment.encode()).hexdigest()[:4]


def make_plan(topo: Topology, *, bridge_kind: str = "ovs",
              placement: Placement = Placement.DOM0,
              template_root: Path = TEMPLATE_ROOT, host_cpus: int | None = None) -> Plan:
    """Plan a validated topology (see selena.validate). With `host_cpus`, a
    pinning mask naming CPUs the host lacks is folded onto it (CPU n ->
    n mod host_cpus), the rule validation warns about."""
    if bridge_kind not in ("ovs", "linux"):
        raise ValidationError(f"bridge kind {bridge_kind!r}: use ovs or linux")
    tag = short_id(topo.name)
    guests = _plan_guests(topo, template_root, host_cpus)
    vif_names = {(node.name, iface.index): f"sv{tag}{node.id}.{iface.index}"[:IFNAMSIZ]
                 for node in topo.nodes.values() for iface in node.interfaces}
    segments: list[SegmentPlan] = []
    shaped: list[tuple[str, Link]] = []
    script = "vif-openvswitch" if bridge_kind == "ovs" else "vif-bridge"
    for bridge, members, link in _segments_of(topo, tag):
        for node_name, index in members:
            vif = _attach(topo, guests[node_name], vif_names[(node_name, index)], index,
                          bridge, script)
            if link is not None:
                _shape(topo, guests[node_name], vif, link, placement, shaped)
        segments.append(SegmentPlan(bridge, bridge_kind,
                                    tuple(vif_names[m] for m in members)))
    for guest in guests.values():
        # Numerically: the n-th vif in the xl config becomes the guest's eth<n>.
        guest.vifs.sort(key=lambda v: v.index)
    _plan_static_arp(topo, guests)
    for guest in guests.values():
        _plan_net(topo, guest)
    return Plan(topo.name, topo.tdf, list(guests.values()), segments, shaped, placement,
                switch_setups(topo), topology=topo)


def _plan_guests(topo: Topology, template_root: Path,
                 host_cpus: int | None) -> dict[str, GuestPlan]:
    """Each node's domain, still without vifs, by node name."""
    guests: dict[str, GuestPlan] = {}
    specs: dict[str, TemplateSpec] = {}
    for node in topo.nodes.values():
        if node.template not in specs:
            specs[node.template] = load_template(template_root, node.template)
        spec = specs[node.template]
        guests[node.name] = GuestPlan(
            node=node.name, domain_name=f"selena-{topo.name}-{node.name}",
            kernel=str(spec.kernel), ramdisk=str(spec.ramdisk), disk=_disk(node, spec),
            cmdline=spec.cmdline, memory_mb=node.memory_mb, vcpus=node.vcpus,
            cpus=(fold_mask(node.cpus, host_cpus) or node.cpus) if node.cpus and host_cpus
            else node.cpus,
            template=node.template,
            tsc_mode=_tsc_mode(node), virt=node.virt,
            cpu_time=node.cpu_time, cpu_share=node.cpu_share, host_cpus=host_cpus)
    return guests


def _tsc_mode(node: Node) -> str | None:
    """xl's tsc_mode for a node: a PVH or HVM guest's TSC is emulated unless it asks
    for the raw one; in Xen's default mode an HVM container on a host whose
    TSC Xen trusts reads the hardware TSC, which the hypervisor refuses to
    dilate."""
    if node.tsc_mode is None and node.virt in ("pvh", "hvm"):
        return XL_TSC_MODES["emulate"]
    return XL_TSC_MODES.get(node.tsc_mode or "")


def _segments_of(topo: Topology,
                 tag: str) -> list[tuple[str, list[tuple[str, int]], Link | None]]:
    """Each bridge, the (node, interface) pairs on it and its link (None for
    a hub): links first, then hubs, in the order declared."""
    segments: list[tuple[str, list[tuple[str, int]], Link | None]] = []
    for i, link in enumerate(topo.links):
        segments.append((f"sl{tag}l{i}", [(link.a.node, link.a.iface),
                                          (link.b.node, link.b.iface)], link))
    for i, hub in enumerate(topo.hubs):
        segments.append((f"sl{tag}h{i}", [(e.node, e.iface) for e in hub.endpoints], None))
    return segments


def _attach(topo: Topology, guest: GuestPlan, name: str, index: int, bridge: str,
            script: str) -> VifPlan:
    """Give the guest a vif for its interface `index` on `bridge`."""
    node = topo.nodes[guest.node]
    iface = node.interface(index)
    assert iface is not None, "validate() before make_plan()"
    vif = VifPlan(name, topo.mac_of(node, iface), bridge, script, index)
    guest.vifs.append(vif)
    return vif


def _shape(topo: Topology, guest: GuestPlan, vif: VifPlan, link: Link,
           placement: Placement, shaped: list[tuple[str, Link]]) -> None:
    """Shape the link's direction towards (Dom0) or away from (guest) the guest."""
    if placement is Placement.DOM0:
        # Dom0 egress on a vif is the direction towards that guest.
        if shaping_commands(vif.name, link, topo.tdf, placement):
            shaped.append((vif.name, link))
        return
    # Guest egress is the direction away from that guest.
    commands = shaping_commands("$DEV", link, topo.tdf, placement)
    if commands:
        guest.guest_shaping.append((vif.mac, commands))


def _plan_static_arp(topo: Topology, guests: dict[str, GuestPlan]) -> None:
    for entry in topo.static_arp:
        guest = guests.get(entry.node)
        via = next((v.mac for v in guest.vifs if v.index == entry.iface), None) \
            if guest else None
        if guest is None or via is None:
            known = topo.nodes.get(entry.node)
            device = known.device(entry.iface) if known else f"eth{entry.iface}"
            raise ValidationError(f"static ARP entry {entry.ip} on {entry.node} "
                                  f"{device}: no such node or the interface is not "
                                  "wired")
        guest.static_arp.append((entry.ip, entry.mac.lower(), via))


def pool_key(guest: GuestPlan) -> str:
    """Guests with equal keys are interchangeable in the warm pool."""
    key = f"{guest.template}-m{guest.memory_mb}-c{guest.vcpus}"
    # A domain's type and TSC mode are fixed when it is created.
    if guest.virt != "pv":
        key += f"-{guest.virt}"
    if guest.tsc_mode:
        key += f"-t{guest.tsc_mode.replace('_', '')}"
    if guest.disk:
        # The image (a package variant) in a few characters: the key is part
        # of pooled domains' names.
        key += "-d" + hashlib.sha256(Path(guest.disk).name.encode()).hexdigest()[:8]
    return key


def _disk(node: Node, spec: TemplateSpec) -> str | None:
    """The node's root image: its template's, or the variant with the
    node's packages, which must have been built (nothing is created yet)."""
    if spec.disk and node.virt == "hvm":
        # The device model would put the image on an emulated IDE disk,
        # which it will not open read-only, and the image is shared.
        raise TemplateError(f"node {node.name}: an HVM node boots an initramfs template; "
                            f"{node.template} is a disk image (use virt='pvh' for it)")
    if not node.packages:
        return str(spec.disk) if spec.disk else None
    if spec.disk is None:
        raise TemplateError(f"node {node.name}: packages {', '.join(node.packages)} need a "
                            f"disk-image template (debian, or one based on it); "
                            f"{node.template} is an initramfs")
    disk = variant_disk(spec.disk, node.packages)
    if spec.disk.exists() and not disk.exists():
        raise TemplateError(
            f"node {node.name}: the {node.template} image with packages "
            f"{', '.join(normalise_packages(node.packages))} is not built ({disk.name}); "
            "build it where Debian's mirror is reachable, before the experiment: "
            "`selena lab build --scenario FILE` for the lab")
    return str(disk)


def _plan_net(topo: Topology, guest: GuestPlan) -> None:
    """Names, addresses, queue lengths and default routes of the interfaces
    that got a vif (the agent waits for each named MAC, so unwired interfaces
    are left out). Each interface is named as the model says (eth<index>, or
    eth<index + 1> for SELENA-style nodes), whatever order the guest's
    frontends appear in."""
    guest.net = net_text(topo.nodes[guest.node], {vif.index: vif.mac for vif in guest.vifs},
                         guest.static_arp)


# What netfront's interfaces start with (Linux's ether_setup): a queue length
# that needs no directive, left out when the directives would not fit.
DEFAULT_TXQUEUELEN = 1000


def net_text(node: Node, wired: dict[int, str],
             arp: list[tuple[str, str, str]] | None = None) -> str:
    """A guest's boot-time network directives ($S/net): `wired` maps the
    indexes of its interfaces with a vif to their MACs, `arp` its static
    neighbour entries (ip, mac, via mac). They are one Xenstore value, so
    past SPEC_MAX_BYTES the queue lengths equal to the kernel's default go
    (a switch of 40 ports fits by names alone); validate reports what still
    does not fit."""
    names, addresses, qlens = [], [], []
    gateways: dict[int, str] = {}
    for iface in sorted(node.interfaces, key=lambda i: i.index):
        mac = wired.get(iface.index)
        if mac is None:
            continue
        names.append((mac, node.device(iface.index)))
        addresses += [(mac, address) for address in iface.addresses()]
        qlens.append((mac, iface.txqueuelen))
        for gateway in (iface.gateway, iface.gateway6):
            if gateway:
                gateways.setdefault(ipaddress.ip_address(gateway).version, gateway)
    routes = [gateways[v] for v in sorted(gateways)]
    text = net_directives(addresses, txqueuelen=qlens, arp=arp or [], names=names,
                          gateways=routes)
    if len(text.encode()) > SPEC_MAX_BYTES:
        # Only then: shorter guests keep every line (and their plans as before).
        qlens = [(mac, qlen) for mac, qlen in qlens if qlen != DEFAULT_TXQUEUELEN]
        text = net_directives(addresses, txqueuelen=qlens, arp=arp or [], names=names,
                              gateways=routes)
    return text


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
