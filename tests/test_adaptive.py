"""The adaptive TDF controller's policy (selena/adaptive.py) on recorded and
made-up monitor traces, replayed through the real Controller with a fake
clock (no lab); the verdict over every TDF segment; `auto[:MIN-MAX]`
parsing in the library and the CLI; and an adaptive run end to end against
the fake Dom0, whose vCPU load the test turns up and down."""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import pytest
from cli_main import run_cli

from selena.adaptive import (
    AdaptiveSpecError,
    Controller,
    Policy,
    Signals,
    calibrated_start,
    cover_segments,
    decide,
    host_series,
    judge_segments,
    latency_floor,
    parse_spec,
    signals_from_samples,
)
from selena.advise import Calibration, default_calibration_path
from selena.backends.base import LoadSample, QdiscStats
from selena.backends.xl import XlBackend
from selena.cli.experiment import tdf_timeline_line
from selena.engine import VirtualClock
from selena.errors import ExperimentError, ScenarioError
from selena.experiment import Experiment
from selena.fidelity import LinkSpacing, judge
from selena.model import Topology

TRACE = Path(__file__).parent / "data/adaptive/demo_tdf10_trace.json"
STEP = 2.0      # real seconds between the monitor's samples


@dataclass
class FakeMonitor:
    """What the controller reads of a Monitor: its samples and spacing."""

    samples: list[LoadSample] = field(default_factory=list)
    spacing: dict[str, LinkSpacing] = field(default_factory=dict)


def replay(policy: Policy, dom0: list[float], guests: dict[str, list[float]],
           start_tdf: float, latency=None, late: list[tuple[int, int]] | None = None
           ) -> tuple[list[tuple[float, float, float, str]], VirtualClock]:
    """Feed a recorded trace (busy shares per interval of STEP real seconds)
    to a Controller sample by sample, deciding after each, as the running
    controller does. Returns the changes as (real s, old, new, kind)."""
    now = [0.0]
    clock = VirtualClock(start_tdf, clock=lambda: now[0])
    monitor = FakeMonitor()
    changes: list[tuple[float, float, float, str]] = []

    def apply(new: float, reason: str) -> None:
        changes.append((now[0], clock.tdf, new, reason.split(":")[0]))
        clock.set_tdf(new, reason=reason)

    ctl = Controller(policy, monitor, clock, apply, now=lambda: now[0],
                     latency=(lambda since, last: latency(clock.tdf)) if latency else None,
                     say=lambda msg: None)
    used = {"Domain-0": 0.0, **{node: 0.0 for node in guests}}
    spaced = late_n = 0
    for i in range(len(dom0) + 1):
        if i:
            used["Domain-0"] += dom0[i - 1] * STEP
            for node, shares in guests.items():
                used[node] += shares[i - 1] * STEP
            if late:
                spaced += late[i - 1][0]
                late_n += late[i - 1][1]
                monitor.spacing["vif1.0"] = LinkSpacing("h1 eth0 -> h2 eth0", spaced=spaced,
                                                        late=late_n)
        monitor.samples.append(LoadSample(
            real=now[0], dom0_vcpu_s=[used["Domain-0"]],
            guest_vcpu_s={node: [used[node]] for node in guests},
            qdiscs={"vif1.0": QdiscStats(100 * i, 0, 0, 1514)}))
        ctl.step()
        now[0] += STEP
    return changes, clock


def recorded() -> tuple[list[float], dict[str, list[float]]]:
    data = json.loads(TRACE.read_text())
    assert data["interval_s"] == STEP
    return data["dom0_busy"], data["guest_busy"]


def test_a_quiet_busy_quiet_recorded_trace_raises_then_lowers():
    dom0, guests = recorded()
    changes, clock = replay(Policy(1, 20), dom0, guests, start_tdf=1)
    assert [(old, new, kind) for _, old, new, kind in changes] == \
        [(1, 2, "raise"), (2, 4, "raise"), (4, 2, "lower"), (2, 1, "lower")]
    # Raised while h1 was busy (intervals 28-31: real 54-62 s), again while
    # h2 was (33-36: 64-72 s), lowered once both were quiet.
    times = [t for t, *_ in changes]
    assert 54 <= times[0] <= 62 and 64 <= times[1] <= 74 and times[2] > 74
    reasons = [seg.get("reason", "") for seg in clock.timeline()]
    assert reasons[1].startswith("raise: vCPU of h1 busy")
    assert reasons[2].startswith("raise: vCPU of h2 busy")
    assert reasons[3].startswith("lower:") and reasons[4].startswith("lower:")


