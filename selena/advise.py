"""Predict the TDF a scenario needs on this host, before running it.

`selena calibrate` measures the host's emulation floor once: two tools hosts
on one shaped link (htb and netem in Dom0, as every shaped link has; a
10 ms delay and a rate that never limits a ping), ping's extra round trip
over the configured one at TDF 1 and at TDF 5, and TCP's throughput at TDF 1
(the ceiling of one vif pair in real time). The extra round trip has two
parts, fitted from the two TDFs:

    extra(TDF) = real_ms / TDF + virtual_ms

real_ms is processing that takes real time (Dom0's bridges and netback, the
emulated CPUs): dilation divides it. virtual_ms is what the guests spend in
their own, dilated time (timer and scheduling granularity): dilation cannot
shrink it. `selena advise SCENARIO` reads the topology: the smallest
configured round trip between two hosts (twice the one-way delays along the
path with the least delay, each link on it adding one floor) and the
busiest link; it prints the smallest TDF that keeps both within the asked
accuracy, with the predicted error and what a virtual second costs.

The prediction aims at half the accuracy asked (HEADROOM): in the lab what
is left of the floor at a given TDF varied by a factor of two between runs
(1.3 and 2.7 ms at TDF 10), and advice that is right only on average would
put every other run outside the accuracy.
"""

from __future__ import annotations

import heapq
import json
import math
import socket
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from selena.errors import AnalysisError
from selena.metrics import iperf3_interval_mbit, ping_rtts_ms
from selena.model import NodeKind, Topology
from selena.paths import cache_dir

CALIBRATION_VERSION = 1
HIGH_TDF = 5.0             # the second TDF calibrate measures the round trip at
CALIBRATION_DELAY_MS = 10.0
CALIBRATION_RATE = "1Gbit"   # shaped (htb present) but never limiting a ping
HEADROOM = 0.5             # the share of the accuracy a prediction may use
# TCP payload per full Ethernet frame (1448 of 1514 bytes): the ceiling is
# stated in link rate, which counts frames.
TCP_SHARE = 1448 / 1514


class CalibrationError(AnalysisError):
    """A calibration file that is missing, unreadable or from another version."""


