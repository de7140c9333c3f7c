"""The fidelity monitor: is this run faithful, or did the host fall behind?

Time dilation keeps an experiment faithful only while the host keeps up in
real time with what the guests ask of it. While the scenario runs, a thread
samples (every `interval` real seconds, through the backend) the CPU
seconds of every Dom0 vCPU and of each guest's vCPUs, and the counters of
every Dom0-side shaping qdisc. At the end:

- a guest whose vCPUs were busy >= 95 % of an interval in 10 % or more of the
  intervals could not run as fast as its virtual time asked: "vCPU of h1 busy
  >= 95% in 40% of the run";
- the same for Dom0's vCPUs together (they shape, switch and carry every
  packet): "Dom0 CPU saturated in 40% of the run";
- each shaped vif's sent packets, drops, overlimits and largest backlog are
  recorded (drops at a full queue are the emulated link's behaviour, not a
  fidelity problem, so they inform and do not decide).

The verdict is "ok", "degraded" (with those reasons) or "unknown" (too few
samples, or sampling failed: the reason says which). The monitor's own cost
(real seconds spent sampling, and the CPU seconds of its thread) is recorded
with it; `--no-monitor` turns it off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from selena.backends.base import LoadSample
from selena.errors import SelenaError

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0
BUSY = 0.95              # an interval with this share of CPU time used is saturated
SATURATED_SHARE = 0.10   # this share of saturated intervals makes the run degraded
MIN_INTERVALS = 2


@dataclass
class FidelityReport:
    verdict: str                                   # ok | degraded | unknown
    reasons: list[str] = field(default_factory=list)
    intervals: int = 0
    interval_s: float = DEFAULT_INTERVAL_S
    dom0_busy: list[float] = field(default_factory=list)           # per interval, 0..1
    guest_busy: dict[str, list[float]] = field(default_factory=dict)
    links: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampling_real_s: float = 0.0
    monitor_cpu_s: float = 0.0

    def line(self) -> str:
        text = f"fidelity: {self.verdict}"
        if self.reasons:
            text += ": " + "; ".join(self.reasons)
        return text + (f" ({self.intervals} intervals of {self.interval_s:g} s; monitor cost "
                       f"{self.monitor_cpu_s:.2f} CPU s)")

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": self.reasons, "intervals": self.intervals,
                "interval_s": self.interval_s, "busy_threshold": BUSY,
                "saturated_share": SATURATED_SHARE,
                "dom0_busy": [round(x, 4) for x in self.dom0_busy],
                "guest_busy": {k: [round(x, 4) for x in v] for k, v in self.guest_busy.items()},
                "links": self.links, "monitor": {"sampling_real_s": round(self.sampling_real_s, 4),
                                                 "cpu_s": round(self.monitor_cpu_s, 4)}}


def busy_series(samples: list[LoadSample]) -> tuple[list[float], dict[str, list[float]]]:
    """Per interval: the share of Dom0's vCPU time used (all its vCPUs
    together) and each guest's (all its vCPUs together)."""
    dom0: list[float] = []
    guests: dict[str, list[float]] = {}
    for a, b in zip(samples, samples[1:], strict=False):
        real = b.real - a.real
        if real <= 0:
            continue
        share = _share(a.dom0_vcpu_s, b.dom0_vcpu_s, real)
        if share is not None:
            dom0.append(share)
        for node, after in b.guest_vcpu_s.items():
            before = a.guest_vcpu_s.get(node)
            if before is None:
                continue
            share = _share(before, after, real)
            if share is not None:
                guests.setdefault(node, []).append(share)
    return dom0, guests


def _share(before: list[float], after: list[float], real: float) -> float | None:
    if not after or len(before) != len(after):
        return None
    used = sum(max(0.0, y - x) for x, y in zip(before, after, strict=True))
    return min(1.0, used / (real * len(after)))


def judge(samples: list[LoadSample], interval_s: float = DEFAULT_INTERVAL_S,
          failure: str | None = None) -> FidelityReport:
    dom0, guests = busy_series(samples)
    report = FidelityReport("ok", intervals=max(0, len(samples) - 1), interval_s=interval_s,
                            dom0_busy=dom0, guest_busy=guests)
    report.links = _links(samples)
    if failure:
        report.verdict = "unknown"
        report.reasons.append(f"sampling failed: {failure}")
        return report
    if report.intervals < MIN_INTERVALS:
        report.verdict = "unknown"
        report.reasons.append(f"run too short to judge ({report.intervals} interval(s) of "
                              f"{interval_s:g} s)")
        return report
    for node, series in sorted(guests.items()):
        share = _saturated(series)
        if share >= SATURATED_SHARE:
            report.reasons.append(f"vCPU of {node} busy >= {BUSY:.0%} in {share:.0%} of the run")
    share = _saturated(dom0)
    if share >= SATURATED_SHARE:
        report.reasons.append(f"Dom0 CPU saturated in {share:.0%} of the run")
    if report.reasons:
        report.verdict = "degraded"
    return report


def _saturated(series: list[float]) -> float:
    return sum(1 for x in series if x >= BUSY) / len(series) if series else 0.0


def _links(samples: list[LoadSample]) -> dict[str, dict[str, Any]]:
    if len(samples) < 2:
        return {}
    first, last = samples[0], samples[-1]
    links = {}
    for vif, end in last.qdiscs.items():
        start = first.qdiscs.get(vif)
        if start is None:
            continue
        links[vif] = {"node": last.vif_nodes.get(vif, ""),
                      "sent_packets": end.sent_packets - start.sent_packets,
                      "drops": end.drops - start.drops,
                      "overlimits": end.overlimits - start.overlimits,
                      "max_backlog_bytes": max(s.qdiscs[vif].backlog_bytes for s in samples
                                               if vif in s.qdiscs)}
    return links


class Monitor:
    """Samples in a thread of its own from start() to stop()."""

    def __init__(self, sample: Callable[[], LoadSample],
                 interval_s: float = DEFAULT_INTERVAL_S):
        self._sample = sample
        self.interval_s = interval_s
        self.samples: list[LoadSample] = []
        self.failure: str | None = None
        self.sampling_real_s = 0.0
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Monitor:
        self._take()
        self._thread = threading.Thread(target=self._loop, name="selena-fidelity",
                                        daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        cpu0 = time.thread_time()
        while not self._stop.wait(self.interval_s) and self.failure is None:
            self._take()
        self.cpu_s += time.thread_time() - cpu0

    def _take(self) -> None:
        begin = time.monotonic()
        try:
            self.samples.append(self._sample())
        except SelenaError as exc:
            # Recorded and shown with the verdict ("unknown"), never dropped.
            self.failure = str(exc)
            log.warning("fidelity monitor stopped: %s", exc)
        self.sampling_real_s += time.monotonic() - begin

    def stop(self) -> FidelityReport:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=60)
            self._thread = None
            if self.failure is None:
                self._take()            # the end of the run is an interval too
        report = judge(self.samples, self.interval_s, self.failure)
        report.sampling_real_s = self.sampling_real_s
        report.monitor_cpu_s = self.cpu_s
        return report
