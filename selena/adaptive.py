"""Adaptive TDF: a controller that changes a running experiment's TDF from
the fidelity monitor's signals (`selena run --tdf auto[:MIN-MAX]`,
`Experiment(..., tdf="auto:2-20")`).

One TDF for a whole run pays the busiest phase's dilation during the quiet
ones too (VT-Mininet and NEAT adapt it to the load for that reason). Every
`interval_s` real seconds the controller reads a snapshot of the monitor's
signals (`Signals`, built by `signals_from_monitor` from what the monitor
samples) over the current TDF segment's last few intervals and decides
(`decide`, a pure function, so that the policy is tested on recorded traces):

- raise (x `step`, at most MAX) when fidelity is at risk: a guest's vCPUs or
  Dom0's busy >= `raise_busy` on average, a link's departures from a busy
  queue late in >= `raise_late` of them, or the latency signal's excess
  over the smallest configured round trip above `latency_target`;
- lower (/ `step`, at least MIN and the latency floor) when there is slack:
  every busy share's peak <= `lower_busy`, few departures late, and the
  latency excess (when measured) would stay within target at the lower TDF;
- otherwise hold. The gap between the raise and lower thresholds is the
  hysteresis: lowering by `step` multiplies the real-time load by about
  `step`, so `lower_busy` = `raise_busy` / `step` keeps a lowering from
  landing straight above the raise threshold;
- never twice within `dwell_s` real seconds of the last change (of any
  kind, the scenario's own set_tdf too). The dwell is in real time because
  what must settle is measured in real time: the monitor samples every 2
  real seconds, and a segment needs several samples to be judged at all (a
  dwell in virtual time would be 20 times longer in real time at TDF 20,
  and too short to hold a single sample at TDF 1).

Qdisc backlog and drops are in every snapshot and every decision's log line,
but decide nothing: a full queue and its drops are the emulated link's own
behaviour at any TDF (as in the monitor's verdict).

Each change goes through `Experiment.set_tdf` with its reason, which the TDF
timeline in meta.json keeps; the decisions, with the signal values behind
them, are logged, printed by the CLI and written to meta.json (`adaptive`).
`judge_segments` judges each TDF segment of a run on its own samples, so a
short busy segment is not diluted by a long quiet run: the run's verdict is
the worst segment's.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from selena import units
from selena.backends.base import LoadSample
from selena.errors import SelenaError, UnitError
from selena.fidelity import (
    ECHO_COUNT,
    MIN_BUSY_INTERVALS,
    MIN_SPACED,
    THROUGHPUT_SHARE,
    EchoRound,
    LatencyPath,
    LinkSpacing,
    busy_series,
    host_series,
    judge,
    throughput_series,
)

if TYPE_CHECKING:
    from selena.fidelity import FidelityReport

log = logging.getLogger(__name__)

AUTO = "auto"
DEFAULT_MIN = 1.0
DEFAULT_MAX = 64.0          # as `selena sweep --auto --max-tdf`
SPEC_HELP = ("write auto or auto:MIN-MAX with 1 <= MIN <= MAX <= 1000 and up to three "
             "decimals, e.g. auto:2-20")


class AdaptiveSpecError(SelenaError):
    """A bad `auto[:MIN-MAX]` TDF spec (one line naming the fix)."""


@dataclass(frozen=True)
class Policy:
    """The controller's parameters (docs/fidelity.md, "Adaptive TDF")."""

    min_tdf: float = DEFAULT_MIN
    max_tdf: float = DEFAULT_MAX
    step: float = 2.0               # the ladder: x step to raise, / step to lower
    raise_busy: float = 0.90        # mean busy share (a guest's vCPUs, Dom0's) that raises
    lower_busy: float = 0.45        # peak busy share below which there is slack
    # The host's CPUs, all domains' vCPU time together over its physical
    # CPUs (when it knows them). Each domain can be well below raise_busy
    # while together they fill the host: in the lab (2 CPUs, 8 domains)
    # four UDP flows at TDF 8 kept every guest under 45 % and Dom0 under
    # 55 % while the host ran at 0.88-1.06 and the phase was 4.5 % short
    # with RTTs 18 % long; at TDF 16 the host was at 0.55-0.71 and the
    # phase exact. Not x step for lowering: part of the host's load (idle
    # guests, the monitor) does not grow as the TDF falls (a quiet phase's
    # 0.47 at TDF 8 was 0.65, not 0.94, at TDF 4).
    raise_host_busy: float = 0.85
    lower_host_busy: float = 0.50
    raise_late: float = 0.10        # late departures' share that raises (the monitor's)
    # A shaped queue standing while its link carries less than this share
    # of its rate (the verdict's throughput signal) raises too.
    raise_throughput: float = THROUGHPUT_SHARE
    lower_late: float = 0.02        # ... below which there is slack
    min_spaced: int = MIN_SPACED    # departures needed to judge lateness
    latency_target: float = 0.05    # RTT excess over the smallest configured RTT allowed
    dwell_s: float = 10.0           # real seconds between two changes, at least
    # Real seconds after a raise before the TDF may be lowered again: one
    # dwell let a busy phase's lull lower it mid-phase in the lab (4 -> 2
    # 12 real s after the raise, raised again 5 s later).
    lower_hold_s: float = 30.0
    # The latency signal reads the segment's last this many echoes: over
    # the whole segment, a quiet phase's echoes kept the low echo down
    # through a busy phase that doubled the round trip (lab, TDF 1).
    latency_echoes: int = 15
    # ... but a raise also reads the last probe's (its ECHO_COUNT echoes):
    # 15 echoes took about as long as a phase to turn over at TDF 2, and
    # the lab's busy phase (RTT 2-10 times the configured) ran at TDF 2 to
    # its end. Raising fast and lowering on the longer view is the
    # hysteresis in time.
    latency_raise_echoes: int = ECHO_COUNT
    # Lateness counts the departures of the segment's last this many real
    # seconds: counted over the whole segment, a busy phase's late
    # departures kept the quiet phase after it from lowering (lab, TDF 8).
    late_window_s: float = 20.0
    # A TDF whose round trip was measured too slow is not lowered to again
    # for this many real seconds, doubled each time it proves too slow
    # after that (up to too_slow_memory_max_s): remembered for the whole
    # run, one busy phase pinned every quiet phase after it to its TDF.
    too_slow_memory_s: float = 60.0
    too_slow_memory_max_s: float = 480.0
    window: int = 3                 # monitor intervals a decision looks back on
    interval_s: float = 2.0         # real seconds between decisions

    def spec(self) -> str:
        return f"{AUTO}:{units.tdf_text(self.min_tdf)}-{units.tdf_text(self.max_tdf)}"

    def start(self, tdf: float) -> float:
        """The TDF a run starts at: the scenario's, clamped into MIN-MAX."""
        return self.clamp(tdf)

    def clamp(self, tdf: float) -> float:
        # Thousandths, as the hypervisor keeps a TDF; rounded up, so never
        # below a floor it was computed from.
        value = math.ceil(round(tdf * 1000, 6)) / 1000
        return min(self.max_tdf, max(self.min_tdf, value))

    def describe(self) -> str:
        """The policy in a few lines (selena plan, the CLI's run header)."""
        return (f"adaptive TDF {self.spec()}: every {self.interval_s:g} real s, over the "
                f"last {self.window} monitor intervals, raise x{self.step:g} when a guest's "
                f"or Dom0's vCPUs are busy >= {self.raise_busy:.0%} on average (the host's "
                f"CPUs >= {self.raise_host_busy:.0%}), >= "
                f"{self.raise_late:.0%} of a link's departures (of >= {self.min_spaced}) are "
                f"late (in the last {self.late_window_s:g} real s), a link with a standing "
                f"queue carries < {self.raise_throughput:.0%} of its "
                f"rate, or the RTT excess over the smallest configured RTT (of the last "
                f"{self.latency_echoes} echoes, or of the last {self.latency_raise_echoes}) is > "
                f"{self.latency_target:.0%}; lower /{self.step:g} when every busy peak is <= "
                f"{self.lower_busy:.0%} (the host's <= {self.lower_host_busy:.0%}), late <= "
                f"{self.lower_late:.0%} and the RTT stays "
                f"within target (never below the latency floor, nor to a TDF measured too "
                f"slow in the last {self.too_slow_memory_s:g} real s (doubling on each repeat), "
                f"and not within "
                f"{self.lower_hold_s:g} real s of a raise); at least "
                f"{self.dwell_s:g} real s between changes")

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec(), **asdict(self)}


