"""OpenFlow switches in switch guests: the Open vSwitch bridge, its datapath
ports and controller, and the switch model on the OpenFlow channel.

The ovs-switch template boots with ovsdb-server and ovs-vswitchd running and
no bridge. Once its agent is up, selena runs the script rendered here: one
bridge `br0` whose ports are the switch's interfaces without an IP address
(port number = interface index + 1, so flows can name them), found by MAC.
With a controller the bridge is fail-secure and OpenFlow 1.0/1.3, and talks
either straight to the controller or, with a switch_model profile, to the
model listening on 127.0.0.1:6653, which forwards to the controller and
enforces the profile. Without a controller the bridge is a standalone
learning switch. The model runs in the guest, so its delays and rate limits
are in the guest's (dilated) time.
"""

from __future__ import annotations

import ipaddress
import logging
import shlex
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from selena.control.protocol import CommandSpec
from selena.errors import BackendError, ValidationError
from selena.model import Node, NodeKind, Topology

if TYPE_CHECKING:
    from selena.control.channel import CommandHandle
    from selena.control.interface import CommandChannel

log = logging.getLogger(__name__)

OPENFLOW_PORT = 6653
MODEL_LISTEN = f"127.0.0.1:{OPENFLOW_PORT}"
MODEL_DIR = "/opt/selena/switch-model"
BRIDGE = "br0"
# Real seconds for a switch guest to set up its bridge (emulation is slow),
# plus the guest seconds it may wait for its controller (x TDF).
SETUP_TIMEOUT_S = 300.0
CONNECT_TRIES = 1200          # 0.1 s each, in guest time: 120 s


@dataclass(frozen=True)
class SwitchSetup:
    node: str
    datapath_id: str                        # 16 hex digits, from the node id
    ports: tuple[tuple[int, str], ...]      # (OpenFlow port number, MAC)
    controller: str | None                  # "tcp:IP:PORT" of the controller
    profile: str | None                     # switch-model profile, None: no model
    bare: bool = False                      # br0 without ports: the scenario adds them
    stp: bool = False                       # rapid spanning tree (loops of switches)
    flows: tuple[str, ...] = ()             # static flows: the only forwarding, no controller


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


def switch_setups(topo: Topology) -> list[SwitchSetup]:
    """Every switch's setup, from a validated topology."""
    setups = []
    for node in topo.nodes.values():
        if node.kind is not NodeKind.SWITCH:
            continue
        wired = set(topo.wired_interfaces(node))
        ports = tuple((iface.index + 1, topo.mac_of(node, iface))
                      for iface in sorted(node.interfaces, key=lambda i: i.index)
                      if iface.ip is None and iface.index in wired)
        target = None
        if node.controller is not None:
            address = controller_address(node, topo.nodes[node.controller])
            target = f"tcp:{address}:{OPENFLOW_PORT}"
        setups.append(SwitchSetup(node.name, f"{node.id + 1:016x}", ports, target,
                                  node.switch_model if target else None,
                                  bare=node.bare_bridge, stp=node.stp and target is None,
                                  flows=tuple(node.flows) if target is None else ()))
    return setups


def bridge_script(setup: SwitchSetup) -> str:
    """Shell script for the switch's agent: bridge, ports, controller (in one
    piece: bridge_scripts splits it into commands that each fit)."""
    head, function, ports, tail = _bridge_parts(setup)
    return "\n".join(["set -e", *head, function, *ports, *tail]) + "\n"


def bridge_scripts(setup: SwitchSetup) -> list[str]:
    """The bridge setup as agent commands to run in order, each within one
    Xenstore node (SPEC_MAX_BYTES encoded): one command while it fits (up to
    about 39 ports), then the ports in batches, each command defining port()
    again, and the bridge brought up and connected by the last."""
    whole = bridge_script(setup)
    if _fits(whole):
        return [whole]
    head, function, ports, tail = _bridge_parts(setup)
    scripts: list[str] = []
    lines, added = ["set -e", *head, function], 0
    for line, is_port in [*((p, True) for p in ports), *((t, False) for t in tail)]:
        if not _fits("\n".join([*lines, line]) + "\n"):
            if not added:
                raise BackendError(f"switch {setup.node}: a bridge setup line does not fit "
                                   f"one agent command: {line[:80]}")
            scripts.append("\n".join(lines) + "\n")
            # Each command is a shell of its own: ports need port() again.
            lines, added = (["set -e", function] if is_port else ["set -e"]), 0
        lines.append(line)
        added += 1
    scripts.append("\n".join(lines) + "\n")
    return scripts


