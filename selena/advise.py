"""Predict the TDF a scenario needs on this host, before running it.

`selena calibrate` measures the host's emulation floor once: two tools hosts
on one shaped link (htb and netem in Dom0, as every shaped link has; a
10 ms delay and a rate that never limits a ping), ping's extra round trip
over the configured one at TDF 1 with several idle gaps between pings, at
TDF 5, and TCP's throughput at TDF 1 (the ceiling of one vif pair in real
time).

What a round trip gains is processing that takes real time (Dom0's bridges
and netback, the emulated CPUs), so dilation divides it; but in the lab it
also grows with the real idle time before each packet (an emulated vCPU
that slept longer takes longer to wake), and dilation lengthens that idle
time. Both ends idle: the receiver of a request for the interval between
packets, the sender of it for the round trip until the reply comes back.
So the model is, per link, for a TDF, a virtual interval between packets
and the path's configured round trip:

    extra(TDF, interval, rtt) = (wake(interval x TDF) + reply(rtt, TDF)) / TDF
                                + virtual_ms
    wake(gap) = wake_ms + per_decade_ms x log10(gap / 1 s)      (real ms)
    reply(rtt, TDF) = per_decade_ms x log10(rtt x TDF / max(rtt, 20 ms))

wake is fitted from the TDF 1 pings at each gap; reply is what dilation
adds to the sender's wait (TDF times the round trip in real time) at the
same cost per tenfold, nothing at TDF 1 (where the lab's 80 ms round trips
measured no more than the calibration's 20 ms ones predicted), never
negative; virtual_ms is what TDF 5 measured beyond the prediction (a part
in the guests' own time that dilation cannot shrink; zero when wake
explains it all). Without the reply term the lab's 80 ms round trips at
TDF 5 and 6 measured 1.3 to 1.7 times the prediction (two calibrations and
six runs in one boot, 2026-11-27). `selena advise
SCENARIO --interval S` reads the topology: the smallest configured round
trip between two hosts (twice the one-way delays along the path with the
least delay, each link on it adding one floor) and the busiest link; it
prints the smallest TDF that keeps both (and the busiest node: the sum of
what its links carry) within the asked accuracy, with the predicted error,
what a virtual second costs and, given the scenario's length, what the run
will.

The prediction aims at a third of the accuracy asked (HEADROOM): the floor
varies between boots and from minute to minute, and advice that is right
only on average would put every other run outside the accuracy. With half,
one of 24 first runs in the lab at the advised TDF (6) measured +5.9 %
against +2.4 % predicted and a 5 % accuracy, its floor 2.5 times the one
the calibration had measured minutes before; a third holds up to three
times (docs/fidelity.md).
"""

from __future__ import annotations

import heapq
import json
import math
import socket
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from selena.errors import AnalysisError
from selena.metrics import IPERF3_PORT, iperf3_interval_mbit, ping_rtts_ms
from selena.model import NodeKind, Topology
from selena.paths import cache_dir

CALIBRATION_VERSION = 2
HIGH_TDF = 5.0             # the second TDF calibrate measures the round trip at
HIGH_INTERVAL_S = 0.2      # virtual seconds between pings there (1 s of real idle time)
# Real seconds between pings at TDF 1, and how many pings at each.
GAPS_S = {0.05: 30, 0.2: 30, 1.0: 30}
CALIBRATION_DELAY_MS = 10.0
CALIBRATION_RATE = "1Gbit"   # shaped (htb present) but never limiting a ping
HEADROOM = 1 / 3           # the share of the accuracy a prediction may use
DEFAULT_INTERVAL_S = 1.0   # ping's own default interval
MAX_TDF = 1000
# TCP payload per full Ethernet frame (1448 of 1514 bytes): the ceiling is
# stated in link rate, which counts frames.
TCP_SHARE = 1448 / 1514


class CalibrationError(AnalysisError):
    """A calibration file that is missing, unreadable or from another version."""