def test_a_noisy_trace_at_the_raise_threshold_does_not_flap():
    rng = random.Random(33)
    noisy = [min(1.0, max(0.0, 0.9 + rng.uniform(-0.08, 0.08))) for _ in range(200)]
    changes, _ = replay(Policy(1, 8), noisy, {}, start_tdf=1)
    kinds = [kind for *_, kind in changes]
    assert kinds and set(kinds) == {"raise"} and len(kinds) <= 3     # 1 -> 2 -> 4 -> 8
    # One threshold for both (no hysteresis) flaps on the same trace.
    flat = Policy(1, 8, raise_busy=0.9, lower_busy=0.9)
    flapping = [kind for *_, kind in replay(flat, noisy, {}, start_tdf=1)[0]]
    assert flapping.count("lower") >= 3 and flapping.count("raise") >= 3


def test_a_noisy_trace_at_the_lower_threshold_only_lowers():
    rng = random.Random(5)
    noisy = [0.45 + rng.uniform(-0.1, 0.1) for _ in range(200)]
    kinds = [kind for *_, kind in replay(Policy(1, 16), noisy, {}, start_tdf=16)[0]]
    assert kinds and set(kinds) == {"lower"}


def test_changes_are_at_least_the_dwell_time_apart():
    busy = [1.0] * 60
    policy = Policy(1, 1000, dwell_s=10.0)
    changes, _ = replay(policy, busy, {"h1": [0.1] * 60}, start_tdf=1)
    times = [t for t, *_ in changes]
    assert len(times) >= 5
    assert times[0] >= 10.0 and all(b - a >= 10.0 for a, b in pairwise(times))
    longer = [t for t, *_ in replay(Policy(1, 1000, dwell_s=30.0), busy, {}, start_tdf=1)[0]]
    assert all(b - a >= 30.0 for a, b in pairwise(longer))
    assert len(longer) < len(changes)


def test_min_and_max_clamp_the_ladder():
    policy = Policy(2, 5)
    assert policy.start(1) == 2 and policy.start(10) == 5 and policy.start(3) == 3
    up = replay(policy, [1.0] * 40, {}, start_tdf=2)[0]
    assert [(old, new) for _, old, new, _ in up] == [(2, 4), (4, 5)]
    down = replay(policy, [0.05] * 40, {}, start_tdf=5)[0]
    assert [(old, new) for _, old, new, _ in down] == [(5, 2.5), (2.5, 2)]


def test_the_latency_floor_is_never_crossed():
    # Real-time processing adds 0.2 / TDF to the smallest RTT (as a ratio):
    # 5% allows TDF 4 at least, whatever the CPUs say.
    changes, clock = replay(Policy(1, 64), [0.05] * 60, {}, start_tdf=16,
                            latency=lambda tdf: 0.2 / tdf)
    assert [(old, new) for _, old, new, _ in changes] == [(16, 8), (8, 4)]
    assert clock.tdf == 4
    # Below the floor with a quiet CPU: the latency alone raises.
    raised = replay(Policy(1, 64), [0.05] * 20, {}, start_tdf=1,
                    latency=lambda tdf: 0.2 / tdf)[0]
    assert raised[0][1:] == (1, 4, "raise")
    quiet = Signals(intervals=3, dom0_busy=0.1, dom0_peak=0.1)
    assert latency_floor(Policy(1, 64), 8, 0.02) == pytest.approx(3.2)
    lowered = decide(Policy(1, 64), 4, Signals(**{**quiet.__dict__, "latency_excess": 0.04}),
                     60)
    assert lowered is not None and lowered.new == pytest.approx(3.2)
    assert decide(Policy(1, 64), 3.2, Signals(**{**quiet.__dict__, "latency_excess": 0.05}),
                  60) is None


def test_the_latency_signal_reads_the_recent_echoes_of_the_segment():
    """In the lab a quiet phase's echoes kept the segment's low echo at +5%
    while a busy phase doubled the round trip: the controller stayed at TDF
    1 through it. It reads the segment's last `latency_echoes` echoes."""
    now = [0.0]
    clock = VirtualClock(1, clock=lambda: now[0])
    echoes: list[tuple[float, float]] = []          # (begun, excess) per echo
    asked: list[tuple[float, int]] = []

    def latency(since: float, last: int) -> float | None:
        asked.append((since, last))
        mine = [excess for begun, excess in echoes if begun >= since][-last:]
        return sorted(mine)[int(0.1 * (len(mine) - 1))] if mine else None

    changes: list[float] = []
    ctl = Controller(Policy(1, 16, latency_echoes=10), FakeMonitor(), clock,
                     lambda new, reason: (changes.append(new), clock.set_tdf(new, reason=reason)),
                     latency=latency, now=lambda: now[0], say=lambda msg: None)
    for t in range(0, 40):          # quiet: 1% over, an echo a second
        echoes.append((float(t), 0.01))
    for t in range(40, 52):         # busy: 60% over
        echoes.append((float(t), 0.6))
    now[0] = 52.0
    ctl.monitor.samples.extend(LoadSample(real=r, dom0_vcpu_s=[0.1 * r]) for r in (46, 48, 50, 52))
    decision = ctl.step()
    assert asked[-2:] == [(0.0, 10), (0.0, 5)]      # the longer view, the last probe
    assert decision is not None and decision.kind == "raise" and "RTT excess +60.0%" in \
        decision.reason
    assert changes == [12]          # the latency floor: 1 x 0.6 / 0.05 = 12