def _fits(script: str) -> bool:
    try:
        CommandSpec(shell=script).encode()
    except ValidationError:
        return False
    return True


def _bridge_parts(setup: SwitchSetup) -> tuple[list[str], str, list[str], list[str]]:
    """The bridge script's lines: the bridge, the port() function, one line
    per port, and what follows the ports."""
    q = shlex.quote
    lines = [f"ovs-vsctl --may-exist add-br {BRIDGE} -- set bridge {BRIDGE} "
             f"other-config:datapath-id={setup.datapath_id} "
             "other-config:disable-in-band=true protocols=OpenFlow10,OpenFlow13 "
             # secure: nothing forwards but the controller's or the static flows
             f"fail-mode={'secure' if setup.controller or setup.flows else 'standalone'}"
             + (" rstp_enable=true" if setup.stp else "")]
    # One function, one short line per port: a command holds about 39 ports.
    function = ('port() { DEV=$(for d in /sys/class/net/*; do [ "$(cat $d/address)" = "$1" ] '
                '&& echo "${d##*/}"; done; true); '
                '[ -n "$DEV" ] || { echo "no interface with MAC $1" >&2; exit 1; }; '
                'ip link set "$DEV" up; [ -z "$2" ] || ovs-vsctl --may-exist add-port '
                f'{BRIDGE} "$DEV" -- set interface "$DEV" ofport_request=$2; }}')
    ports = [f"port {q(mac)}" + ("" if setup.bare else f" {number}")
             for number, mac in setup.ports]
    tail = [f"ip link set {BRIDGE} up"]
    if setup.controller:
        target = f"tcp:{MODEL_LISTEN}" if setup.profile else setup.controller
        # Reconnect quickly after a model restart (default backoff is 8 s).
        tail.append(f"ovs-vsctl set-controller {BRIDGE} {q(target)} -- "
                    f"set controller {BRIDGE} max_backoff=1000")
        tail.append(_wait_connected(target))
    return lines, function, ports, tail


# Raw bytes of static flows per command: a command must fit one Xenstore node
# (SPEC_MAX_BYTES escaped), so a long flow table goes in several commands.
FLOWS_PER_COMMAND_BYTES = 1200


def flow_scripts(setup: SwitchSetup) -> list[str]:
    """Shell commands adding the switch's static flows, in order, each short
    enough for one command."""
    scripts: list[str] = []
    batch: list[str] = []
    size = 0
    for flow in setup.flows:
        quoted = shlex.quote(flow)
        if batch and size + len(quoted) > FLOWS_PER_COMMAND_BYTES:
            scripts.append(_add_flows(batch))
            batch, size = [], 0
        batch.append(quoted)
        size += len(quoted) + 1
    if batch:
        scripts.append(_add_flows(batch))
    return scripts


def _add_flows(quoted: list[str]) -> str:
    return f"printf '%s\\n' {' '.join(quoted)} | ovs-ofctl -O OpenFlow13 add-flows {BRIDGE} -"


def _wait_connected(target: str) -> str:
    """Shell: wait (in guest time, bounded) until OVS holds a connection to target."""
    return (f"n=0; until ovs-vsctl get controller {BRIDGE} is_connected | grep -q true; do "
            f"n=$((n + 1)); if [ $n -gt {CONNECT_TRIES} ]; then "
            f"echo \"{BRIDGE} is not connected to {target} after "
            f"{CONNECT_TRIES // 10} s\" >&2; exit 1; fi; sleep 0.1; done")


def model_command(setup: SwitchSetup, profile: str | None = None) -> CommandSpec:
    """The switch model proxy for this switch (runs until killed)."""
    profile = profile or setup.profile
    if not setup.controller or not profile:
        raise BackendError(f"switch {setup.node}: no controller or switch model profile")
    upstream = setup.controller.removeprefix("tcp:")
    return CommandSpec(argv=("python3", "-m", "ofmodel", "proxy", "--listen", MODEL_LISTEN,
                             "--controller", upstream, "--profile",
                             f"{MODEL_DIR}/profiles/{profile}.yaml"),
                       env={"PYTHONPATH": MODEL_DIR})