@dataclass
class Calibration:
    wake_ms: float           # extra round trip per link after 1 s of real idle time
    per_decade_ms: float     # ... and how much more per tenfold longer idle time
    virtual_ms: float        # extra round trip per link in the guests' own time
    ceiling_mbit: float      # link rate one vif pair carries in real time
    rtt_by_gap_ms: dict[str, list[float]]     # real gap (s) -> round trips at TDF 1
    rtt_high_ms: list[float]
    tcp_mbit: list[float]
    min_gap_s: float = min(GAPS_S)
    host: str = ""
    measured_at: str = ""
    high_tdf: float = HIGH_TDF
    high_interval_s: float = HIGH_INTERVAL_S
    # The calibration link's configured round trip (ms): how long its pings'
    # senders waited for each reply. 0 in files that predate it: no reply term.
    rtt_ms: float = 0.0
    version: int = CALIBRATION_VERSION

    def wake_real_ms(self, gap_s: float) -> float:
        """Extra round trip per link, in real ms, after `gap_s` real seconds
        idle (shorter gaps than calibrated are taken as the shortest)."""
        gap = max(gap_s, self.min_gap_s)
        return max(0.0, self.wake_ms + self.per_decade_ms * math.log10(gap))

    def reply_real_ms(self, rtt_ms: float, tdf: float) -> float:
        """What the sender's wait for its reply adds, in real ms, on a path
        of `rtt_ms` at `tdf`: the wait is `tdf` times the path's round trip
        in real time, and each tenfold of it beyond what the same path waits
        at TDF 1 (never less than the calibration's own round trip) costs
        the fitted wake per tenfold. At TDF 1 nothing: the lab's TDF 1 runs
        over 80 ms measured no more than the calibration's 20 ms predicted."""
        if self.rtt_ms <= 0 or rtt_ms <= 0:
            return 0.0
        base = max(rtt_ms, self.rtt_ms)
        return max(0.0, self.per_decade_ms) * math.log10(max(rtt_ms * tdf, base) / base)

    def extra_ms(self, tdf: float, interval_s: float, rtt_ms: float = 0.0) -> float:
        """Extra round trip per link in virtual ms at `tdf`, packets
        `interval_s` virtual seconds apart, on a path whose configured round
        trip is `rtt_ms` (0: no reply term)."""
        real = self.wake_real_ms(interval_s * tdf) + self.reply_real_ms(rtt_ms, tdf)
        return real / tdf + self.virtual_ms

    def describe(self) -> str:
        return (f"calibration of {self.host or 'this host'} ({self.measured_at}): each link "
                f"adds {self.wake_ms:.2f} ms of real time to a round trip after 1 s idle, "
                f"{self.per_decade_ms:+.2f} ms per tenfold idle time (and per tenfold "
                f"the TDF lengthens a wait for a reply), divided by the TDF, "
                f"+ {self.virtual_ms:.2f} ms of virtual time; one vif pair carries "
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
        except (OSError, ValueError, RecursionError) as exc:
            raise CalibrationError(f"{path}: unreadable calibration: {exc} (run `selena "
                                   "calibrate` again)") from None
        if not isinstance(data, dict) or data.get("version") != CALIBRATION_VERSION:
            raise CalibrationError(f"{path}: not a version {CALIBRATION_VERSION} calibration "
                                   "(run `selena calibrate` again)")
        problem = _malformed_field(data)
        if problem is not None:
            raise CalibrationError(f"{path}: {problem} (run `selena calibrate` again)")
        try:
            return cls(**data)
        except TypeError as exc:
            raise CalibrationError(f"{path}: unreadable calibration: {exc} (run `selena "
                                   "calibrate` again)") from None


_NUMBER_FIELDS = ("wake_ms", "per_decade_ms", "virtual_ms", "ceiling_mbit", "min_gap_s",
                  "high_tdf", "high_interval_s", "rtt_ms")


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value)


