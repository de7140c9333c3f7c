"""The front door's demo (`make demo`, `selena lab demo --tdf N`): the
shipped scenario scenarios/dilation_demo.py swept in the lab at TDF 1 and at
TDF N (`selena sweep --tdf 1,N`), then one table side by side: configured
against guest-measured RTT and TCP throughput, error, real seconds, and the
sweep's verdicts, KS tests and recommended TDF (analysed on the host, which
has scipy). It passes when every error at TDF N is within 5%; the TDF 1 row
shows what real-time emulation gives on this machine.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from selena import units
from selena.results import read_metrics

SCENARIO = "scenarios/dilation_demo.py"
RESULTS = "build/results/demo"
TOLERANCE_PCT = 5.0
METRICS = (("rtt_ms", "RTT"), ("tcp_mbit", "TCP"))


def bundle(tdf: float) -> str:
    return f"{RESULTS}/runs/tdf{units.tdf_text(tdf)}-r1"


def tdfs(tdf: float) -> list[float]:
    return [1.0] if tdf == 1 else [1.0, tdf]


def commands(tdf: float) -> str:
    """What Dom0 runs: one sweep over TDF 1 and TDF N."""
    listed = ",".join(units.tdf_text(t) for t in tdfs(tdf))
    return (f"rm -rf {shlex.quote(RESULTS)}; selena sweep {SCENARIO} --tdf {listed} "
            f"--out {shlex.quote(RESULTS)} --no-plots; echo \"demo-sweep=$?\"")


@dataclass
class Row:
    tdf: float
    values: dict[str, tuple[float, float, float]]     # metric -> (expected, median, error %)
    real_s: float
    status: str


def read_rows(share: Path, tdf: float) -> list[Row]:
    rows = []
    for t in tdfs(tdf):
        path = share / bundle(t)
        meta_path = path / "meta.json"
        if not meta_path.exists():
            rows.append(Row(t, {}, 0.0, "no results"))
            continue
        meta = json.loads(meta_path.read_text())
        metrics = read_metrics(path)
        values = {}
        for name, _ in METRICS:
            m = metrics.get(name)
            if m and m.get("n"):
                values[name] = (m["expected"], m["median"], m["error_pct"])
        rows.append(Row(t, values, meta["real_seconds"], meta["status"]))
    return rows


def _link(rows: list[Row]) -> str:
    """The configured link, read back from the expected values the scenario
    recorded (RTT: twice the one-way delay; TCP: the rate less headers)."""
    for row in rows:
        if "rtt_ms" in row.values and "tcp_mbit" in row.values:
            delay = row.values["rtt_ms"][0] / 2
            rate = row.values["tcp_mbit"][0] * 1514 / 1448
            return f"{rate:.3g} Mbit/s with {delay:.3g} ms one-way delay"
    return "the demo link"


def report(rows: list[Row], tdf: float) -> tuple[str, bool]:
    """The side-by-side table and whether TDF N is within the tolerance."""
    lines = [f"time dilation demo: h1 -> h2, {_link(rows)}, measured inside the guests",
             f"{'TDF':>6}  {'RTT set':>8} {'measured':>9} {'error':>7}  "
             f"{'TCP set':>8} {'measured':>9} {'error':>7}  {'real s':>7}"]
    for row in rows:
        cells = []
        for name, _ in METRICS:
            if name in row.values:
                expected, median, error = row.values[name]
                unit = "ms" if name == "rtt_ms" else "Mb/s"
                cells.append(f"{expected:>6.1f}{unit:<2} {median:>7.1f}{unit:<2} "
                             f"{error:>+6.1f}%")
            else:
                cells.append(f"{'-':>8} {'-':>9} {'-':>7}")
        lines.append(f"{units.tdf_text(row.tdf):>6}  {cells[0]}  {cells[1]}  "
                     f"{row.real_s:>7.1f}" + ("" if row.status == "ok" else f"  ({row.status})"))
    top = rows[-1]
    ok = top.status == "ok" and all(
        name in top.values and abs(top.values[name][2]) <= TOLERANCE_PCT for name, _ in METRICS)
    if ok:
        verdict = (f"RESULT: at TDF {units.tdf_text(tdf)} RTT and throughput are within "
                   f"{TOLERANCE_PCT:g}% of the link's configuration")
    else:
        verdict = (f"RESULT: FAILED: at TDF {units.tdf_text(tdf)} not every figure is within "
                   f"{TOLERANCE_PCT:g}% (raise the TDF for more headroom)")
    return "\n".join(lines + [verdict]), ok


def sweep_report(share: Path) -> str:
    """The sweep's own analysis of the demo runs: verdicts, KS, recommendation;
    summary.csv and plots next to the bundles."""
    from selena.errors import AnalysisError
    from selena.sweep import analyze, plot, write_summary

    out = share / RESULTS
    try:
        analysis = analyze(out)
    except AnalysisError as exc:
        return f"sweep analysis: {exc}"
    write_summary(analysis.rows, out / "summary.csv")
    lines = [analysis.report(), f"summary: {out / 'summary.csv'}"]
    try:
        lines += [f"plot: {p}" for p in plot(analysis, out)]
    except AnalysisError as exc:
        lines.append(str(exc))
    return "\n".join(lines)
