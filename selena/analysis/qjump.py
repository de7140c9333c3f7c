"""The QJump-in-SELENA reproduction's tables (seed 004), from the bundles of
scenarios/qjump_ptpd.py and scenarios/qjump_ping.py, beside the paper's
figures.

    python -m selena.analysis.qjump build/results/qjump
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

from selena.errors import AnalysisError

log = logging.getLogger(__name__)

# The paper's Table I: maximum absolute PTPd clock offset (us).
PAPER_PTPD = {"testbed": (20.626, 1240.142), "1": (158.547, None), "10": (131.354, 31045.623),
              "20": (139.284, 1406.18), "50": (32.033, None)}
# The paper's Figure 13 (text): median ping latency (us) in SELENA at TDF 20.
PAPER_PING = {"idle": 44.9, "iperf": 1060.0, "iperf + QJump": 86.2}


def _metric(bundle: Path, name: str) -> list[float]:
    path = bundle / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise AnalysisError(f"{path}: cannot read ({exc})") from exc
    if name not in metrics:
        raise AnalysisError(f"{path}: no metric {name}")
    return list(metrics[name]["samples"])


def ptpd_rows(root: Path) -> list[str]:
    rows = ["| PTPd max abs offset (us) | idle: selena | idle: paper | bulk: selena "
            "(iperf) | bulk: paper (Hadoop) |", "|---|---|---|---|---|"]
    paper_idle, paper_bulk = PAPER_PTPD["testbed"]
    rows.append(f"| testbed (paper) | | {paper_idle:g} | | {paper_bulk:g} |")
    bundles = sorted(root.glob("ptpd-tdf*"), key=lambda p: float(p.name.removeprefix(
        "ptpd-tdf")))
    if not bundles:
        raise AnalysisError(f"{root}: no ptpd-tdf* bundles")
    for bundle in bundles:
        tdf = bundle.name.removeprefix("ptpd-tdf")
        idle = max(_metric(bundle, "ptpd_max_abs_offset_idle_us"))
        bulk = max(_metric(bundle, "ptpd_max_abs_offset_bulk_us"))
        paper = PAPER_PTPD.get(tdf, (None, None))
        rows.append(f"| TDF {tdf} | {idle:.1f} | {_text(paper[0])} | {bulk:.1f} | "
                    f"{_text(paper[1])} |")
    return rows


def ping_rows(root: Path) -> list[str]:
    rows = ["| ping RTT (us), TDF 20 | selena median | selena p99 | paper median |",
            "|---|---|---|---|"]
    cases = (("idle", "ping", "ping_idle_rtt_us"), ("iperf", "ping", "ping_bulk_rtt_us"),
             ("iperf + QJump", "ping-prio", "ping_bulk_rtt_us"))
    for label, run, metric in cases:
        samples = sorted(_metric(root / run, metric))
        if not samples:
            raise AnalysisError(f"{root / run}: {metric} has no samples")
        p99 = samples[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]
        rows.append(f"| {label} | {statistics.median(samples):.1f} | {p99:.1f} | "
                    f"{PAPER_PING[label]:g} |")
    return rows


def _text(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        tables = [ping_rows(args.root), ptpd_rows(args.root)]
    except AnalysisError as exc:
        log.error("qjump: %s", exc)
        return 1
    for rows in tables:
        log.info("%s\n", "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