def parse_spec(text: str) -> Policy | None:
    """`auto` or `auto:MIN-MAX` as a Policy; None for anything not starting
    with `auto` (a plain TDF); AdaptiveSpecError in one line otherwise."""
    spec = str(text).strip()
    if spec.lower() != AUTO and not spec.lower().startswith(AUTO + ":"):
        return None
    if spec.lower() == AUTO:
        return Policy()
    body = spec[len(AUTO) + 1:]
    low, sep, high = body.partition("-")
    if not sep or not low.strip() or not high.strip():
        raise AdaptiveSpecError(f"TDF {spec!r}: want MIN-MAX after `auto:`; {SPEC_HELP}")
    try:
        lo, hi = units.tdf(low), units.tdf(high)
    except UnitError as exc:
        raise AdaptiveSpecError(f"TDF {spec!r}: {exc}; {SPEC_HELP}") from None
    if lo > hi:
        raise AdaptiveSpecError(f"TDF {spec!r}: MIN {low} is above MAX {high}; {SPEC_HELP}")
    return Policy(min_tdf=lo, max_tdf=hi)


class MonitorView(Protocol):
    """What the controller reads of a fidelity Monitor (or a recorded trace)."""

    samples: list[LoadSample]
    spacing: dict[str, LinkSpacing]