def _malformed_field(data: Mapping[str, Any]) -> str | None:
    """The first field of a calibration file whose value the predictions
    cannot use (a string, a NaN, a list where a number goes), named; None if
    every field present is sound. Missing fields are left to the constructor."""
    def shown(value: object) -> str:
        text = json.dumps(value)
        return text if len(text) <= 40 else text[:37] + "..."

    for name in _NUMBER_FIELDS:
        if name in data and not _finite(data[name]):
            return f"{name} is {shown(data[name])}, not a finite number"
    if "min_gap_s" in data and data["min_gap_s"] <= 0:
        return f"min_gap_s is {shown(data['min_gap_s'])}, not above 0"
    samples = {"rtt_high_ms": data.get("rtt_high_ms", []), "tcp_mbit": data.get("tcp_mbit", [])}
    gaps = data.get("rtt_by_gap_ms", {})
    if not isinstance(gaps, dict):
        return f"rtt_by_gap_ms is {shown(gaps)}, not an object of gap -> round trips"
    samples.update({f"rtt_by_gap_ms[{gap!r}]": values for gap, values in gaps.items()})
    for name, values in samples.items():
        if not isinstance(values, list) or not all(_finite(v) for v in values):
            return f"{name} is {shown(values)}, not a list of finite numbers"
    for name in ("host", "measured_at"):
        if name in data and not isinstance(data[name], str):
            return f"{name} is {shown(data[name])}, not a string"
    return None


def fit(rtt_by_gap_ms: Mapping[float, Sequence[float]], rtt_high_ms: Sequence[float],
        tcp_mbit: Sequence[float], *, high_tdf: float = HIGH_TDF,
        high_interval_s: float = HIGH_INTERVAL_S, host: str = "",
        configured_rtt_ms: float = 0.0) -> Calibration:
    """wake(gap) by least squares over the medians at TDF 1 against
    log10(gap); virtual_ms from what the median at `high_tdf` has beyond
    wake's prediction; the ceiling (in link rate) from TCP's median."""
    if not rtt_by_gap_ms:
        raise CalibrationError("calibration: no round trips at TDF 1")
    for name, samples in [*((f"RTT at TDF 1 after {g:g} s idle", v)
                            for g, v in rtt_by_gap_ms.items()),
                          (f"RTT at TDF {high_tdf:g}", rtt_high_ms), ("TCP at TDF 1", tcp_mbit)]:
        if not samples:
            raise CalibrationError(f"calibration: no samples of {name}")
    if high_tdf <= 1:
        raise CalibrationError(f"calibration: the second TDF must be above 1, got {high_tdf}")
    if any(g <= 0 for g in rtt_by_gap_ms):
        raise CalibrationError("calibration: idle gaps must be above 0 s")
    xs = [math.log10(g) for g in rtt_by_gap_ms]
    ys = [max(0.0, statistics.median(v) - configured_rtt_ms) for v in rtt_by_gap_ms.values()]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
             if spread > 0 else 0.0)
    cal = Calibration(wake_ms=mean_y - slope * mean_x, per_decade_ms=slope, virtual_ms=0.0,
                      ceiling_mbit=statistics.median(tcp_mbit) / TCP_SHARE,
                      rtt_by_gap_ms={f"{g:g}": list(v) for g, v in rtt_by_gap_ms.items()},
                      rtt_high_ms=list(rtt_high_ms), tcp_mbit=list(tcp_mbit),
                      min_gap_s=min(rtt_by_gap_ms), host=host,
                      measured_at=time.strftime("%Y-%m-%d %H:%M:%S"), high_tdf=high_tdf,
                      high_interval_s=high_interval_s, rtt_ms=configured_rtt_ms)
    extra_high = max(0.0, statistics.median(rtt_high_ms) - configured_rtt_ms)
    cal.virtual_ms = max(0.0, extra_high - cal.extra_ms(high_tdf, high_interval_s,
                                                        configured_rtt_ms))
    return cal


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
    busiest_node: tuple[str, float] | None = None     # (node, Mbit/s it carries)
    duration_s: float | None = None       # virtual seconds the scenario runs, if told

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
            parts.append(f"busiest link or node at {100 * self.load_share:.0f}% of the "
                         "ceiling")
        detail = f" ({', '.join(parts)})" if parts else ""
        lines.append(f"advice: TDF {self.tdf:g}{detail}; each virtual second costs "
                     f"{self.tdf:g} s of real time")
        if self.duration_s is not None:
            lines.append(f"a run of {self.duration_s:g} virtual s takes about "
                         f"{self.duration_s * self.tdf:g} s of real time at TDF {self.tdf:g} "
                         "(plus deploy and teardown)")
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
    rated = [(topology.describe(link), link.rate_bps / 1e6) for link in topology.links
             if link.rate_bps]
    return max(rated, key=lambda item: item[1]) if rated else None