class Switches:
    """Sets up every switch of a running experiment and keeps its model."""

    def __init__(self, ctl: CommandChannel, setups: Iterable[SwitchSetup]):
        self.ctl = ctl
        self.setups = {s.node: s for s in setups}
        self.models: dict[str, CommandHandle] = {}

    def configure(self, progress: Callable[[str], None] | None = None,
                  nodes: Collection[str] | None = None) -> None:
        """Set up every switch, or those of `nodes` (a restarted one, as it
        was deployed: bridge, ports, static flows, controller, model profile)."""
        setups = {node: s for node, s in self.setups.items() if nodes is None or node in nodes}
        for setup in setups.values():
            if setup.profile:
                self.models[setup.node] = self.ctl.submit(setup.node, model_command(setup))
        # A switch's commands run in order, every switch's side by side: in
        # rounds, the n-th command of each switch that has one.
        scripts = {node: bridge_scripts(s) for node, s in setups.items()}
        limit = SETUP_TIMEOUT_S + CONNECT_TRIES / 10 * self.ctl.tdf
        for n in range(max(map(len, scripts.values()), default=0)):
            handles = [(node, self.ctl.submit(node, CommandSpec(shell=parts[n])))
                       for node, parts in scripts.items() if n < len(parts)]
            for node, handle in handles:
                what = ("bridge setup" if len(scripts[node]) == 1
                        else f"bridge setup (command {n + 1} of {len(scripts[node])})")
                self._check(node, self.ctl.wait(handle, limit), what)
        flows = [(node, [self.ctl.submit(node, CommandSpec(shell=script))
                         for script in flow_scripts(s)])
                 for node, s in setups.items()]
        for node, batches in flows:
            for handle in batches:
                self._check(node, self.ctl.wait(handle, SETUP_TIMEOUT_S), "static flows")
            if progress:
                setup = self.setups[node]
                how = (f"switch model {setup.profile}" if setup.profile
                       else "controller" if setup.controller
                       else f"{len(setup.flows)} static flows" if setup.flows else "standalone")
                progress(f"switch {node}: {len(setup.ports)} ports, {how}")
        self.check_models()

    def forget(self, node: str) -> None:
        """A switch going away (a restart): its model's end is no failure."""
        self.models.pop(node, None)

    def set_profile(self, node: str, profile: str | None) -> None:
        """Restart node's switch model with another profile (None: OVS talks
        to the controller directly) and empty its flow table, so flows of the
        next phase are set up under the new profile."""
        setup = self.setups.get(node)
        if setup is None or setup.controller is None:
            raise BackendError(f"{node} is not an OpenFlow switch of this experiment")
        old = self.models.pop(node, None)
        if old is not None:
            self.ctl.kill(old)
            self.ctl.wait(old, SETUP_TIMEOUT_S)
        # Empty the table while no controller is connected: the controller
        # installs its table-miss entry when the switch reconnects.
        target = f"tcp:{MODEL_LISTEN}" if profile else setup.controller
        flush = (f"set -e\novs-vsctl del-controller {BRIDGE}\n"
                 f"ovs-ofctl -O OpenFlow13 del-flows {BRIDGE}\n")
        result = self.ctl.wait(self.ctl.submit(node, CommandSpec(shell=flush)), SETUP_TIMEOUT_S)
        self._check(node, result, "emptying the flow table")
        if profile:
            self.models[node] = self.ctl.submit(node, model_command(setup, profile))
        script = (f"set -e\novs-vsctl set-controller {BRIDGE} {shlex.quote(target)} -- "
                  f"set controller {BRIDGE} max_backoff=1000\n{_wait_connected(target)}\n")
        limit = SETUP_TIMEOUT_S + CONNECT_TRIES / 10 * self.ctl.tdf
        result = self.ctl.wait(self.ctl.submit(node, CommandSpec(shell=script)), limit)
        self._check(node, result, f"switching to profile {profile}")
        self.check_models()
        # A restart of the switch sets it up again with the profile it has now.
        self.setups[node] = replace(setup, profile=profile)
        log.info("switch %s: model profile now %s", node, profile)

    def check_models(self) -> None:
        """Raise if a switch model has exited (it runs until killed)."""
        for node, handle in self.models.items():
            if handle.done:
                result = self.ctl.wait(handle, 0)
                raise BackendError(f"switch {node}: the switch model stopped "
                                   f"({result.summary()}): "
                                   f"{result.stderr.decode(errors='replace').strip()[-300:]}")

    @staticmethod
    def _check(node: str, result, what: str) -> None:
        if not result.ok:
            raise BackendError(f"switch {node}: {what} failed ({result.summary()}): "
                               f"{result.stderr.decode(errors='replace').strip()[-300:]}")