@dataclass(frozen=True)
class Signals:
    """What the controller decides on: the fidelity monitor's signals over
    the last few intervals of the current TDF segment (real time)."""

    intervals: int                              # monitor intervals behind the busy shares
    guest_busy: Mapping[str, float] = field(default_factory=dict)   # node -> mean share
    guest_peak: Mapping[str, float] = field(default_factory=dict)   # node -> highest share
    dom0_busy: float | None = None              # mean share of Dom0's vCPUs
    dom0_peak: float | None = None
    host_busy: float | None = None              # mean share of the host's CPUs (None: unknown)
    host_peak: float | None = None
    backlog_bytes: int = 0                      # largest backlog of any shaped vif seen
    drops: int = 0                              # packets dropped by the shaping qdiscs
    spaced: int = 0                             # departures from a busy queue checked
    late_share: float | None = None             # the worst link's (None: too few checked)
    late_link: str = ""
    # The lowest median share of its rate a link carried while its queue
    # stood (None: no queue stood for MIN_BUSY_INTERVALS of the window).
    throughput_share: float | None = None
    throughput_link: str = ""
    # (measured - configured) / configured RTT of the smallest configured
    # round trip at the current TDF; None until the monitor measures latency.
    latency_excess: float | None = None
    # The same over the last probe's echoes only (Policy.latency_raise_echoes):
    # it raises, never lowers.
    latency_recent_excess: float | None = None
    # The run has a latency path but no echo of this segment has come back
    # yet (a probe takes its pings' virtual time, TDF times as long in real
    # time): unknown is not slack, so the TDF is not lowered meanwhile.
    latency_pending: bool = False

    def text(self) -> str:
        """The values, for a decision's log line."""
        parts = []
        if self.dom0_busy is not None:
            parts.append(f"Dom0 busy {self.dom0_busy:.0%} (peak {self.dom0_peak or 0:.0%})")
        if self.host_busy is not None:
            parts.append(f"host busy {self.host_busy:.0%} (peak {self.host_peak or 0:.0%})")
        if self.guest_busy:
            node = max(self.guest_busy, key=lambda n: self.guest_busy[n])
            parts.append(f"busiest guest {node} {self.guest_busy[node]:.0%} "
                         f"(peak {self.guest_peak.get(node, 0):.0%})")
        if self.late_share is not None:
            parts.append(f"late {self.late_share:.0%} of {self.spaced} on {self.late_link}")
        else:
            parts.append(f"lateness unjudged ({self.spaced} checked)")
        parts.append(f"backlog {self.backlog_bytes} B, drops {self.drops}")
        if self.throughput_share is not None:
            parts.append(f"{self.throughput_link} carried {self.throughput_share:.1%} of its "
                         "rate with a standing queue")
        parts.append("RTT excess " + ("not measured" if self.latency_excess is None
                                       else f"{self.latency_excess:+.1%}"))
        if self.latency_recent_excess is not None:
            parts[-1] += f" ({self.latency_recent_excess:+.1%} in the last probe)"
        return ", ".join(parts)


