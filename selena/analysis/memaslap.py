"""memaslap's report (`memcaslap` in Debian's libmemcached-tools): the
request latency statistics it prints at the end of a run with `-S`.

    Total Statistics (389180 events)
       Min:        10
       Max:      4994
       Avg:       164
       Geo:    143.33
       Std:    121.25
       Log2 Dist:
           4:     1317     5716    10894   154270
           8:   177137    37599     1348      662

Times are microseconds of the client's clock (a guest's virtual time). In
the Log2 Dist rows the label is the first bucket's exponent and each count
is the bucket after the one before: bucket k holds the requests that took
more than 2^(k-1) and at most 2^k us (memaslap's own rounding up to a power
of two), so its histogram gives the CDF at the powers of two.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from selena.errors import AnalysisError

_HEADER = re.compile(r"^(Get|Set|Total) Statistics \((\d+) events\)\s*$")
_FIELD = re.compile(r"^\s*(Min|Max|Avg|Geo|Std):\s+([0-9.]+)\s*$")
_DIST_ROW = re.compile(r"^\s*(\d+):((?:\s+\d+)+)\s*$")
_RUN = re.compile(r"^Run time: ([0-9.]+)s Ops: (\d+) TPS: (\d+)")
_MISSES = re.compile(r"^get_misses: (\d+)\s*$")


@dataclass
class LatencyStats:
    """One of memaslap's summaries (Get, Set or Total), in microseconds."""
    events: int
    min_us: float = 0.0
    max_us: float = 0.0
    mean_us: float = 0.0
    geo_us: float = 0.0
    std_us: float = 0.0
    log2_counts: dict[int, int] = field(default_factory=dict)

    def cdf(self) -> list[tuple[float, float]]:
        """(latency bound in us, fraction of requests at or below it) at each
        power of two from the first non-empty bucket to the last."""
        return log2_cdf(self.log2_counts)


def log2_cdf(counts: Mapping[int, float]) -> list[tuple[float, float]]:
    """The CDF of a power-of-two histogram ({k: requests in (2^(k-1), 2^k] us})
    at each power of two from the first non-empty bucket to the last."""
    total = sum(counts.values())
    if not total:
        return []
    first = min(k for k, c in counts.items() if c)
    points, seen = [], 0.0
    for exponent in range(first, max(counts) + 1):
        seen += counts.get(exponent, 0)
        points.append((float(2 ** exponent), seen / total))
    return points


@dataclass
class MemaslapReport:
    stats: dict[str, LatencyStats]          # "Get", "Set", "Total"
    run_time_s: float
    ops: int
    tps: int
    get_misses: int

    @property
    def total(self) -> LatencyStats:
        return self.stats["Total"]


def parse(text: str) -> MemaslapReport:
    """The end-of-run summaries of a memaslap run with -S; AnalysisError
    if they are missing (a run without -S, or one that failed)."""
    stats: dict[str, LatencyStats] = {}
    current: LatencyStats | None = None
    in_dist = False
    run: tuple[float, int, int] | None = None
    misses: int | None = None
    for line in text.splitlines():
        if header := _HEADER.match(line):
            current = LatencyStats(events=int(header.group(2)))
            stats[header.group(1)] = current
            in_dist = False
            continue
        if match := _RUN.match(line):
            run = (float(match.group(1)), int(match.group(2)), int(match.group(3)))
            continue
        if match := _MISSES.match(line):
            misses = int(match.group(1))
            continue
        if current is None:
            continue
        if match := _FIELD.match(line):
            name = {"Min": "min_us", "Max": "max_us", "Avg": "mean_us", "Geo": "geo_us",
                    "Std": "std_us"}[match.group(1)]
            setattr(current, name, float(match.group(2)))
        elif line.strip() == "Log2 Dist:":
            in_dist = True
        elif in_dist and (row := _DIST_ROW.match(line)):
            first = int(row.group(1))
            for offset, count in enumerate(row.group(2).split()):
                current.log2_counts[first + offset] = int(count)
        elif not line.strip():
            in_dist, current = False, None
    if "Total" not in stats:
        raise AnalysisError("memaslap printed no 'Total Statistics' summary (run it with -S "
                            "set to its run time)")
    for name, summary in stats.items():
        counted = sum(summary.log2_counts.values())
        if counted != summary.events:
            raise AnalysisError(f"memaslap {name} Statistics: {summary.events} events but "
                                f"{counted} in its Log2 Dist")
    if run is None or misses is None:
        raise AnalysisError("memaslap printed no 'get_misses:' or 'Run time: ... Ops: ... "
                            "TPS: ...' line")
    return MemaslapReport(stats, *run, get_misses=misses)