def test_the_last_probe_alone_raises_but_never_lowers():
    """In the lab (TDF 2, 9 virtual s phases) the busy phase's round trips
    of 2-10 times the configured one ran to the phase's end before the last
    15 echoes turned over: a raise reads the last probe's echoes too."""
    now = [0.0]
    clock = VirtualClock(2, clock=lambda: now[0])
    echoes: list[tuple[float, float]] = []          # (begun, excess) per echo

    def latency(since: float, last: int) -> float | None:
        mine = [excess for begun, excess in echoes if begun >= since][-last:]
        return sorted(mine)[int(0.1 * (len(mine) - 1))] if mine else None

    changes: list[float] = []
    ctl = Controller(Policy(1, 16), FakeMonitor(), clock,
                     lambda new, reason: (changes.append(new), clock.set_tdf(new, reason=reason)),
                     latency=latency, now=lambda: now[0], say=lambda msg: None)
    ctl.monitor.samples.extend(LoadSample(real=r, dom0_vcpu_s=[0.1 * r]) for r in (46, 48, 50, 52))
    for t in range(0, 45):          # quiet: 1% over
        echoes.append((float(t), 0.01))
    for t in range(45, 50):         # one probe of a busy phase: 4 times over
        echoes.append((float(t), 4.0))
    now[0] = 52.0
    decision = ctl.step()
    assert decision is not None and decision.kind == "raise", decision
    assert "+400.0% in the last probe" in decision.reason
    assert decision.signals.latency_excess == pytest.approx(0.01)
    assert changes == [16]          # its floor, 2 x 4.0 / 0.05, at MAX
    # A last probe below target is no slack on its own: the longer view
    # (still over) raises.
    fast = Signals(intervals=3, dom0_busy=0.1, dom0_peak=0.1, latency_excess=0.3,
                   latency_recent_excess=0.0)
    raised = decide(Policy(1, 64), 8, fast, 60)
    assert raised is not None and raised.kind == "raise" and "+30.0%" in raised.reason
    calm = Signals(intervals=3, dom0_busy=0.1, dom0_peak=0.1, latency_excess=0.01,
                   latency_recent_excess=0.01)
    lowered = decide(Policy(1, 64), 8, calm, 60)
    assert lowered is not None and lowered.kind == "lower"


def test_no_lowering_while_the_latency_of_this_segment_is_not_measured_yet():
    """In the lab a probe at TDF 13.6 took longer than the dwell: with no
    echo of the new segment the controller lowered on the CPUs alone, below
    the latency floor it had just raised to. Unknown is not slack."""
    quiet = Signals(intervals=3, dom0_busy=0.1, dom0_peak=0.1)
    assert decide(Policy(1, 64), 8, quiet, 60) is not None
    pending = Signals(**{**quiet.__dict__, "latency_pending": True})
    assert decide(Policy(1, 64), 8, pending, 60) is None
    # A risk still raises while the latency is pending.
    busy = Signals(**{**pending.__dict__, "dom0_busy": 0.95, "dom0_peak": 0.97})
    raised = decide(Policy(1, 64), 8, busy, 60)
    assert raised is not None and raised.new == 16


def test_never_lowered_to_a_tdf_whose_round_trip_was_measured_too_slow():
    """The lab's excess did not shrink as 1/TDF: at TDF 16 the prediction
    allowed 8, where the round trip had been 6% too slow, and the controller
    went 16 -> 8 -> 16."""
    quiet = Signals(intervals=3, dom0_busy=0.1, dom0_peak=0.1, latency_excess=0.019)
    lowered = decide(Policy(1, 64), 16, quiet, 60)
    assert lowered is not None and lowered.new == 8
    assert decide(Policy(1, 64), 16, quiet, 60, too_slow_at=8) is None
    lowered = decide(Policy(1, 64), 16, quiet, 60, too_slow_at=4)
    assert lowered is not None and lowered.new == 8