def signals_from_samples(samples: Sequence[LoadSample],
                         spacing: Mapping[str, tuple[str, int, int]] | None = None,
                         min_spaced: int = MIN_SPACED,
                         latency_excess: float | None = None,
                         host_cpus: int | None = None) -> Signals:
    """Signals from the monitor's load samples of one window and the
    spacing counts since `spacing_base`'s (vif -> (label, checked, late));
    the host's share with `host_cpus`, its physical CPUs."""
    dom0, guests = busy_series(list(samples))
    host = host_series(samples, host_cpus) if host_cpus else []
    backlog = max((q.backlog_bytes for s in samples for q in s.qdiscs.values()), default=0)
    drops = 0
    if len(samples) >= 2:
        first, last = samples[0].qdiscs, samples[-1].qdiscs
        drops = sum(max(0, q.drops - first[vif].drops) for vif, q in last.items()
                    if vif in first)
    spaced_total = 0
    worst: tuple[float, str] | None = None
    labels = {vif: f"toward {node}" for vif, node in
              (samples[-1].vif_nodes.items() if samples else ())}
    labels.update({vif: label for vif, (label, _, _) in (spacing or {}).items()})
    short: tuple[float, str] | None = None
    for vif, shares in throughput_series(list(samples)).items():
        if len(shares) >= MIN_BUSY_INTERVALS:
            median = statistics.median(shares)
            if short is None or median < short[0]:
                short = (median, labels.get(vif, vif))
    for label, spaced, late in (spacing or {}).values():
        spaced_total += spaced
        if spaced >= min_spaced:
            share = late / spaced
            if worst is None or share > worst[0]:
                worst = (share, label)
    return Signals(intervals=len(dom0) or max((len(v) for v in guests.values()), default=0),
                   guest_busy={n: sum(v) / len(v) for n, v in guests.items() if v},
                   guest_peak={n: max(v) for n, v in guests.items() if v},
                   dom0_busy=sum(dom0) / len(dom0) if dom0 else None,
                   dom0_peak=max(dom0) if dom0 else None,
                   host_busy=sum(host) / len(host) if host else None,
                   host_peak=max(host) if host else None,
                   backlog_bytes=backlog, drops=drops, spaced=spaced_total,
                   late_share=worst[0] if worst else None,
                   late_link=worst[1] if worst else "", latency_excess=latency_excess,
                   throughput_share=short[0] if short else None,
                   throughput_link=short[1] if short else "")


def spacing_counts(spacing: Mapping[str, LinkSpacing]) -> dict[str, tuple[str, int, int]]:
    """The monitor's cumulative spacing counts: vif -> (label, checked, late)."""
    return {vif: (s.label, s.spaced, s.late) for vif, s in list(spacing.items())}


def spacing_since(now: Mapping[str, tuple[str, int, int]],
                  base: Mapping[str, tuple[str, int, int]]) -> dict[str, tuple[str, int, int]]:
    out = {}
    for vif, (label, spaced, late) in now.items():
        _, spaced0, late0 = base.get(vif, (label, 0, 0))
        out[vif] = (label, spaced - spaced0, late - late0)
    return out


