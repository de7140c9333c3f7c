"""Flow completion times (FCT) from `flowgen client` output: parsing, empirical
CDFs, summary statistics, and the CDF table and plot of Figure 11.

    records = read_flowgen_csv(Path("h1.stdout"))                  # list[FlowRecord]
    analyze({"ideal": ideal_records, "pica8-p3290": pica8_records}, out_dir)

or from a shell:

    python -m selena.analysis.fct --out results/fct ideal=ideal.csv pica8-p3290=pica8.csv

writes into `out_dir`:

    fct_cdf.csv       profile,fct_s,cdf     one row per distinct FCT of each series
    fct_summary.csv   profile,n,failed,median_s,p90_s,p99_s,over_1s,over_3s
    fct_cdf.png       the CDFs on a log x axis (needs matplotlib, imported lazily)

Statistics are over the flows that completed (`status == "ok"`); flows that
timed out or failed are counted separately (`failed`) and are not part of the
CDF. Percentiles interpolate linearly between order statistics (numpy's default);
`over_1s` / `over_3s` are the shares of completed flows with FCT strictly above
1 s / 3 s, where TCP SYN retransmissions put their steps.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from selena.errors import AnalysisError, FlowCsvError

log = logging.getLogger(__name__)

FLOWGEN_HEADER = ("flow", "start_ns", "end_ns", "fct_s", "bytes", "status")
CDF_HEADER = ("profile", "fct_s", "cdf")
SUMMARY_HEADER = ("profile", "n", "failed", "median_s", "p90_s", "p99_s", "over_1s",
                  "over_3s")
CDF_CSV = "fct_cdf.csv"
SUMMARY_CSV = "fct_summary.csv"
CDF_PNG = "fct_cdf.png"


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """One flow as reported by `flowgen client` (times are guest CLOCK_MONOTONIC)."""

    flow: int
    start_ns: int
    end_ns: int
    fct_s: float
    bytes: int
    status: str          # "ok", "timeout" or "error:<ERRNO>"

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class FctSummary:
    """Statistics of the completed flows of one series (seconds, shares in 0..1)."""

    n: int
    failed: int
    median_s: float
    p90_s: float
    p99_s: float
    over_1s: float
    over_3s: float


# ------------------------------------------------------------------ parsing

def _int(value: str, name: str, source: str, line: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise FlowCsvError(source, line, f"{name} is not an integer: {value!r}") from None
    if number < 0:
        raise FlowCsvError(source, line, f"{name} is negative: {value!r}")
    return number


def _record(row: list[str], source: str, line: int) -> FlowRecord:
    if len(row) != len(FLOWGEN_HEADER):
        raise FlowCsvError(source, line,
                           f"expected {len(FLOWGEN_HEADER)} fields, got {len(row)}: {row!r}")
    flow = _int(row[0], "flow", source, line)
    start_ns = _int(row[1], "start_ns", source, line)
    end_ns = _int(row[2], "end_ns", source, line)
    try:
        fct_s = float(row[3])
    except ValueError:
        raise FlowCsvError(source, line, f"fct_s is not a number: {row[3]!r}") from None
    if not math.isfinite(fct_s) or fct_s < 0:
        raise FlowCsvError(source, line, f"fct_s must be finite and >= 0: {row[3]!r}")
    if end_ns < start_ns:
        raise FlowCsvError(source, line, f"end_ns {end_ns} is before start_ns {start_ns}")
    nbytes = _int(row[4], "bytes", source, line)
    status = row[5]
    if not (status in ("ok", "timeout") or (status.startswith("error:") and len(status) > 6)):
        raise FlowCsvError(source, line,
                           f"status must be ok, timeout or error:<NAME>, got {status!r}")
    return FlowRecord(flow, start_ns, end_ns, fct_s, nbytes, status)


def parse_flowgen_csv(text: str, source: str = "<flowgen output>") -> list[FlowRecord]:
    """Parses `flowgen client` stdout; raises FlowCsvError naming the bad line."""
    rows = csv.reader(io.StringIO(text))
    records: list[FlowRecord] = []
    header_seen = False
    for row in rows:
        line = rows.line_num
        if not row or all(not field.strip() for field in row):
            continue
        if not header_seen:
            if tuple(row) != FLOWGEN_HEADER:
                raise FlowCsvError(source, line,
                                   f"expected header {','.join(FLOWGEN_HEADER)}, got {row!r}")
            header_seen = True
            continue
        records.append(_record(row, source, line))
    if not header_seen:
        raise FlowCsvError(source, 1, "empty: no flowgen header")
    return records


def read_flowgen_csv(path: Path) -> list[FlowRecord]:
    return parse_flowgen_csv(Path(path).read_text(), source=str(path))


def completion_times(records: Iterable[FlowRecord]) -> list[float]:
    """FCTs (seconds) of the flows that completed."""
    return [r.fct_s for r in records if r.ok]


# --------------------------------------------------------------- statistics

def ecdf(values: Iterable[float]) -> list[tuple[float, float]]:
    """Empirical CDF as (x, P(X <= x)) for each distinct value, ascending."""
    ordered = sorted(values)
    n = len(ordered)
    points: list[tuple[float, float]] = []
    for i, x in enumerate(ordered, start=1):
        if i < n and ordered[i] == x:
            continue                      # ties: only the last one carries the step
        points.append((x, i / n))
    return points


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between order statistics."""
    if not values:
        raise AnalysisError("percentile of an empty series")
    if not 0 <= q <= 100:
        raise AnalysisError(f"percentile must be in 0..100, got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(fcts: Sequence[float], failed: int = 0) -> FctSummary:
    """Summary of completed flows' FCTs; `failed` counts the others."""
    if not fcts:
        nan = math.nan
        return FctSummary(0, failed, nan, nan, nan, nan, nan)
    n = len(fcts)
    return FctSummary(
        n=n, failed=failed,
        median_s=percentile(fcts, 50), p90_s=percentile(fcts, 90),
        p99_s=percentile(fcts, 99),
        over_1s=sum(f > 1.0 for f in fcts) / n, over_3s=sum(f > 3.0 for f in fcts) / n)


def summarize_records(records: Sequence[FlowRecord]) -> FctSummary:
    return summarize(completion_times(records), failed=sum(not r.ok for r in records))


# ------------------------------------------------------------------ outputs

def write_cdf_csv(series: Mapping[str, Sequence[float]], path: Path) -> Path:
    """Writes `profile,fct_s,cdf` for each named series of FCTs (seconds)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CDF_HEADER)
        for profile, fcts in series.items():
            for x, p in ecdf(fcts):
                out.writerow([profile, repr(x), repr(p)])
    return path


def read_cdf_csv(path: Path) -> dict[str, list[tuple[float, float]]]:
    """Reads a file written by write_cdf_csv back into {profile: [(fct_s, cdf)]}."""
    path = Path(path)
    series: dict[str, list[tuple[float, float]]] = {}
    with path.open(newline="") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None or tuple(header) != CDF_HEADER:
            raise AnalysisError(f"{path}, line 1: expected header {','.join(CDF_HEADER)}")
        for row in rows:
            try:
                profile, x, p = row
                series.setdefault(profile, []).append((float(x), float(p)))
            except ValueError:
                raise AnalysisError(f"{path}, line {rows.line_num}: bad row {row!r}") from None
    return series


def write_summary_csv(summaries: Mapping[str, FctSummary], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(SUMMARY_HEADER)
        for profile, s in summaries.items():
            out.writerow([profile, s.n, s.failed, repr(s.median_s), repr(s.p90_s),
                          repr(s.p99_s), repr(s.over_1s), repr(s.over_3s)])
    return path


# TCP's SYN retransmissions (1 s, then 3 s): Figure 11's steps. Other
# figures (the fat tree's) have no such steps and pass marks=().
SYN_MARKS = (1.0, 3.0)


def plot_cdf(series: Mapping[str, Sequence[float]], path: Path, *,
             title: str = "Flow completion time CDF",
             marks: Sequence[float] = SYN_MARKS) -> Path:
    """Plots each series' FCT CDF on a log x axis into a PNG (matplotlib, Agg);
    `marks`: dotted lines where TCP's SYN retransmissions put steps."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise AnalysisError(
            f"plotting the FCT CDF needs matplotlib ({exc}): pip install matplotlib") from exc
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plotted = 0
    for profile, fcts in series.items():
        positive = [f for f in fcts if f > 0]
        if len(positive) < len(fcts):
            log.warning("%s: %d FCT(s) <= 0 s left off the log-scale plot", profile,
                        len(fcts) - len(positive))
        points = ecdf(positive)
        if not points:
            log.warning("%s: no completed flows to plot", profile)
            continue
        xs = [x for x, _ in points]
        ys = [p for _, p in points]
        ax.step([xs[0], *xs], [0.0, *ys], where="post", label=f"{profile} (n={len(positive)})")
        plotted += 1
    if plotted:
        ax.set_xscale("log")
        for k, mark in enumerate(marks):
            ax.axvline(mark, color="0.5", linestyle=":", linewidth=1,
                       label=None if k else "TCP SYN retransmission (1 s, 3 s)")
        ax.legend(loc="lower right")
    ax.set_xlabel("flow completion time (s, log scale)")
    ax.set_ylabel("CDF (fraction of flows)")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(str(path), format="png", metadata={"Software": None})
    return path