def test_the_host_signal_is_every_domain_together_over_the_physical_cpus():
    """In the lab (2 CPUs, 8 domains) four UDP flows at TDF 8 kept each
    guest under 45 % and Dom0 under 55 % while the host ran at 0.88-1.06
    and the phase was 4.5 % short: no domain's rule saw it."""
    def sample(t: float, dom0: float, each: float) -> LoadSample:
        return LoadSample(real=t, dom0_vcpu_s=[dom0 * t / 2, dom0 * t / 2],
                          guest_vcpu_s={f"h{i}": [each * t] for i in range(1, 7)})
    samples = [sample(t, 0.5, 0.25) for t in (10.0, 12.0, 14.0, 16.0)]
    # Dom0's two vCPUs used 0.5 s per s together, six guests 0.25 each:
    # 2.0 CPU s per s of 2 CPUs.
    assert host_series(samples, 2) == [pytest.approx(1.0)] * 3
    signals = signals_from_samples(samples, host_cpus=2)
    assert signals.host_busy == pytest.approx(1.0) and signals.host_peak == pytest.approx(1.0)
    assert max(signals.guest_busy.values()) < 0.3 and signals.dom0_busy < 0.3
    assert signals_from_samples(samples).host_busy is None        # CPUs unknown
    raised = decide(Policy(1, 16), 8, signals, 60)
    assert raised is not None and raised.reason == "host CPUs busy 100% >= 85%"
    assert "host busy 100% (peak 100%)" in signals.text()
    # The host at 0.6: no raise, and no lowering (at TDF 16 the lab's busy
    # phase was exact with the host at 0.55-0.71, and 4.5 % short at 8).
    busy = Signals(intervals=3, dom0_busy=0.3, dom0_peak=0.35, guest_busy={"h1": 0.2},
                   guest_peak={"h1": 0.25}, host_busy=0.6, host_peak=0.65)
    assert decide(Policy(1, 16), 16, busy, 60) is None
    quiet = dataclasses.replace(busy, host_busy=0.4, host_peak=0.45)
    lowered = decide(Policy(1, 16), 16, quiet, 60)
    assert lowered is not None and lowered.new == 8 and "host peak 45% <= 50%" in lowered.reason


def test_the_controller_reads_the_host_signal_when_it_knows_the_cpus():
    now = [0.0]
    clock = VirtualClock(4, clock=lambda: now[0])
    monitor = FakeMonitor()
    ctl = Controller(Policy(1, 16), monitor, clock,
                     lambda new, reason: clock.set_tdf(new, reason=reason),
                     now=lambda: now[0], say=lambda msg: None, host_cpus=2)
    for t in range(0, 22, 2):
        now[0] = float(t)
        monitor.samples.append(LoadSample(real=now[0], dom0_vcpu_s=[0.45 * t, 0.45 * t],
                                          guest_vcpu_s={"h1": [0.4 * t], "h2": [0.4 * t]}))
    decision = ctl.step()
    assert decision is not None and decision.kind == "raise" and \
        decision.reason == "host CPUs busy 85% >= 85%", decision


def test_a_tdf_measured_too_slow_is_avoided_for_a_while_longer_each_time():
    """Remembered for the whole run, a busy phase's too slow TDF would pin
    every quiet phase after it above it. Forgotten after too_slow_memory_s
    real seconds, doubled each time it proves too slow again."""
    now = [0.0]
    clock = VirtualClock(8, clock=lambda: now[0])
    excess = [0.2]
    ctl = Controller(Policy(1, 16), FakeMonitor(), clock,
                     lambda new, reason: clock.set_tdf(new, reason=reason),
                     latency=lambda since, last: excess[0], now=lambda: now[0],
                     say=lambda msg: None)

    def at(t: float) -> str | None:
        while now[0] < t:
            now[0] += 1.0
            ctl.monitor.samples.append(LoadSample(real=now[0], dom0_vcpu_s=[0.1 * now[0]]))
        decision = ctl.step()
        return None if decision is None else f"{decision.kind} {decision.new:g}"

    assert at(20) == "raise 16"         # 8 too slow, until 80
    excess[0] = 0.01                    # at 16: the floor allows 3.2
    assert at(79) is None               # but 8 was too slow 59 s ago
    assert at(81) == "lower 8"
    excess[0] = 0.2
    assert at(95) == "raise 16"         # too slow again: now for 120 s, until 215
    excess[0] = 0.01
    assert at(214) is None
    assert at(216) == "lower 8"
    assert Policy().too_slow_memory_s == 60 and Policy().too_slow_memory_max_s == 480