@dataclass
class Calibration:
    real_ms: float           # extra round trip per link, in real time
    virtual_ms: float        # extra round trip per link, in the guests' time
    ceiling_mbit: float      # link rate one vif pair carries in real time
    rtt_tdf1_ms: list[float]
    rtt_high_ms: list[float]
    tcp_mbit: list[float]
    host: str = ""
    measured_at: str = ""
    high_tdf: float = HIGH_TDF
    version: int = CALIBRATION_VERSION

    def describe(self) -> str:
        return (f"calibration of {self.host or 'this host'} ({self.measured_at}): each link "
                f"adds {self.real_ms:.2f} ms of real time / TDF + {self.virtual_ms:.2f} ms "
                f"of virtual time to a round trip; one vif pair carries "
                f"{self.ceiling_mbit:.1f} Mbit/s in real time")

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise CalibrationError(f"{path}: no calibration here (run `selena calibrate` "
                                   "first)") from None
        except (OSError, ValueError) as exc:
            raise CalibrationError(f"{path}: unreadable calibration: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != CALIBRATION_VERSION:
            raise CalibrationError(f"{path}: not a version {CALIBRATION_VERSION} calibration "
                                   "(run `selena calibrate` again)")
        try:
            return cls(**data)
        except TypeError as exc:
            raise CalibrationError(f"{path}: unreadable calibration: {exc}") from None


def fit(rtt_tdf1_ms: Sequence[float], rtt_high_ms: Sequence[float],
        tcp_mbit: Sequence[float], *, high_tdf: float = HIGH_TDF, host: str = "",
        configured_rtt_ms: float = 0.0) -> Calibration:
    """The two-part floor from the medians at TDF 1 and at `high_tdf`, and the
    ceiling (in link rate) from TCP's median at TDF 1."""
    for name, samples in (("RTT at TDF 1", rtt_tdf1_ms), (f"RTT at TDF {high_tdf:g}",
                          rtt_high_ms), ("TCP at TDF 1", tcp_mbit)):
        if not samples:
            raise CalibrationError(f"calibration: no samples of {name}")
    if high_tdf <= 1:
        raise CalibrationError(f"calibration: the second TDF must be above 1, got {high_tdf}")
    extra1 = max(0.0, statistics.median(rtt_tdf1_ms) - configured_rtt_ms)
    extra_high = max(0.0, statistics.median(rtt_high_ms) - configured_rtt_ms)
    # extra1 = real + virtual; extra_high = real / high + virtual.
    real = max(0.0, (extra1 - extra_high) * high_tdf / (high_tdf - 1))
    virtual = max(0.0, extra1 - real)
    return Calibration(real_ms=real, virtual_ms=virtual,
                       ceiling_mbit=statistics.median(tcp_mbit) / TCP_SHARE,
                       rtt_tdf1_ms=list(rtt_tdf1_ms), rtt_high_ms=list(rtt_high_ms),
                       tcp_mbit=list(tcp_mbit), host=host,
                       measured_at=time.strftime("%Y-%m-%d %H:%M:%S"), high_tdf=high_tdf)


@dataclass
class HostPath:
    """The least-delay path between two hosts."""
    a: str
    b: str
    rtt_ms: float
    links: int


@dataclass
class Advice:
    tdf: float | None          # None: no TDF reaches the accuracy on this host
    accuracy_pct: float
    path: HostPath | None
    busiest: tuple[str, float] | None     # (link, Mbit/s)
    rtt_tdf: float
    rate_tdf: float
    predicted_rtt_error_pct: float | None
    load_share: float | None
    reasons: list[str]

    def report(self) -> str:
        lines = list(self.reasons)
        if self.tdf is None:
            lines.append(f"advice: no TDF keeps the round trip within {self.accuracy_pct:g}% "
                         "on this host (see above)")
            return "\n".join(lines)
        parts = []
        if self.predicted_rtt_error_pct is not None:
            parts.append(f"predicted round-trip error +{self.predicted_rtt_error_pct:.1f}%")
        if self.load_share is not None:
            parts.append(f"busiest link at {100 * self.load_share:.0f}% of the ceiling")
        detail = f" ({', '.join(parts)})" if parts else ""
        lines.append(f"advice: TDF {self.tdf:g}{detail}; each virtual second costs "
                     f"{self.tdf:g} s of real time")
        return "\n".join(lines)


def least_delay_path(topology: Topology) -> HostPath | None:
    """The host pair with the smallest non-zero configured round trip, over the
    path with the least one-way delay (links and hubs; hubs add none)."""
    graph: dict[str, list[tuple[str, float]]] = {name: [] for name in topology.nodes}
    for link in topology.links:
        graph[link.a.node].append((link.b.node, link.delay_s))
        graph[link.b.node].append((link.a.node, link.delay_s))
    for hub in topology.hubs:
        members = [e.node for e in hub.endpoints]
        for m in members:
            graph[m] += [(o, 0.0) for o in members if o != m]
    hosts = sorted(n for n, node in topology.nodes.items() if node.kind is NodeKind.HOST)
    best: HostPath | None = None
    for source in hosts:
        # Dijkstra by delay; ties broken by fewer links.
        done: dict[str, tuple[float, int]] = {}
        queue: list[tuple[float, int, str]] = [(0.0, 0, source)]
        while queue:
            delay, links, node = heapq.heappop(queue)
            if node in done:
                continue
            done[node] = (delay, links)
            for peer, d in graph[node]:
                if peer not in done:
                    heapq.heappush(queue, (delay + d, links + 1, peer))
        for target in hosts:
            if target <= source or target not in done:
                continue
            delay, links = done[target]
            rtt_ms = 2000 * delay
            if rtt_ms > 0 and (best is None or rtt_ms < best.rtt_ms):
                best = HostPath(source, target, rtt_ms, links)
    return best


def busiest_link(topology: Topology) -> tuple[str, float] | None:
    rated = [(str(link), link.rate_bps / 1e6) for link in topology.links if link.rate_bps]
    return max(rated, key=lambda item: item[1]) if rated else None


def advise(topology: Topology, calibration: Calibration, accuracy_pct: float = 5.0,
           headroom: float = HEADROOM) -> Advice:
    if not 0 < headroom <= 1:
        raise AnalysisError(f"headroom {headroom:g}: want a share above 0, at most 1")
    if not 0 < accuracy_pct < 100:
        raise AnalysisError(f"accuracy {accuracy_pct:g}%: want a percentage above 0 and "
                            "below 100")
    reasons = [calibration.describe()]
    path, busiest = least_delay_path(topology), busiest_link(topology)
    rtt_tdf = rate_tdf = 1.0
    reachable = True
    if path is not None:
        allowed = headroom * accuracy_pct / 100 * path.rtt_ms
        fixed = calibration.virtual_ms * path.links
        scaled = calibration.real_ms * path.links
        if fixed >= allowed:
            reachable = False
            reasons.append(f"smallest round trip {path.a} <-> {path.b}: {path.rtt_ms:g} ms over "
                           f"{path.links} link(s); {fixed:.2f} ms of the extra round trip is "
                           f"in virtual time, more than {headroom * accuracy_pct:g}% of it "
                           "(half the accuracy, for headroom) at any TDF")
        else:
            rtt_tdf = max(1.0, scaled / (allowed - fixed))
            reasons.append(f"smallest round trip {path.a} <-> {path.b}: {path.rtt_ms:g} ms over "
                           f"{path.links} link(s): TDF >= {rtt_tdf:.2f} for "
                           f"{headroom * accuracy_pct:g}% ({accuracy_pct:g}% with headroom)")
    else:
        reasons.append("no configured delay between hosts: the round trip sets no TDF")
    if busiest is not None:
        # Keep the busiest link's real rate within the accuracy's share below
        # the ceiling, where TCP in the lab still reached the link rate.
        usable = calibration.ceiling_mbit * (1 - accuracy_pct / 100)
        rate_tdf = max(1.0, busiest[1] / usable)
        reasons.append(f"busiest {busiest[0]}: {busiest[1]:g} Mbit/s: "
                       f"TDF >= {rate_tdf:.2f}")
    if not reachable:
        return Advice(None, accuracy_pct, path, busiest, math.inf, rate_tdf, None, None,
                      reasons)
    tdf = float(math.ceil(max(rtt_tdf, rate_tdf) - 1e-9))
    error = None
    if path is not None:
        extra = path.links * (calibration.real_ms / tdf + calibration.virtual_ms)
        error = 100 * extra / path.rtt_ms
    share = busiest[1] / tdf / calibration.ceiling_mbit if busiest is not None else None
    return Advice(tdf, accuracy_pct, path, busiest, rtt_tdf, rate_tdf, error, share, reasons)


def calibration_topology() -> Topology:
    """Two tools hosts on one shaped link whose delay is known and whose rate
    never limits a ping: what a round trip gains over it is the emulation's."""
    topology = Topology("calibrate", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, rate=CALIBRATION_RATE, delay=f"{CALIBRATION_DELAY_MS:g}ms")
    return topology


def measure(exp: Any, *, pings: int = 30, iperf_seconds: int = 5,
            high_tdf: float = HIGH_TDF) -> Calibration:
    """Run the calibration in a deployed calibration_topology() experiment at
    TDF 1 (`exp`: a started selena.Experiment); leaves it at `high_tdf`."""
    def rtts() -> list[float]:
        return ping_rtts_ms(exp.cmd("h1", f"ping -c {pings} -i 0.2 -W 5 10.0.0.2",
                                    check=True).stdout)

    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")                 # ARP, warm caches
    low = rtts()
    server = exp.start("h2", ["iperf3", "-s", "-1"])
    exp.sleep(1)
    client = exp.cmd("h1", ["iperf3", "-c", "10.0.0.2", "-R", "-t", str(iperf_seconds),
                            "-O", "1", "-J"], check=True, timeout=iperf_seconds + 60)
    exp.wait(server)
    tcp = iperf3_interval_mbit(client.stdout)
    exp.set_tdf(high_tdf)
    high = rtts()
    return fit(low, high, tcp, high_tdf=high_tdf, host=socket.gethostname(),
               configured_rtt_ms=2 * CALIBRATION_DELAY_MS)


def default_calibration_path() -> Path:
    return cache_dir() / f"calibration-{socket.gethostname()}.json"