def signals_from_monitor(monitor: MonitorView, since: float, window: int,
                         spacing_base: Mapping[str, tuple[str, int, int]],
                         policy: Policy, latency_excess: float | None = None,
                         host_cpus: int | None = None) -> Signals:
    """The adapter from what Monitor samples today: its load samples taken
    at or after `since` (a time.monotonic instant: the segment's start), the
    last `window` intervals of them, and its spacing counts beyond those at
    the segment's start. The latency signal is passed in (None until the
    monitor measures one)."""
    samples = [s for s in list(monitor.samples) if s.real >= since][-(window + 1):]
    return signals_from_samples(samples, spacing_since(spacing_counts(monitor.spacing),
                                                       spacing_base),
                                policy.min_spaced, latency_excess, host_cpus)


@dataclass(frozen=True)
class Decision:
    """One change the controller makes: from, to, raise or lower, why."""

    old: float
    new: float
    kind: str                   # "raise" or "lower"
    reason: str
    signals: Signals

    def text(self) -> str:
        return (f"adaptive TDF {units.tdf_text(self.old)} -> {units.tdf_text(self.new)} "
                f"({self.kind}: {self.reason}; {self.signals.text()})")


def latency_floor(policy: Policy, tdf: float, excess: float | None) -> float:
    """The smallest TDF at which the RTT excess stays within target: the
    excess is processing done in real time, which dilation divides, so at
    TDF T' it is about excess x T / T'. MIN without a latency signal."""
    if excess is None or excess <= 0:
        return policy.min_tdf
    return policy.clamp(tdf * excess / policy.latency_target)


# A calibrated start keeps the predicted RTT excess within this share of
# the target: the floor varies between boots. `selena advise` aims lower (a
# third: advise.HEADROOM) since nothing corrects a fixed TDF during the run;
# here the controller raises the TDF when the floor turns out higher.
START_MARGIN = 0.5


def calibrated_start(policy: Policy, tdf: float,
                     predict: Callable[[float], float]) -> tuple[float, str]:
    """The TDF a run starts at when this host's calibration predicts the
    latency path's RTT excess (`predict`: TDF -> excess as a share of the
    configured round trip), and why: the scenario's TDF clamped into
    MIN-MAX, or the first step of the ladder above it whose predicted
    excess is within START_MARGIN of the target. Starting at MIN spends the
    controller's first dwell (10 real s) below the latency floor: in the
    lab the first phase's round trip at TDF 1 was +50 % (median) before the
    first raise."""
    start = policy.start(tdf)
    limit = policy.latency_target * START_MARGIN
    value = start
    while predict(value) > limit and value < policy.max_tdf:
        value = policy.clamp(value * policy.step)
    if value == start:
        return start, (f"start of {policy.spec()} at the scenario's TDF clamped into MIN-MAX "
                       f"(predicted RTT excess {predict(start):+.1%} there)")
    return value, (f"start of {policy.spec()} at TDF {units.tdf_text(value)}: this host's "
                   f"calibration predicts an RTT excess of {predict(start):+.1%} at TDF "
                   f"{units.tdf_text(start)} and {predict(value):+.1%} at "
                   f"{units.tdf_text(value)} (start within {limit:.1%})")