def busiest_node(topology: Topology) -> tuple[str, float] | None:
    """The node carrying the most configured rate: a host sends and receives
    on each of its links, so its load is their sum; a switch forwards what
    enters it out of another link, so half the sum."""
    load: dict[str, float] = {}
    for link in topology.links:
        if link.rate_bps:
            for end in (link.a.node, link.b.node):
                load[end] = load.get(end, 0.0) + link.rate_bps / 1e6
    for name in load:
        if topology.nodes[name].kind is NodeKind.SWITCH:
            load[name] /= 2
    return max(sorted(load.items()), key=lambda item: item[1]) if load else None


def _share(headroom: float) -> str:
    """A headroom in words: "a third of", "half of", or "40% of"."""
    for words, share in (("half of", 1 / 2), ("a third of", 1 / 3), ("a quarter of", 1 / 4)):
        if math.isclose(headroom, share):
            return words
    return f"{100 * headroom:g}% of"


def advise(topology: Topology, calibration: Calibration, accuracy_pct: float = 5.0,
           headroom: float = HEADROOM, interval_s: float = DEFAULT_INTERVAL_S,
           duration_s: float | None = None) -> Advice:
    """interval_s: virtual seconds between the packets whose round trip
    matters (ping's -i), which sets how long the emulation idles between them.
    duration_s: the scenario's length in virtual seconds, for the real time
    the run will take."""
    if not 0 < headroom <= 1:
        raise AnalysisError(f"headroom {headroom:g}: want a share above 0, at most 1")
    if not 0 < accuracy_pct < 100:
        raise AnalysisError(f"accuracy {accuracy_pct:g}%: want a percentage above 0 and "
                            "below 100")
    if not (0 < interval_s < math.inf):
        raise AnalysisError(f"interval {interval_s:g} s: want a number of seconds above 0")
    if duration_s is not None and not (0 < duration_s < math.inf):
        raise AnalysisError(f"duration {duration_s:g} s: want a number of seconds above 0")
    reasons = [calibration.describe()]
    path, busiest = least_delay_path(topology), busiest_link(topology)
    node = busiest_node(topology)
    rtt_tdf = rate_tdf = 1.0
    reachable = True
    if path is not None:
        allowed = headroom * accuracy_pct / 100 * path.rtt_ms
        fixed = calibration.virtual_ms * path.links
        where = (f"smallest round trip {path.a} <-> {path.b}: {path.rtt_ms:g} ms over "
                 f"{path.links} link(s), packets {interval_s:g} s apart")
        enough = next((tdf for tdf in range(1, MAX_TDF + 1)
                       if path.links * calibration.extra_ms(tdf, interval_s, path.rtt_ms)
                       <= allowed), None)
        if fixed >= allowed:
            reachable = False
            reasons.append(f"{where}; {fixed:.2f} ms of the extra round trip is in virtual "
                           f"time, more than {headroom * accuracy_pct:.2g}% of it "
                           f"({_share(headroom)} the accuracy, for headroom) at any TDF")
        elif enough is None:
            reachable = False
            reasons.append(f"{where}: even TDF {MAX_TDF} leaves more than "
                           f"{headroom * accuracy_pct:.2g}% of it ({_share(headroom)} the "
                           "accuracy, for headroom)")
        else:
            rtt_tdf = float(enough)
            reasons.append(f"{where}: TDF >= {enough} for {headroom * accuracy_pct:.2g}% "
                           f"({accuracy_pct:g}% with headroom)")
    else:
        reasons.append("no configured delay between hosts: the round trip sets no TDF")
    if busiest is not None:
        # Keep the busiest link's real rate within the accuracy's share below
        # the ceiling, where TCP in the lab still reached the link rate.
        usable = calibration.ceiling_mbit * (1 - accuracy_pct / 100)
        rate_tdf = max(1.0, busiest[1] / usable)
        reasons.append(f"busiest {busiest[0]}: {busiest[1]:g} Mbit/s: "
                       f"TDF >= {rate_tdf:.2f}")
        if node is not None and node[1] > busiest[1]:
            # One guest's vCPU and its netback carry all of its links at once.
            node_tdf = node[1] / usable
            reasons.append(f"busiest node {node[0]}: {node[1]:g} Mbit/s over its links: "
                           f"TDF >= {max(1.0, node_tdf):.2f}")
            rate_tdf = max(rate_tdf, node_tdf)
    if not reachable:
        return Advice(None, accuracy_pct, path, busiest, math.inf, rate_tdf, None, None,
                      reasons, node, duration_s)
    tdf = float(math.ceil(max(rtt_tdf, rate_tdf) - 1e-9))
    error = None
    if path is not None:
        error = 100 * path.links * calibration.extra_ms(tdf, interval_s, path.rtt_ms) / path.rtt_ms
    heaviest = max(busiest[1], node[1] if node else 0.0) if busiest is not None else None
    share = heaviest / tdf / calibration.ceiling_mbit if heaviest is not None else None
    return Advice(tdf, accuracy_pct, path, busiest, rtt_tdf, rate_tdf, error, share, reasons,
                  node, duration_s)


