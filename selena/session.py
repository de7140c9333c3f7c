"""Interactive use of a running experiment, as Mininet's CLI and `Mininet`
object offer it: node names standing for their addresses, pingall, iperf,
links down and up. The library core of `selena run`'s `selena>` prompt
(selena/cli/interactive.py) and of the Mininet-compatible API
(selena.mininet); both only parse and print around it.

    with Experiment(topo) as exp:
        net = Session(exp)
        result = net.pingall()
        print("\\n".join(result.lines()), result.results_line(), sep="\\n")
"""

from __future__ import annotations

import json
import logging
import math
import re
import signal
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from selena import units
from selena.control.channel import CommandResult
from selena.errors import ScenarioError, UnitError
from selena.model import NodeKind
from selena.openflow import BRIDGE
from selena.relay import OutputFollower, relayed
from selena.runner import CommandResult as RunResult
from selena.runner import Runner
from selena.signals import SignalInterrupt
from selena.transfer import Transfer

if TYPE_CHECKING:
    from selena.experiment import Experiment

log = logging.getLogger(__name__)

# Virtual seconds a ping or iperf command may take before it is killed.
PING_COMMAND_TIMEOUT_S = 30.0
# Hosts whose pingall loops run at once (see Session.pingall).
PINGALL_SIDE_BY_SIDE = 8
IPERF_SLACK_S = 60.0
# Attempts of the iperf3 client while its server is not listening yet: the
# server is started in the background and a fixed sleep would cost TDF x its
# length in real time.
IPERF_CONNECT_TRIES = 20
IPERF_CONNECT_WAIT_S = 0.1
# What Mininet prints before its pings (pingall and its kin, mn --test pingall).
PING_HEADER = "*** Ping: testing ping reachability"


@dataclass(frozen=True)
class PingAll:
    """One ping per ordered host pair, as Mininet's pingall sends them."""

    pairs: list[tuple[str, str, bool]]      # (src, dst, answered), in sending order
    # Each answered ping's round trip in the guest's (virtual) ms, when asked
    # for (Session.pingall(full=True): Mininet's pingAllFull).
    rtt_ms: dict[tuple[str, str], float] = field(default_factory=dict)

    @property
    def sent(self) -> int:
        return len(self.pairs)

    @property
    def received(self) -> int:
        return sum(1 for _, _, ok in self.pairs if ok)

    @property
    def dropped_percent(self) -> float:
        return 100.0 * (self.sent - self.received) / self.sent if self.sent else 0.0

    def results_line(self) -> str:
        """Mininet's summary line (its %i truncates: 1 of 3 dropped is 33%)."""
        if not self.sent:
            return "*** Warning: No packets sent"
        return (f"*** Results: {int(self.dropped_percent)}% dropped "
                f"({self.received}/{self.sent} received)")

    def lines(self) -> list[str]:
        """Mininet's per-host lines: `h1 -> h2 h3`, X for a ping not answered."""
        order: list[str] = []
        seen: dict[str, list[str]] = {}
        for src, dst, ok in self.pairs:
            if src not in seen:
                order.append(src)
                seen[src] = []
            seen[src].append(dst if ok else "X")
        return [f"{src} -> {' '.join(seen[src])}" for src in order]

    def full_lines(self) -> list[str]:
        """Mininet's pingAllFull results: each pair's sent/received and
        round trip, one ping each (so min, avg and max are that ping's, mdev
        0), 0.000 for a ping not answered; in the guests' virtual ms."""
        lines = ["*** Results: "]
        for src, dst, ok in self.pairs:
            rtt = self.rtt_ms.get((src, dst), 0.0) if ok else 0.0
            lines.append(f" {src}->{dst}: 1/{int(ok)}, rtt min/avg/max/mdev "
                         f"{rtt:.3f}/{rtt:.3f}/{rtt:.3f}/0.000 ms")
        return lines