def test_lateness_is_counted_over_the_recent_window_of_the_segment():
    """In the lab a busy phase's late departures, counted over the whole
    segment, kept the quiet phase after it at TDF 8 (5% late of all the
    segment's against lower_late's 2%). Counted over the last late_window_s,
    the quiet phase lowers once the busy one has left the window."""
    quiet = [0.1] * 60
    late = [(100, 30)] * 13 + [(100, 0)] * 47      # late first, then none
    changes = replay(Policy(1, 8), quiet, {}, start_tdf=4, late=late)[0]
    kinds = [(old, new, kind) for _, old, new, kind in changes]
    assert kinds[0] == (4, 8, "raise")
    assert (8, 4, "lower") in kinds
    lowered_at = next(t for t, old, new, kind in changes if kind == "lower")
    # Not before the late departures (until 26 real s) left the 20 s window.
    assert lowered_at >= 26 + Policy().late_window_s
    whole = replay(Policy(1, 8, late_window_s=1e9), quiet, {}, start_tdf=4, late=late)[0]
    assert [kind for *_, kind in whole] == ["raise"]


def test_late_departures_raise_and_backlog_alone_does_not():
    quiet = [0.1] * 30
    changes = replay(Policy(1, 8), quiet, {}, start_tdf=1, late=[(100, 20)] * 30)[0]
    assert changes and changes[0][3] == "raise"
    s = Signals(intervals=3, dom0_busy=0.3, dom0_peak=0.3, backlog_bytes=10**6, drops=500)
    assert decide(Policy(1, 8), 2, s, 60) is not None     # slack: the queue is the link's
    assert decide(Policy(1, 8), 2, s, 60).kind == "lower"
    assert "backlog 1000000 B, drops 500" in s.text()


def test_a_standing_queue_that_carries_too_little_raises_and_blocks_lowering():
    """The verdict's throughput signal, read over the decision's window: a
    vif whose queue stood beyond its delay line while htb throttled, and
    that sent 70% of its real-time rate, raises the TDF; at 95% it does not,
    and a quiet host lowers as before."""
    def samples(carried: float) -> list[LoadSample]:
        rate, sent, over = 10e6, 0.0, 0
        out: list[LoadSample] = []
        for i in range(4):
            out.append(LoadSample(
                real=100 + i * STEP, dom0_vcpu_s=[0.2 * i * STEP],
                qdiscs={"vif3.0": QdiscStats(0, 0, over, 200_000, int(sent))},
                vif_nodes={"vif3.0": "srv"}, rates_bps={"vif3.0": rate},
                delays_s={"vif3.0": 0.01}))
            sent += carried * rate / 8 * STEP
            over += 50
        return out

    short = signals_from_samples(samples(0.70))
    assert short.throughput_share == pytest.approx(0.70)
    assert short.throughput_link == "toward srv"
    decision = decide(Policy(1, 8), 2, short, 60)
    assert decision is not None and decision.kind == "raise" and decision.new == 4
    assert "link toward srv: carried 70.0% of its rate with a standing queue < 95%" \
        in decision.reason
    assert "toward srv carried 70.0% of its rate" in short.text()
    enough = signals_from_samples(samples(0.98))
    assert enough.throughput_share == pytest.approx(0.98)
    assert decide(Policy(1, 8), 2, enough, 60).kind == "lower"


def test_no_lowering_within_the_hold_after_a_raise():
    """In the lab a busy phase's lull lowered the TDF 12 real s after it was
    raised (one dwell) and it was raised again 5 s later: after a raise,
    lowering waits lower_hold_s; after a lower, the next one only a dwell."""
    quiet = Signals(intervals=3, dom0_busy=0.2, dom0_peak=0.3)
    policy = Policy(1, 16)
    assert decide(policy, 4, quiet, 12, after_raise=True) is None
    assert decide(policy, 4, quiet, policy.lower_hold_s - 1, after_raise=True) is None
    assert decide(policy, 4, quiet, policy.lower_hold_s, after_raise=True).new == 2
    assert decide(policy, 4, quiet, 12, after_raise=False).new == 2
    assert "not within 30 real s of a raise" in policy.describe()