def calibration_topology() -> Topology:
    """Two tools hosts on one shaped link whose delay is known and whose rate
    never limits a ping: what a round trip gains over it is the emulation's."""
    topology = Topology("calibrate", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, rate=CALIBRATION_RATE, delay=f"{CALIBRATION_DELAY_MS:g}ms")
    return topology


def measure(exp: Any, *, iperf_seconds: int = 5, high_tdf: float = HIGH_TDF,
            gaps: Mapping[float, int] | None = None, high_pings: int = 30) -> Calibration:
    """Run the calibration in a deployed calibration_topology() experiment at
    TDF 1 (`exp`: a started selena.Experiment); leaves it at `high_tdf`.
    gaps: seconds between pings at TDF 1 -> how many pings."""
    def rtts(count: int, interval: float) -> list[float]:
        return ping_rtts_ms(exp.cmd("h1", f"ping -c {count} -i {interval:g} -W 5 10.0.0.2",
                                    check=True, timeout=count * interval + 60).stdout)

    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")                 # ARP, warm caches
    by_gap = {gap: rtts(count, gap) for gap, count in (gaps or GAPS_S).items()}
    server = exp.start("h2", ["iperf3", "-s", "-1"])
    exp.wait_listening("h2", IPERF3_PORT)
    client = exp.cmd("h1", ["iperf3", "-c", "10.0.0.2", "-R", "-t", str(iperf_seconds),
                            "-O", "1", "-J"], check=True, timeout=iperf_seconds + 60)
    exp.wait(server)
    tcp = iperf3_interval_mbit(client.stdout)
    exp.set_tdf(high_tdf)
    high = rtts(high_pings, HIGH_INTERVAL_S)
    return fit(by_gap, high, tcp, high_tdf=high_tdf, high_interval_s=HIGH_INTERVAL_S,
               host=socket.gethostname(), configured_rtt_ms=2 * CALIBRATION_DELAY_MS)


def default_calibration_path() -> Path:
    return cache_dir() / f"calibration-{socket.gethostname()}.json"