def decide(policy: Policy, tdf: float, signals: Signals | None,
           since_change_s: float, too_slow_at: float = 0.0,
           after_raise: bool = False) -> Decision | None:
    """Raise, lower or hold (None) at TDF `tdf`, `since_change_s` real
    seconds after the last change, on these signals (None: nothing sampled).
    `too_slow_at`: the highest TDF this run measured a round trip too slow
    at; never lowered to it again (the excess does not shrink as 1/TDF in
    every host: in the lab it went 28% at TDF 1, 11% at 5.6, 6% at 8, and
    the prediction alone flapped between 8 and 16). `after_raise`: the last
    change was a raise, so lowering waits `policy.lower_hold_s`."""
    if signals is None or signals.intervals < 1 or since_change_s < policy.dwell_s:
        return None
    floor = latency_floor(policy, tdf, signals.latency_excess)
    risks = _risks(policy, signals)
    if risks:
        # Up to where the worse of the two views would be within target: a
        # busy phase is short, and each step waits a dwell.
        worst = max((x for x in (signals.latency_excess, signals.latency_recent_excess)
                     if x is not None), default=None)
        new = policy.clamp(max(tdf * policy.step, latency_floor(policy, tdf, worst)))
        if new <= tdf:
            return None         # at MAX already: the verdict will say what was wrong
        return Decision(tdf, new, "raise", "; ".join(risks), signals)
    if after_raise and since_change_s < policy.lower_hold_s:
        return None
    slack = _slack(policy, signals, floor)
    if slack is None:
        return None
    new = max(policy.clamp(tdf / policy.step), floor)
    if new >= tdf or new <= too_slow_at:
        return None             # at MIN or at the latency floor, measured or predicted
    return Decision(tdf, new, "lower", slack, signals)


def _risks(policy: Policy, s: Signals) -> list[str]:
    out = []
    for node, share in sorted(s.guest_busy.items()):
        if share >= policy.raise_busy:
            out.append(f"vCPU of {node} busy {share:.0%} >= {policy.raise_busy:.0%}")
    if s.dom0_busy is not None and s.dom0_busy >= policy.raise_busy:
        out.append(f"Dom0 busy {s.dom0_busy:.0%} >= {policy.raise_busy:.0%}")
    if s.host_busy is not None and s.host_busy >= policy.raise_host_busy:
        out.append(f"host CPUs busy {s.host_busy:.0%} >= {policy.raise_host_busy:.0%}")
    if s.late_share is not None and s.late_share >= policy.raise_late:
        out.append(f"link {s.late_link}: {s.late_share:.0%} of departures late >= "
                   f"{policy.raise_late:.0%}")
    if s.latency_excess is not None and s.latency_excess > policy.latency_target:
        out.append(f"RTT excess {s.latency_excess:+.1%} > {policy.latency_target:.0%}")
    elif s.latency_recent_excess is not None and s.latency_recent_excess > policy.latency_target:
        out.append(f"RTT excess {s.latency_recent_excess:+.1%} in the last probe > "
                   f"{policy.latency_target:.0%}")
    if s.throughput_share is not None and s.throughput_share < policy.raise_throughput:
        out.append(f"link {s.throughput_link}: carried {s.throughput_share:.1%} of its rate "
                   f"with a standing queue < {policy.raise_throughput:.0%}")
    return out


def _slack(policy: Policy, s: Signals, floor: float) -> str | None:
    """Why there is slack (all of it), or None if any signal says no. Called
    only when nothing is at risk: a link short of its rate raises (or holds
    at MAX) before this."""
    peaks = [*s.guest_peak.values(), *([s.dom0_peak] if s.dom0_peak is not None else [])]
    if not peaks or max(peaks) > policy.lower_busy or s.latency_pending:
        return None
    if s.late_share is not None and s.late_share > policy.lower_late:
        return None
    if s.host_peak is not None and s.host_peak > policy.lower_host_busy:
        return None
    why = f"every busy peak <= {policy.lower_busy:.0%} (highest {max(peaks):.0%})"
    if s.host_peak is not None:
        why += f", host peak {s.host_peak:.0%} <= {policy.lower_host_busy:.0%}"
    if s.late_share is not None:
        why += f", late {s.late_share:.0%} <= {policy.lower_late:.0%}"
    if s.latency_excess is not None:
        why += f", RTT within target down to TDF {units.tdf_text(floor)}"
    return why