# Real seconds a node command followed as it comes is given, after Ctrl-C
# sent it SIGINT, to print its last words and end.
INTERRUPT_GRACE_S = 5.0


class Session:
    """Mininet-style operations on a deployed, running Experiment."""

    def __init__(self, exp: Experiment, runner: Runner | None = None) -> None:
        self.exp = exp
        self.runner = runner or Runner()      # `sh` in Dom0

    # -- names ---------------------------------------------------------------------

    @property
    def nodes(self) -> list[str]:
        return sorted(self.exp.topology.nodes)

    def node(self, name: str) -> str:
        """`name` if the experiment has that node; else a one-line ScenarioError."""
        self.exp[name]      # raises, naming the nodes there are
        return name

    def ip(self, name: str) -> str | None:
        return self.exp[name].IP()

    def substitute(self, command: str) -> str:
        """Every word that is a node's name replaced by that node's first IP
        address, as mn does (`h1 ping h2` pings h2's address); words that are
        not node names, and nodes without an address, are left as they are."""
        topo = self.exp.topology

        def one(match: re.Match[str]) -> str:
            word = match.group(0)
            if word in topo.nodes:
                return self.exp[word].IP() or word
            return word

        return re.sub(r"\S+", one, command)

    # -- commands ------------------------------------------------------------------

    def _running(self, what: str) -> None:
        if self.exp.paused:
            raise ScenarioError(f"{what}: the experiment is paused (resume first)")

    def put(self, node: str, src: str, dest: str) -> Transfer:
        """A local file into `node` (Experiment.put)."""
        self.node(node)
        self._running(f"cp to {node}")
        return self.exp.put(node, src, dest)

    def get(self, node: str, src: str, dest: str) -> Transfer:
        """A file of `node` out to a local path (Experiment.get)."""
        self.node(node)
        self._running(f"cp from {node}")
        return self.exp.get(node, src, dest)

    def cmd(self, node: str, command: str, timeout: float | None = None,
            on_output: OutputFollower | None = None) -> CommandResult:
        """Run `command` (node names substituted) in `node`'s guest and wait
        (`timeout` virtual seconds, by default the experiment's). Ctrl-C
        while waiting kills the command in the guest (as mn sends SIGINT to
        the node's shell), then goes on as KeyboardInterrupt. `on_output`
        gets (stream, bytes) as the output comes (0: stdout, 1: stderr), on
        a thread of its own, all of it before cmd returns."""
        self.node(node)
        self._running(node)
        if timeout is None:
            timeout = self.exp.command_timeout      # as exp.cmd (None there: no limit)
        # Shown here, not also by the run's show_output (selena run --follow).
        handle = self.exp.start(node, self.substitute(command), timeout=timeout,
                                show=on_output is None)
        with relayed(handle, on_output):
            try:
                return self.exp.wait(handle)
            except KeyboardInterrupt as interrupt:
                self.exp.kill(handle, signal.SIGINT)
                if on_output is not None and not isinstance(interrupt, SignalInterrupt):
                    # Its last words shown (a ping's statistics), as mn shows them.
                    handle.wait_done(INTERRUPT_GRACE_S)
                raise

    def sh(self, command: str) -> RunResult:
        """A shell command in Dom0 (mn's `sh`), through the runner; its exit
        status is in the result, not raised."""
        return self.runner.run(["sh", "-c", command], check=False, timeout=None)

    def namespace(self) -> dict[str, object]:
        """What `py EXPR` sees, as in mn: the experiment (`exp`, also `net`),
        this session, and every node by its name."""
        names: dict[str, object] = {n: self.exp[n] for n in self.nodes if n.isidentifier()}
        return {**names, "exp": self.exp, "net": self.exp, "session": self}

    # -- what the network looks like (mn's net, links, dump) -----------------------

    def _intf(self, node: str, index: int) -> str:
        return f"{node}-{self.exp.topology.nodes[node].device(index)}"

    def net_lines(self) -> list[str]:
        """mn's `net`: each node with its interfaces and what they reach."""
        topo = self.exp.topology
        peers: dict[tuple[str, int], list[str]] = {}
        for link in topo.links:
            peers.setdefault((link.a.node, link.a.iface), []).append(
                self._intf(link.b.node, link.b.iface))
            peers.setdefault((link.b.node, link.b.iface), []).append(
                self._intf(link.a.node, link.a.iface))
        for hub in topo.hubs:
            for e in hub.endpoints:
                peers.setdefault((e.node, e.iface), []).append(hub.name)
        lines = []
        for name in self.nodes:
            node = topo.nodes[name]
            ends = [f"{self._intf(name, i.index)}:{','.join(peers.get((name, i.index), []))}"
                    for i in sorted(node.interfaces, key=lambda i: i.index)]
            lines.append(" ".join([name, *ends]))
        return lines

    def intfs_lines(self) -> list[str]:
        """mn's `intfs`: each node and its interfaces."""
        topo = self.exp.topology
        return [f"{name}: " + " ".join(self._intf(name, i.index) for i in
                                      sorted(topo.nodes[name].interfaces, key=lambda i: i.index))
                for name in self.nodes]

    def ports_lines(self) -> list[str]:
        """mn's `ports`: each switch's bridge ports with their OpenFlow port
        numbers (interface index + 1, as selena.openflow numbers them; an
        interface with an address is the switch's own, not a port)."""
        topo = self.exp.topology
        return [f"{name} " + " ".join(f"{self._intf(name, i.index)}:{i.index + 1}" for i in
                                      sorted(topo.nodes[name].interfaces, key=lambda i: i.index)
                                      if not i.addresses())
                for name in self.nodes if topo.nodes[name].kind is NodeKind.SWITCH]

    def dpctl(self, args: str) -> list[tuple[str, CommandResult]]:
        """mn's `dpctl`: `ovs-ofctl ARGS br0` in every switch's guest, one
        after another (node names are not substituted: they are ovs-ofctl's
        words). The bridges speak OpenFlow 1.0 and 1.3 (`-O OpenFlow13` in
        ARGS for 1.3)."""
        self._running("dpctl")
        topo = self.exp.topology
        switches = [n for n in self.nodes if topo.nodes[n].kind is NodeKind.SWITCH]
        if not switches:
            raise ScenarioError("dpctl: the experiment has no switches")
        command = f"ovs-ofctl {args.strip()} {BRIDGE}"
        return [(name, self.exp.wait(self.exp.start(name, command,
                                                    timeout=PING_COMMAND_TIMEOUT_S)))
                for name in switches]

    def link_lines(self) -> list[str]:
        """mn's `links`, with the state as set here: (OK OK) or (DOWN DOWN)."""
        topo = self.exp.topology
        lines = []
        for i, link in enumerate(topo.links):
            state = "DOWN" if i in self.exp.links_down else "OK"
            lines.append(f"{self._intf(link.a.node, link.a.iface)}<->"
                         f"{self._intf(link.b.node, link.b.iface)} ({state} {state})")
        for hub in topo.hubs:
            lines.append(f"{hub.name}: " + " ".join(self._intf(e.node, e.iface)
                                                     for e in hub.endpoints))
        return lines

    def dump_lines(self) -> list[str]:
        """mn's `dump`: each node, its addresses and its Xen domain id."""
        topo = self.exp.topology
        domids = self.exp.domids
        lines = []
        for name in self.nodes:
            node = topo.nodes[name]
            addrs = ",".join(f"{self._intf(name, i.index)}:"
                             f"{'/'.join(a.split('/')[0] for a in i.addresses()) or 'None'}"
                             for i in sorted(node.interfaces, key=lambda i: i.index))
            lines.append(f"<{node.kind.value.capitalize()} {name}: {addrs} "
                         f"domid={domids.get(name, '?')} template={node.template}>")
        return lines

    def pingall(self, timeout: float = 1.0, hosts: Collection[str] | None = None,
                full: bool = False) -> PingAll:
        """Every host with an address (of `hosts` when given) pings every
        other one's first address once (busybox `ping -c 1 -W`, the wait in
        whole virtual seconds); `full`: with each answer's round trip, as
        the guest's ping measured it (Mininet's pingAllFull).
        Each host runs its pings in one command (one command per pair, one
        after another, took minutes for 40 hosts), at most
        PINGALL_SIDE_BY_SIDE hosts at a time, each starting with the host
        after it (Mininet pings one pair at a time): 40 hosts starting at
        once, all with the same first target, lost 3 of 1560 pings in the
        lab at TDF 20 and all of them at TDF 1, while single pings through
        the same switch answered."""
        self._running("pingall")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) \
                or not 0 <= timeout < math.inf:
            raise ScenarioError(f"pingall: timeout {timeout!r}: want a finite number of "
                                "seconds, 0 or more")
        wait = max(1, math.ceil(timeout))
        addressed = [(h.name, ip) for h in self.exp.hosts
                     if (ip := h.IP()) and (hosts is None or h.name in hosts)]
        loops = []
        for n, (src, _) in enumerate(addressed):
            targets = [(dst, ip) for dst, ip in addressed if dst != src]
            if targets:
                after = addressed[n + 1:] + addressed[:n]
                loops.append((src, targets, " ".join(ip for _, ip in after)))
        pairs: list[tuple[str, str, bool]] = []
        rtts: dict[tuple[str, str], float] = {}
        running: deque[tuple[str, list[tuple[str, str]], Any]] = deque()
        if full:
            # The average of "min/avg/max = a/b/c ms" (busybox; iputils adds mdev).
            ping = (f"if out=$(ping -c 1 -W {wait} $ip 2>&1); then echo \"$ip 1 $(echo \"$out\" "
                    "| sed -n 's|.*= [0-9.]*/\\([0-9.]*\\)/.*|\\1|p')\"; ")
        else:
            ping = f"if ping -c 1 -W {wait} $ip >/dev/null 2>&1; then echo \"$ip 1\"; "
        for src, targets, ips in loops:
            if len(running) == PINGALL_SIDE_BY_SIDE:
                self._ping_loop_pairs(*running.popleft(), pairs, rtts)
            script = f"for ip in {ips}; do {ping}else echo \"$ip 0\"; fi; done"
            running.append((src, targets, self.exp.start(
                src, script, timeout=PING_COMMAND_TIMEOUT_S * len(targets))))
        while running:
            self._ping_loop_pairs(*running.popleft(), pairs, rtts)
        return PingAll(pairs, rtts)

    def _ping_loop_pairs(self, src: str, targets: list[tuple[str, str]], handle: Any,
                         pairs: list[tuple[str, str, bool]],
                         rtts: dict[tuple[str, str], float]) -> None:
        """One host's loop's answers, added to `pairs` (and `rtts`): per
        line `IP 1 [RTT]` or `IP 0`."""
        result = self.exp.wait(handle)
        answered: dict[str, tuple[bool, float | None]] = {}
        for line in result.stdout.decode(errors="replace").splitlines():
            words = line.split()
            if len(words) >= 2:
                answered[words[0]] = (words[1] == "1", _number(words[2:]))
        for dst, ip in targets:
            ok, rtt = answered.get(ip, (False, None))
            pairs.append((src, dst, ok))
            if ok and rtt is not None:
                rtts[(src, dst)] = rtt

    def iperf(self, client: str, server: str, seconds: float = 5.0) -> tuple[str, str]:
        """TCP throughput from `client` to `server` with iperf3, as Mininet's
        iperf returns it: (what the server received, what the client sent),
        e.g. ('9.41 Mbits/sec', '9.87 Mbits/sec'). The guests need iperf3
        (the tools-host template; tiny-host has none): a one-line
        ScenarioError says so."""
        received, sent = self.iperf_bps(client, server, seconds)
        return rate_text(received), rate_text(sent)

    def iperf_udp(self, client: str, server: str, bandwidth: str | float = "10M",
                  seconds: float = 5.0) -> tuple[str, str, str]:
        """UDP from `client` to `server` at `bandwidth` (iperf's -b: "10M", or
        bit/s; in the guests' virtual time, as every rate of a dilated run),
        as Mininet's iperf(l4Type='UDP') returns it: (the bandwidth asked,
        what the server received, what the client sent)."""
        received, sent = self.iperf_bps(client, server, seconds, udp_bps=udp_rate(bandwidth))
        return str(bandwidth), rate_text(received), rate_text(sent)

    def iperf_bps(self, client: str, server: str, seconds: float = 5.0,
                  udp_bps: float | None = None) -> tuple[float, float]:
        """iperf() as numbers: bits per second received by the server and
        sent by the client; UDP at `udp_bps` when given (else TCP)."""
        for name in (client, server):
            self.node(name)
        self._running("iperf")
        if client == server:
            raise ScenarioError(f"iperf: give two different hosts, not {client} twice")
        ip = self.exp[server].IP()
        if not ip:
            raise ScenarioError(f"iperf: {server} has no IP address to connect to")
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) \
                or not 0 < seconds < math.inf:
            raise ScenarioError(f"iperf: {seconds!r} seconds: want a finite number above zero")
        if udp_bps is not None:
            udp_rate(udp_bps)       # iperf3 takes -b 0 for "no limit": a flood
        for name in (client, server):
            if not self.exp.cmd(name, "command -v iperf3", timeout=PING_COMMAND_TIMEOUT_S).ok:
                template = self.exp.topology.nodes[name].template
                raise ScenarioError(f"iperf: {name} has no iperf3 (template {template}; "
                                    "the tools-host template has it)")
        budget = seconds + IPERF_SLACK_S
        srv = self.exp.start(server, ["iperf3", "-s", "-1", "-J"], timeout=budget)
        try:
            report = self._iperf_client(client, ip, seconds, budget, udp_bps)
        except BaseException:
            self.exp.kill(srv)
            raise
        self.exp.wait(srv)
        end = report.get("end", {})
        try:
            received = end["sum_received"]["bits_per_second"]
            sent = end["sum_sent"]["bits_per_second"]
        except (KeyError, TypeError):
            raise ScenarioError(f"iperf: {client}'s iperf3 report has no totals") from None
        return float(received), float(sent)

    def _iperf_client(self, client: str, ip: str, seconds: float,
                      budget: float, udp_bps: float | None = None) -> dict:
        argv = ["iperf3", "-c", ip, "-t", f"{seconds:g}", "-J"]
        if udp_bps is not None:
            argv += ["-u", "-b", f"{udp_bps:.0f}"]
        for _ in range(IPERF_CONNECT_TRIES):
            result = self.exp.cmd(client, argv, timeout=budget)
            report = _json(result.stdout)
            error = str(report.get("error", "")) if report is not None else ""
            # iperf3 3.12 with -J exits 0 on an error too (a refused connection
            # among them): the report's error decides, not the exit status.
            if result.ok and report is not None and not error:
                return report
            if "refused" not in error:
                why = error or result.summary()
                raise ScenarioError(f"iperf: {client} -> {ip} failed: {why}")
            self.exp.sleep(IPERF_CONNECT_WAIT_S)      # the server is not listening yet
        raise ScenarioError(f"iperf: the iperf3 server on {ip} never listened")

    # -- the network ---------------------------------------------------------------

    def static_arp(self) -> int:
        """Every host a permanent ARP entry for every other host's first
        IPv4 address (Mininet's staticArp on a started net; before a run
        Topology.static_arp_between_hosts sets them at boot): iproute2's `ip
        neigh replace` where the guest has it, busybox's `arp -s` where not
        (tiny-host). One command per host, side by side; how many entries."""
        self._running("staticArp")
        topo = self.exp.topology
        by_host: dict[str, list[tuple[str, str]]] = {}
        for host, ip, mac in topo.arp_entries_between_hosts():
            by_host.setdefault(host, []).append((ip, mac))
        started = []
        for host, entries in by_host.items():
            dev = topo.nodes[host].device(0)
            script = "; ".join(f"{{ ip neigh replace {ip} lladdr {mac} dev {dev} nud permanent "
                               f"2>/dev/null || arp -s {ip} {mac}; }}" for ip, mac in entries)
            started.append((host, self.exp.start(host, f"set -e; {script}",
                                                 timeout=PING_COMMAND_TIMEOUT_S)))
        failed = [f"{host} ({result.summary()})" for host, handle in started
                  if not (result := self.exp.wait(handle)).ok]
        if failed:
            raise ScenarioError(f"staticArp: could not set the ARP entries of "
                                f"{', '.join(failed)}")
        return sum(len(entries) for entries in by_host.values())

    def link(self, a: str, b: str, up: bool) -> None:
        """Take the link(s) between nodes `a` and `b` down or bring them up
        (exp.link(a, b): a one-line error for unknown nodes or no link)."""
        handle = self.exp.link(a, b)
        handle.up() if up else handle.down()

    def set_link(self, a: str, b: str, **values: object) -> None:
        """New rate, delay, jitter, loss or queue for the link(s) between `a`
        and `b` (exp.link(a, b).set), in virtual terms."""
        self.exp.link(a, b).set(**values)

    def node_change(self, name: str, change: str) -> int | None:
        """`crash` (the guest destroyed, as a power failure) or `restart`
        (booted again as deployed; returns its new domain id)."""
        if change == "crash":
            self.exp.crash(name)
            return None
        return self.exp.restart(name)

    def set_cpu_share(self, name: str, share: float | None) -> None:
        """Cap node `name` at `share` of the host's CPUs per virtual second
        (None: no cap), Experiment.set_cpu_share."""
        self.exp.set_cpu_share(name, share)

    # -- time ----------------------------------------------------------------------

    def tdf(self, tdf: float | str) -> float:
        """Change the TDF of the running experiment (Experiment.set_tdf)."""
        self.exp.set_tdf(tdf)
        return self.exp.tdf

    def pause(self) -> float:
        """Freeze the experiment's virtual time; returns it (virtual seconds)."""
        return self.exp.pause()

    def resume(self) -> float:
        return self.exp.resume()


