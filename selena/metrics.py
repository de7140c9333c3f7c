"""Named results a scenario records (`exp.record`): a scalar or samples, an
optional expected value and unit. They go to metrics.json in the results
bundle and are printed at the end of a run."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from selena.errors import ScenarioError

NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
# The TCP port an iperf3 server listens on without -p (exp.wait_listening's
# for a server started just before its client).
IPERF3_PORT = 5201


@dataclass
class Metric:
    name: str
    samples: list[float] = field(default_factory=list)
    expected: float | None = None
    unit: str = ""

    def summary(self) -> dict[str, object]:
        data: dict[str, object] = {"unit": self.unit, "expected": self.expected,
                                   "n": len(self.samples), "samples": self.samples}
        if self.samples:
            ordered = sorted(self.samples)
            median = statistics.median(ordered)
            data.update(median=median, mean=statistics.fmean(ordered),
                        min=ordered[0], max=ordered[-1],
                        p5=percentile(ordered, 5), p95=percentile(ordered, 95),
                        stddev=statistics.stdev(ordered) if len(ordered) > 1 else 0.0)
            if self.expected:
                data["error_pct"] = 100.0 * (median / self.expected - 1.0)
        return data

    def line(self) -> str:
        """One line for people: median (n, p5..p95), expected and error."""
        s = self.summary()
        if not self.samples:
            return f"{self.name}: no samples"
        unit = f" {self.unit}" if self.unit else ""
        text = f"{self.name}: {s['median']:.4g}{unit}"
        if len(self.samples) > 1:
            text += f" (median of {s['n']}, p5 {s['p5']:.4g}, p95 {s['p95']:.4g})"
        if self.expected is not None:
            text += f"; expected {self.expected:.4g}{unit}"
            if "error_pct" in s:
                text += f", error {s['error_pct']:+.1f}%"
        return text


def percentile(ordered: list[float], pct: float) -> float:
    """Linear-interpolated percentile of sorted samples."""
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * pct / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def make_metric(name: str, value: float | Iterable[float], expected: float | None,
                unit: str) -> Metric:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ScenarioError(f"record: metric name {name!r} must be letters, digits, '_', '.', "
                            "'-', starting with a letter")
    raw = [value] if isinstance(value, int | float) else list(value)
    samples = []
    for item in raw:
        if isinstance(item, bool) or not isinstance(item, int | float) \
                or not math.isfinite(item):
            raise ScenarioError(f"record {name}: {item!r} is not a finite number")
        samples.append(float(item))
    if expected is not None and (isinstance(expected, bool)
                                 or not isinstance(expected, int | float)
                                 or not math.isfinite(expected)):
        raise ScenarioError(f"record {name}: expected {expected!r} is not a finite number")
    return Metric(name, samples, None if expected is None else float(expected), str(unit))


def ping_rtts_ms(output: bytes | str) -> list[float]:
    """Every round trip (ms) ping printed (`time=12.3 ms`)."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", text)]


def iperf3_interval_mbit(report: bytes | str) -> list[float]:
    """Throughput (Mbit/s) of each report interval of `iperf3 -J`, the
    omitted ones (`-O`, slow start) left out. A report of an error is a
    ScenarioError naming it: iperf3 3.12 exits 0 on one ("unable to connect
    to server"), so the exit status alone does not tell."""
    parsed = json.loads(report)
    if parsed.get("error"):
        raise ScenarioError(f"iperf3: {parsed['error']}")
    intervals = parsed["intervals"]
    return [i["sum"]["bits_per_second"] / 1e6 for i in intervals
            if not i["sum"].get("omitted")]