def test_the_controller_holds_after_its_own_raise_not_after_the_scenarios_change():
    busy_then_quiet = [0.95] * 6 + [0.1] * 40
    changes, _ = replay(Policy(1, 16), busy_then_quiet, {}, start_tdf=1)
    (raised_at, _, _, kind), (lowered_at, _, _, kind2), *_ = changes
    assert (kind, kind2) == ("raise", "lower")
    assert lowered_at - raised_at >= Policy().lower_hold_s
    # A change by the scenario after the raise starts a segment of its own:
    # no hold, only the dwell.
    now = [0.0]
    clock = VirtualClock(1, clock=lambda: now[0])
    monitor = FakeMonitor()
    made: list[tuple[float, str]] = []
    ctl = Controller(Policy(1, 16), monitor, clock,
                     lambda new, reason: (made.append((now[0], reason.split(":")[0])),
                                          clock.set_tdf(new, reason=reason)),
                     now=lambda: now[0], say=lambda msg: None)
    used = 0.0
    for i, share in enumerate([0.95] * 6 + [0.1] * 12):
        used += share * STEP if i else 0.0
        monitor.samples.append(LoadSample(real=now[0], dom0_vcpu_s=[used]))
        ctl.step()
        if len(made) == 1 and len(clock.timeline()) == 2:
            # Its reason happens to begin as a raise's does: not ours all the same.
            clock.set_tdf(clock.tdf, reason="raise for the scenario's bulk phase")
        now[0] += STEP
    assert [kind for _, kind in made] == ["raise", "lower"]
    assert made[1][0] - made[0][0] < Policy().lower_hold_s


def sample_run(shares: list[float]) -> list[LoadSample]:
    used, out = 0.0, []
    for i in range(len(shares) + 1):
        if i:
            used += shares[i - 1] * STEP
        out.append(LoadSample(real=100 + i * STEP, dom0_vcpu_s=[used]))
    return out


def test_the_verdict_covers_every_segment():
    # 30 quiet intervals, then 3 saturated ones at a new TDF: 9% of the run
    # (below the monitor's 10%), all of the second segment.
    samples = sample_run([0.2] * 30 + [1.0] * 3)
    report = judge(samples)
    assert report.verdict == "ok"
    timeline = [{"tdf": 2.0, "real_s": 0.0, "virtual_s": 0.0},
                {"tdf": 4.0, "real_s": 60.0, "virtual_s": 30.0, "reason": "raise: ..."}]
    segments = judge_segments(samples, timeline, started=100.0, interval_s=STEP)
    assert [s["verdict"] for s in segments] == ["ok", "degraded"]
    cover_segments(report, segments)
    assert report.verdict == "degraded"
    assert report.reasons == ["segment 2 (TDF 4 from real 60 s): Dom0 CPU busy >= 55% in "
                              "100% of the run (limit 10%; peak 100%)"]
    # A segment too short to judge is listed, not held against the run.
    short = judge_segments(sample_run([0.2] * 30), [*timeline[:1], {**timeline[1],
                                                                  "real_s": 59.0}], 100.0,
                           STEP)
    assert short[1]["verdict"] == "unknown"
    ok = judge(sample_run([0.2] * 30))
    cover_segments(ok, short)
    assert ok.verdict == "ok"


@pytest.mark.parametrize("spec, problem", [
    ("auto:20-2", "MIN 20 is above MAX 2"),
    ("auto:2", "want MIN-MAX after `auto:`"),
    ("auto:0.5-4", "TDF 0.5 is out of range"),
    ("auto:x-4", "is not a number"),
    ("auto:", "want MIN-MAX"),
])
def test_bad_auto_specs_are_one_line_naming_the_fix(spec, problem):
    with pytest.raises(AdaptiveSpecError, match="e.g. auto:2-20") as info:
        parse_spec(spec)
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_auto_specs_parse():
    assert parse_spec("auto") == Policy()
    assert parse_spec("auto:2-20") == Policy(2, 20)
    assert parse_spec("AUTO:1.5-3") == Policy(1.5, 3)
    assert parse_spec("10") is None
    assert Policy(2, 20).spec() == "auto:2-20"