def udp_rate(bandwidth: object, what: str = "iperf") -> float:
    """A UDP iperf's bandwidth in bit/s: iperf's "10M" (decimal, as iperf3
    reads -b), selena's "10Mbit", or a number of bit/s; above zero and
    finite (iperf3's -b 0 is no limit at all)."""
    try:
        bps = units.rate_bps(bandwidth) if isinstance(bandwidth, str | int | float) \
            else math.nan
    except UnitError:
        bps = math.nan
    if not 0 < bps < math.inf:
        raise ScenarioError(f"{what}: UDP bandwidth {bandwidth!r}: want a rate above zero "
                            "such as 10M (bit/s)")
    return bps


def rate_text(bits_per_second: float) -> str:
    """iperf's own way of writing a rate (Mininet shows iperf's strings)."""
    for unit, scale in (("Gbits/sec", 1e9), ("Mbits/sec", 1e6), ("Kbits/sec", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:.2f} {unit}"
    return f"{bits_per_second:.0f} bits/sec"


def _number(words: list[str]) -> float | None:
    """The first word as a finite number, else None (a ping's output that
    had no round trip in it)."""
    try:
        value = float(words[0]) if words else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _json(data: bytes) -> dict | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


__all__ = ["PingAll", "Session", "rate_text"]