class Controller:
    """Reads the monitor's signals in a thread of its own while the scenario
    runs and applies `decide`'s changes through `apply(new_tdf, reason)`
    (Experiment.set_tdf). `clock` is the run's VirtualClock: the dwell counts
    from its last segment's start, whoever changed the TDF."""

    def __init__(self, policy: Policy, monitor: MonitorView, clock: Any,
                 apply: Callable[[float, str], object],
                 latency: Callable[[float, int], float | None] | None = None,
                 latency_measurable: Callable[[], bool] = lambda: False,
                 say: Callable[[str], None] | None = None,
                 now: Callable[[], float] = time.monotonic,
                 host_cpus: int | None = None):
        self.policy = policy
        self._host_cpus = host_cpus     # the host's physical CPUs (None: no host signal)
        self._now = now         # the clock the monitor's samples use
        self.monitor = monitor
        self.clock = clock
        self._apply = apply
        self._latency = latency
        self._latency_measurable = latency_measurable
        self._too_slow_at = 0.0     # the highest TDF a round trip was too slow at ...
        self._too_slow_until = 0.0  # ... remembered until then (real time) ...
        self._too_slow_memory = 0.0  # ... for this long since (0: never too slow)
        self._say = say or (lambda msg: log.info("%s", msg))
        self.decisions: list[dict[str, Any]] = []
        self.failure: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._segment = -1
        # (real time, the monitor's spacing counts) at each step of this segment
        self._spacing_seen: list[tuple[float, dict[str, tuple[str, int, int]]]] = []
        self._raised_segment = -1   # the segment our last raise began, if still current

    def start(self) -> Controller:
        self._thread = threading.Thread(target=self._loop, name="selena-adaptive", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.policy.interval_s):
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - recorded; the run goes on
                # At the TDF it has; the bundle says why it stopped adapting.
                self.failure = str(exc) or type(exc).__name__
                self._say(f"adaptive TDF stopped: {exc}")
                return

    def step(self) -> Decision | None:
        """One look at the signals; the change made, if any."""
        if self.clock.frozen:
            return None
        timeline = self.clock.timeline()
        started = self.clock.started
        now = self._now()
        counts = spacing_counts(self.monitor.spacing)
        if len(timeline) != self._segment:
            # A new segment (ours or the scenario's): lateness counts from here.
            self._segment = len(timeline)
            self._spacing_seen = [(now, counts)]
        segment_start = started + float(timeline[-1]["real_s"])
        since_change = now - segment_start
        late_base = self._late_window_base(now)
        self._spacing_seen.append((now, counts))
        # The latency signal over this segment's recent echoes only: echoes
        # taken at the previous TDF say nothing about this one.
        latency = (self._latency(segment_start, self.policy.latency_echoes)
                   if self._latency is not None else None)
        signals = signals_from_monitor(self.monitor, segment_start, self.policy.window,
                                       late_base, self.policy, latency, self._host_cpus)
        if latency is not None and self._latency is not None:
            signals = dataclasses.replace(signals, latency_recent_excess=self._latency(
                segment_start, self.policy.latency_raise_echoes))
        if latency is None and self._latency is not None and self._latency_measurable():
            signals = dataclasses.replace(signals, latency_pending=True)
        if latency is not None and latency > self.policy.latency_target:
            self._remember_too_slow(self.clock.tdf, now)
        # Our own raise began this segment (a change by the scenario since
        # began another one).
        after_raise = self._raised_segment == len(timeline)
        too_slow_at = self._too_slow_at if now < self._too_slow_until else 0.0
        decision = decide(self.policy, self.clock.tdf, signals, since_change, too_slow_at,
                          after_raise)
        if decision is None:
            log.debug("adaptive TDF holds %s: %s", units.tdf_text(self.clock.tdf),
                      signals.text())
            return None
        try:
            self._apply(decision.new, f"{decision.kind}: {decision.reason}")
        except SelenaError:
            if self.clock.frozen:
                return None     # paused meanwhile: decided again after the resume
            raise
        self._raised_segment = len(self.clock.timeline()) if decision.kind == "raise" else -1
        self._say(decision.text())
        self.decisions.append({"real_s": round(self._now() - started, 3),
                               "virtual_s": round(self.clock.now(), 3),
                               "from": decision.old, "to": decision.new,
                               "kind": decision.kind, "reason": decision.reason,
                               "signals": _signals_json(decision.signals)})
        return decision

    def _remember_too_slow(self, tdf: float, now: float) -> None:
        """`tdf`'s round trip is too slow now: not lowered to again for a
        while, longer each time a forgotten one proves too slow again."""
        if now < self._too_slow_until:
            self._too_slow_at = max(self._too_slow_at, tdf)
        else:
            self._too_slow_memory = (self.policy.too_slow_memory_s if not self._too_slow_memory
                                     else min(2 * self._too_slow_memory,
                                              self.policy.too_slow_memory_max_s))
            self._too_slow_at = tdf
        self._too_slow_until = now + self._too_slow_memory

    def _late_window_base(self, now: float) -> dict[str, tuple[str, int, int]]:
        """The spacing counts `late_window_s` ago, or at the segment's start
        if that is later; older ones are dropped."""
        since = now - self.policy.late_window_s
        while len(self._spacing_seen) > 1 and self._spacing_seen[1][0] <= since:
            self._spacing_seen.pop(0)
        return self._spacing_seen[0][1]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy.to_json(), "decisions": self.decisions}
        if self.failure:
            out["failure"] = self.failure
        return out