def test_the_cli_shows_the_policy_and_refuses_bad_specs(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SELENA_CACHE", str(tmp_path / "cache"))   # no calibration here
    rc, out, err = run_cli(capsys, "plan", "--topo", "single,2", "--tdf", "auto:2-20")
    assert rc == 0, err
    assert "# adaptive TDF auto:2-20: every 2 real s" in out
    assert "starts at TDF 2" in out and "at least 10 real s between changes" in out
    rc, out, err = run_cli(capsys, "validate", "--topo", "single,2", "--tdf", "auto:2-20")
    assert rc == 0 and "TDF 2 (auto:2-20: starting there)" in out, err
    rc, out, err = run_cli(capsys, "run", "--topo", "single,2", "--tdf", "auto:9-3")
    assert rc == 2
    error = [line for line in err.splitlines() if "auto:9-3" in line]
    assert len(error) == 1 and "MIN 9 is above MAX 3" in error[0] and "auto:2-20" in error[0]
    rc, out, err = run_cli(capsys, "deploy", "--topo", "single,2", "--tdf", "auto")
    assert rc == 1 and "deploy runs no scenario to adapt to" in err


def pair(delay: str = "5ms") -> Topology:
    topo = Topology("pair", tdf=1)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit", delay=delay)
    return topo


def test_experiment_refuses_auto_without_monitor_or_with_a_bad_spec(fake_xen, tmp_path):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with pytest.raises(ExperimentError, match="turn the monitor on"):
        Experiment(pair(), tdf="auto", backend=backend, templates=None, monitor=False)
    with pytest.raises(ScenarioError, match="tdf: TDF 'auto:3-': want MIN-MAX.*e.g. auto:2-20"):
        Experiment(pair(), tdf="auto:3-", backend=backend, templates=None)
    real = pair()
    real.nodes["h2"].cpu_time = "real"
    with pytest.raises(ExperimentError, match=r"node h2 has cpu_time='real' with 1 vCPU\(s\), "
                       "which Xen can cap up to TDF 100 only; give auto:1-100 or less"):
        Experiment(real, tdf="auto:1-200", backend=backend, templates=None)
    assert Experiment(real, tdf="auto:1-100", backend=backend, templates=None).adaptive == \
        Policy(1, 100)
    # A cpu_share's limit is the host's to tell (the fake Dom0 has 2 CPUs):
    # refused by check(), before any guest.
    shared = pair()
    shared.nodes["h2"].cpu_share = 0.25
    exp = Experiment(shared, tdf="auto:1-60", backend=backend, templates=None)
    with pytest.raises(ExperimentError, match=r"node h2 has cpu_share=0.25 of 2 CPUs, which Xen "
                       "can cap up to TDF 50 only; give auto:1-50 or less"):
        exp.check()
    assert fake_xen.domains == {}


def wait_for(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_calibrated_start_climbs_the_ladder_until_the_floor_is_within_half_the_target():
    policy = Policy(1, 16)
    tdf, why = calibrated_start(policy, 1, lambda t: 0.12 / t)
    assert tdf == 8                     # +12, +6 and +3 % are above 2.5 %; +1.5 % is not
    assert why == ("start of auto:1-16 at TDF 8: this host's calibration predicts an RTT "
                   "excess of +12.0% at TDF 1 and +1.5% at 8 (start within 2.5%)")
    assert calibrated_start(Policy(1, 4), 1, lambda t: 0.12 / t)[0] == 4     # MAX bounds it
    tdf, why = calibrated_start(policy, 2, lambda t: 0.01 / t)
    assert tdf == 2
    assert why.endswith("clamped into MIN-MAX (predicted RTT excess +0.5% there)")


def test_an_adaptive_experiment_starts_above_the_floor_this_hosts_calibration_predicts(
        fake_xen, tmp_path, monkeypatch, caplog):
    """The floor of h1-h2 (one link, 100 ms configured) by a calibration of
    9 ms real + 1 ms virtual per link: +10 % at TDF 1, +5.5 % at 2, +3.25 %
    at 4, +2.1 % at 8: an auto:1-16 run starts at 8; without a
    calibration, or without the latency probe, at MIN."""
    monkeypatch.setenv("SELENA_CACHE", str(tmp_path / "cache"))
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)

    def start(**kwargs) -> Experiment:
        return Experiment(pair(delay="50ms"), tdf="auto:1-16", backend=backend, templates=None,
                          **kwargs)

    assert start().topology.tdf == 1
    Calibration(9.0, 0.0, 1.0, 40.0, {}, [], [], host="lab").save(default_calibration_path())
    exp = start()
    assert exp.topology.tdf == 8
    assert exp.adaptive_start_calibrated
    assert exp.adaptive_start_reason.startswith(
        "start of auto:1-16 at TDF 8: this host's calibration predicts an RTT excess of "
        "+10.0% at TDF 1 and +2.1% at 8")
    assert start(latency_probe=False).topology.tdf == 1
    assert not start(latency_probe=False).adaptive_start_calibrated
    # A damaged one is said, and the run starts at MIN as without one.
    default_calibration_path().write_text('{"version": 2, "wake_ms": "9"}')
    with caplog.at_level(logging.WARNING, logger="selena.experiment"):
        assert start().topology.tdf == 1
    assert 'wake_ms is "9", not a finite number (run `selena calibrate` again); going ' \
        "without the calibrated latency floor" in caplog.text


def test_plan_says_where_a_calibration_starts_an_adaptive_run(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SELENA_CACHE", str(tmp_path / "cache"))
    Calibration(9.0, 0.0, 1.0, 40.0, {}, [], [], host="lab").save(default_calibration_path())
    # h1-s1-h2, 50 ms a link: 200 ms configured, two links' floor.
    rc, out, err = run_cli(capsys, "plan", "--topo", "single,2", "--link", "tc,delay=50ms",
                           "--tdf", "auto:1-16")
    assert rc == 0, err
    assert "starts at TDF 8\n# start of auto:1-16 at TDF 8: this host's calibration " \
        "predicts an RTT excess of +10.0% at TDF 1 and +2.1% at 8" in out, out


def test_an_adaptive_run_raises_under_load_lowers_after_and_records_why(fake_xen, tmp_path,
                                                                        monkeypatch):
    """Against the fake Dom0: h2's vCPU saturated -> the TDF climbs 2 -> 4
    -> 8 through set_tdf (guests and links re-dilated); h2 quiet -> it comes
    down. meta.json keeps each change's reason and signals, fidelity.json
    the segments."""
    monkeypatch.setenv("SELENA_CACHE", str(tmp_path / "cache"))   # no calibration: start at MIN
    fake_xen.cpu_share.update({"Domain-0": 0.05, "selena-pair-h2": 1.0})
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    policy = Policy(2, 8, raise_busy=0.75, dwell_s=1.0, lower_hold_s=1.0, interval_s=0.25,
                    window=2)
    said: list[str] = []
    with Experiment(pair(), tdf=policy, backend=backend, templates=None,
                    out=tmp_path / "out", ready_timeout=20, monitor_interval=0.5,
                    progress=said.append) as exp:
        assert exp.tdf == 2
        assert wait_for(lambda: exp.tdf == 8), said
        assert {d.tdf for d in fake_xen.domains.values()} == {"8"}
        fake_xen.cpu_share["selena-pair-h2"] = 0.0
        assert wait_for(lambda: exp.tdf < 8), said
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    timeline = meta["tdf_timeline"]
    assert [seg["tdf"] for seg in timeline[:4]] == [2, 4, 8, 4]
    assert timeline[0]["reason"].startswith("start of auto:2-8")
    assert timeline[1]["reason"].startswith("raise: vCPU of h2 busy")
    assert timeline[3]["reason"].startswith("lower: every busy peak <= 45%")
    decisions = meta["adaptive"]["decisions"]
    assert meta["adaptive"]["policy"]["spec"] == "auto:2-8"
    assert [(d["from"], d["to"]) for d in decisions[:3]] == [(2, 4), (4, 8), (8, 4)]
    assert decisions[0]["signals"]["guest_busy"]["h2"] >= 0.75
    assert any(line.startswith("adaptive TDF 2 -> 4 (raise: vCPU of h2 busy") for line in said)
    assert tdf_timeline_line(timeline[:3]).startswith(
        "TDF timeline (2 change(s)): 2 at virtual 0.0 s -> 4 at virtual ")
    fidelity = json.loads((tmp_path / "out/fidelity.json").read_text())
    assert [s["tdf"] for s in fidelity["segments"][:3]] == [2, 4, 8]
    assert fidelity["verdict"] == "degraded"


def test_a_pause_while_changing_is_not_a_failure_and_nothing_is_decided_paused():
    now = [0.0]
    clock = VirtualClock(1, clock=lambda: now[0])
    monitor = FakeMonitor([LoadSample(real=t, dom0_vcpu_s=[t]) for t in (0.0, 2, 4, 6, 8, 10,
                                                                        12)])
    applied: list[float] = []

    def apply(new: float, reason: str) -> None:
        clock.freeze()                          # the scenario paused meanwhile
        raise ExperimentError("the experiment is paused: resume it before changing the TDF")

    ctl = Controller(Policy(1, 8), monitor, clock, apply, now=lambda: now[0],
                     say=applied.append)
    now[0] = 12.0
    assert ctl.step() is None and applied == [] and ctl.decisions == []
    assert ctl.step() is None                   # frozen: not even a decision
    clock.thaw()

    def failing(new: float, reason: str) -> None:
        raise ExperimentError("set-tdf 2: guest h1 refused")

    ctl._apply = failing
    monitor.samples += [LoadSample(real=t, dom0_vcpu_s=[t]) for t in (14.0, 16, 18, 20, 22, 24)]
    now[0] = 24.0                               # the dwell after the resume's segment
    with pytest.raises(ExperimentError, match="refused"):
        ctl.step()