def analyze(series: Mapping[str, Sequence[FlowRecord]], out_dir: Path, *, plot: bool = True,
            title: str = "Flow completion time CDF",
            marks: Sequence[float] = SYN_MARKS) -> dict[str, FctSummary]:
    """Writes fct_cdf.csv, fct_summary.csv and (with `plot`) fct_cdf.png into out_dir."""
    out_dir = Path(out_dir)
    fcts = {profile: completion_times(records) for profile, records in series.items()}
    summaries = {profile: summarize_records(records) for profile, records in series.items()}
    write_cdf_csv(fcts, out_dir / CDF_CSV)
    write_summary_csv(summaries, out_dir / SUMMARY_CSV)
    if plot:
        plot_cdf(fcts, out_dir / CDF_PNG, title=title, marks=marks)
    for profile, s in summaries.items():
        log.info("%s: %d flows ok, %d failed; FCT median %.4g s, p90 %.4g s, p99 %.4g s; "
                 "%.1f%% > 1 s, %.1f%% > 3 s", profile, s.n, s.failed, s.median_s, s.p90_s,
                 s.p99_s, 100 * s.over_1s, 100 * s.over_3s)
    return summaries


def read_series(path: Path) -> list[FlowRecord]:
    """One series: a flowgen CSV, or every fct-*.csv in a directory (one per
    generating host, as in a fat-tree run's bundle)."""
    if not path.is_dir():
        return read_flowgen_csv(path)
    files = sorted(path.glob("fct-*.csv"))
    if not files:
        raise AnalysisError(f"{path}: no fct-*.csv in this directory")
    return [record for file in files for record in read_flowgen_csv(file)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m selena.analysis.fct",
        description="FCT CDF table, summary and plot from flowgen client CSV files")
    parser.add_argument("series", nargs="+", metavar="PROFILE=CSV",
                        help="a series name and the flowgen output it comes from: a CSV "
                             "file, or a directory (a run's bundle) whose fct-*.csv are "
                             "taken together")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--title", default="Flow completion time CDF")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--no-syn-marks", action="store_true",
                        help="no 1 s / 3 s SYN retransmission lines (not Figure 11)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths: dict[str, Path] = {}
    for item in args.series:
        profile, sep, path = item.partition("=")
        if not sep or not profile or not path:
            parser.error(f"expected PROFILE=CSV, got {item!r}")
        paths[profile] = Path(path)
    try:
        series = {profile: read_series(path) for profile, path in paths.items()}
        analyze(series, args.out, plot=not args.no_plot, title=args.title,
                marks=() if args.no_syn_marks else SYN_MARKS)
    except OSError as exc:
        log.error("%s: %s", exc.filename, exc.strerror)
        return 1
    except AnalysisError as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