def _signals_json(s: Signals) -> dict[str, Any]:
    data = asdict(s)
    for key in ("guest_busy", "guest_peak"):
        data[key] = {k: round(v, 4) for k, v in data[key].items()}
    for key in ("dom0_busy", "dom0_peak", "host_busy", "host_peak", "late_share",
                "latency_excess",
                "latency_recent_excess", "throughput_share"):
        if data[key] is not None:
            data[key] = round(data[key], 4)
    return data


# -- the verdict over every segment ------------------------------------------------

RANK = {"ok": 0, "unknown": 1, "degraded": 2}


def judge_segments(samples: Sequence[LoadSample], timeline: Sequence[Mapping[str, Any]],
                   started: float, interval_s: float,
                   echoes: Sequence[EchoRound] = (),
                   path: LatencyPath | None = None) -> list[dict[str, Any]]:
    """Each TDF segment judged on its own load samples (those taken within
    it; an interval across a change belongs to neither), and on the latency
    probes that ended within it, as the monitor judges a run: its TDF, where
    it starts, its verdict and reasons. (A run's low echo may come from
    its highest TDF: the segments at a lower one are judged on their own.)"""
    out = []
    for i, seg in enumerate(timeline):
        begin = started + float(seg["real_s"])
        end = started + float(timeline[i + 1]["real_s"]) if i + 1 < len(timeline) \
            else math.inf
        inside = [s for s in samples if begin <= s.real <= end]
        probes = [e for e in echoes if begin <= e.real <= end]
        report = judge(inside, interval_s, echoes=probes, path=path)
        out.append({"tdf": seg["tdf"], "real_s": round(float(seg["real_s"]), 3),
                    "virtual_s": round(float(seg["virtual_s"]), 3),
                    "intervals": report.intervals, "verdict": report.verdict,
                    "reasons": list(report.reasons)})
    return out


def cover_segments(report: FidelityReport, segments: Sequence[Mapping[str, Any]]) -> None:
    """The run's verdict covers every segment: a degraded segment makes the
    run degraded, its reasons named with the segment. Segments too short to
    judge (unknown) are listed in fidelity.json, not held against the run."""
    if len(segments) < 2:
        return
    for i, seg in enumerate(segments, start=1):
        if seg["verdict"] != "degraded":
            continue
        where = (f"segment {i} (TDF {units.tdf_text(float(seg['tdf']))} from real "
                 f"{seg['real_s']:g} s)")
        report.reasons += [f"{where}: {reason}" for reason in seg["reasons"]
                           if reason not in report.reasons]
        if RANK.get(report.verdict, 0) < RANK["degraded"]:
            report.verdict = "degraded"


__all__ = ["AUTO", "AdaptiveSpecError", "Controller", "Decision", "Policy", "Signals",
           "calibrated_start", "cover_segments", "decide", "judge_segments", "latency_floor",
           "parse_spec",
           "signals_from_monitor", "signals_from_samples"]
