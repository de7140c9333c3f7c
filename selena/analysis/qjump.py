"""The QJump-in-SELENA reproduction's tables and plots (seed 004), from the
bundles of scenarios/qjump_ping.py, qjump_memcached.py and qjump_ptpd.py,
beside the paper's figures.

    python -m selena.analysis.qjump build/results/qjump [--plots DIR]

The bundles are ROOT/ping, ROOT/ping-prio, ROOT/memcached (and, when run,
memcached-prio, memcached-real, memcached-c8 and memcached-c8-prio) and
ROOT/ptpd-tdf<N>. The plots (PNG,
matplotlib) are the latency CDFs of ping and memcached and PTPd's offset
timelines.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from selena.analysis.fct import ecdf
from selena.analysis.memaslap import log2_cdf
from selena.analysis.ptpd import OffsetSample, offsets, window_maxima
from selena.errors import AnalysisError

log = logging.getLogger(__name__)

# Savefig metadata: no matplotlib version in the PNG, so it is reproducible.
PNG_METADATA: dict[str, Any] = {"Software": None}

# The paper's Table I: maximum absolute PTPd clock offset (us).
PAPER_PTPD = {"testbed": (20.626, 1240.142), "1": (158.547, None), "10": (131.354, 31045.623),
              "20": (139.284, 1406.18), "50": (32.033, None)}
# The paper's Figure 13 (text): median ping latency (us) in SELENA at TDF 20.
PAPER_PING = {"idle": 44.9, "iperf": 1060.0, "iperf + QJump": 86.2}
# The paper's Table II: memcached request latency (us), mean and standard
# deviation, on the testbed and in SELENA at TDF 10; "bulk" is beside Hadoop.
PAPER_MEMCACHED = {"idle": {"testbed": (329.42, 62.05), "selena": (435.34, 142.52)},
                   "bulk": {"testbed": (369.09, 158.08), "selena": (2733.97, 3303.93)}}
# The memcached runs (bundle name, what differs), in table order; the first
# is the paper's setting and must be there.
MEMCACHED_RUNS = (("memcached", "paper's workload, window scaled"),
                  ("memcached-prio", "priority queue"),
                  ("memcached-real", "cpu_time=real"), ("memcached-c8", "8 in flight"),
                  ("memcached-c8-prio", "8 in flight, priority queue"))
PHASES = (("idle", "idle"), ("bulk", "beside iperf"))
PTPD_BUNDLE = re.compile(r"ptpd-tdf(\d+(?:\.\d+)?)")


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
    """Table I, recomputed from each run's PTPd output in its bundle with
    selena.analysis.ptpd (so every run is judged by the same rule, whichever
    version recorded it)."""
    rows = ["| PTPd max abs offset (us) | idle: selena | idle: paper | bulk: selena "
            "(iperf) | bulk: paper (Hadoop) |", "|---|---|---|---|---|"]
    paper_idle, paper_bulk = PAPER_PTPD["testbed"]
    rows.append(f"| testbed (paper) | | {paper_idle:g} | | {paper_bulk:g} |")
    for tdf, bundle in ptpd_bundles(root):
        samples, marks = ptpd_timeline(bundle)
        try:
            idle, bulk = window_maxima(samples, *marks)
        except AnalysisError as exc:
            raise AnalysisError(f"{bundle}: {exc}") from exc
        paper = PAPER_PTPD.get(tdf, (None, None))
        rows.append(f"| TDF {tdf} | {idle:.1f} | {_text(paper[0])} | {bulk:.1f} | "
                    f"{_text(paper[1])} |")
    return rows


def ping_rows(root: Path) -> list[str]:
    rows = ["| ping RTT (us), TDF 20 | selena median | selena p5 / p95 | paper median |",
            "|---|---|---|---|"]
    cases = (("idle", "ping", "ping_idle_rtt_us"), ("iperf", "ping", "ping_bulk_rtt_us"),
             ("iperf + QJump", "ping-prio", "ping_bulk_rtt_us"))
    for label, run, metric in cases:
        samples = sorted(_metric(root / run, metric))
        if not samples:
            raise AnalysisError(f"{root / run}: {metric} has no samples")
        p5, p95 = (samples[min(len(samples) - 1, round(q * (len(samples) - 1)))]
                   for q in (0.05, 0.95))
        rows.append(f"| {label} | {statistics.median(samples):.1f} | {p5:.1f} / {p95:.1f} | "
                    f"{PAPER_PING[label]:g} |")
    return rows


def ptpd_bundles(root: Path) -> list[tuple[str, Path]]:
    """(TDF as written, bundle) of each ROOT/ptpd-tdf<N>, by TDF."""
    found = [(m.group(1), p) for p in root.iterdir()
             if p.is_dir() and (m := PTPD_BUNDLE.fullmatch(p.name))] if root.is_dir() else []
    if not found:
        raise AnalysisError(f"{root}: no ptpd-tdf<N> bundles")
    return sorted(found, key=lambda item: float(item[0]))


def memcached_rows(root: Path) -> list[str]:
    rows = ["| memcached latency (us), TDF 10 | network | selena mean | selena std | "
            "requests/s | paper SELENA mean | std | paper testbed mean | std |",
            "|---|---|---|---|---|---|---|---|---|"]
    for run, label in MEMCACHED_RUNS:
        bundle = root / run
        if run != MEMCACHED_RUNS[0][0] and not bundle.is_dir():
            continue
        for phase, network in PHASES:
            mean = _metric(bundle, f"memcached_{phase}_mean_us")[0]
            std = _metric(bundle, f"memcached_{phase}_std_us")[0]
            tps = _metric(bundle, f"memcached_{phase}_tps")[0]
            paper = PAPER_MEMCACHED[phase]
            rows.append(f"| {label} | {network} | {mean:.0f} | {std:.0f} | {tps:.0f} | "
                        f"{paper['selena'][0]:g} | {paper['selena'][1]:g} | "
                        f"{paper['testbed'][0]:g} | {paper['testbed'][1]:g} |")
    return rows


def ptpd_timeline(bundle: Path, slave: str = "h1") -> tuple[list[OffsetSample], list[float]]:
    """The slave's offset samples from its PTPd output in the bundle, and the
    scenario's window marks (the slave's clock read by its `date` commands:
    idle start, bulk start, bulk end)."""
    ptpd_out: Path | None = None
    marks: list[tuple[int, float]] = []
    for record in sorted((bundle / "nodes" / slave).glob("*.json")):
        info = json.loads(record.read_text())
        stdout = record.with_suffix(".stdout")
        if str(info.get("command", "")).startswith("exec ptpd -s"):
            ptpd_out = stdout
        elif info.get("command") == "date +%s.%N" and stdout.exists():
            marks.append((int(info.get("seq", 0)), float(stdout.read_text())))
    if ptpd_out is None or not ptpd_out.exists():
        raise AnalysisError(f"{bundle}: no PTPd slave output on {slave}")
    if len(marks) != 3:
        raise AnalysisError(f"{bundle}: {len(marks)} `date` marks on {slave}, want 3 (idle "
                            "start, bulk start, bulk end)")
    return offsets(ptpd_out.read_text(errors="replace").splitlines()), \
        [t for _, t in sorted(marks)]


def plot(root: Path, out_dir: Path) -> list[Path]:
    """qjump_ping_cdf.png, qjump_memcached_cdf.png and qjump_ptpd_offsets.png."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise AnalysisError(f"the QJump plots need matplotlib ({exc}): pip install "
                            "matplotlib") from exc
    out_dir.mkdir(parents=True, exist_ok=True)

    def figure() -> tuple[Any, Any]:
        fig = Figure(figsize=(6.4, 4.2), dpi=120)
        FigureCanvasAgg(fig)
        return fig, fig.add_subplot()

    def save(fig: Any, ax: Any, name: str) -> Path:
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="best", fontsize="x-small")
        fig.tight_layout()
        path = out_dir / name
        # No version or date in the file: the same data gives the same bytes.
        fig.savefig(str(path), format="png", metadata=PNG_METADATA)
        return path

    paths = []
    fig, ax = figure()
    pings = {"idle": ("ping", "ping_idle_rtt_us"), "iperf": ("ping", "ping_bulk_rtt_us"),
             "iperf + priority queue": ("ping-prio", "ping_bulk_rtt_us")}
    paper = dict(zip(pings, PAPER_PING.values(), strict=True))
    for colour, (label, (run, metric)) in enumerate(pings.items()):
        tdf = _tdf(root / run)
        _cdf_line(ax, f"{label}, TDF {tdf}", ecdf(_metric(root / run, metric)), steps=True,
                  color=f"C{colour}")
        ax.axvline(paper[label], color=f"C{colour}", linestyle=":", linewidth=1,
                   label=f"paper's median, {label}: {paper[label]:g} us")
    _note(ax, "load: iperf3 H8 to H11, 100 Mbit/s links (the paper's 10 Gbit/s / 100)")
    ax.set_xscale("log")
    ax.set_xlabel("ping round trip (us, virtual, log scale)")
    ax.set_ylabel("CDF (fraction of pings)")
    ax.set_title("QJump paper, Figure 13: ping H3 to H11 beside bulk traffic")
    paths.append(save(fig, ax, "qjump_ping_cdf.png"))

    fig, ax = figure()
    # A colour per run, solid idle and dashed beside iperf.
    for colour, (run, label) in enumerate(MEMCACHED_RUNS):
        if (root / run).is_dir():
            for (phase, network), style in zip(PHASES, ("-", "--"), strict=True):
                _cdf_line(ax, f"{label}, {network}",
                          log2_cdf(dict(enumerate(
                              _metric(root / run, f"memcached_{phase}_log2_hist")))),
                          steps=False, color=f"C{colour}", linestyle=style)
    for phase, style in (("idle", "-."), ("bulk", ":")):
        mean = PAPER_MEMCACHED[phase]["selena"][0]
        ax.axvline(mean, color="0.3", linestyle=style, linewidth=1,
                   label=f"paper's SELENA mean, {dict(PHASES)[phase]}: {mean:g} us")
    _note(ax, f"TDF {_tdf(root / MEMCACHED_RUNS[0][0])}; load: memaslap, the paper's 128 "
              "requests in flight scaled with the rates unless said; bulk: iperf3 H8 to H11")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("memcached request latency (us, virtual; memaslap's power-of-two buckets)")
    ax.set_ylabel("CDF (fraction of requests)")
    ax.set_title("QJump paper, Figures 10, 11 and 14: memcached request latency")
    paths.append(save(fig, ax, "qjump_memcached_cdf.png"))

    fig, ax = figure()
    for tdf, bundle in ptpd_bundles(root):
        samples, marks = ptpd_timeline(bundle)
        shown = [s for s in samples if marks[0] <= s.t < marks[2] and s.offset_s != 0.0]
        line = ax.plot([s.t - marks[0] for s in shown], [abs(s.offset_s) * 1e6 for s in shown],
                       linewidth=0.8, label=f"TDF {tdf}")[0]
        ax.axvline(marks[1] - marks[0], color=line.get_color(), linestyle=":", linewidth=1)
        paper_idle = PAPER_PTPD.get(tdf, (None, None))[0]
        if paper_idle is not None:
            ax.axhline(paper_idle, color=line.get_color(), linestyle="--", linewidth=0.8,
                       label=f"paper's idle maximum at TDF {tdf}: {paper_idle:g} us")
    _note(ax, "load: idle, then iperf3 H12 to H1 from the dotted line on")
    ax.set_yscale("log")
    ax.set_xlabel("slave's clock since the idle window (virtual s; dotted: bulk iperf starts)")
    ax.set_ylabel("|offset from master| (us, log scale)")
    ax.set_title("QJump paper, Table I's runs: PTPd slave offset over time")
    paths.append(save(fig, ax, "qjump_ptpd_offsets.png"))
    return paths


def _cdf_line(ax: Any, label: str, points: list[tuple[float, float]], steps: bool,
              **style: Any) -> None:
    if not points:
        raise AnalysisError(f"{label}: no samples to plot")
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if steps:
        ax.step([xs[0], *xs], [0.0, *ys], where="post", label=label, **style)
    else:
        ax.plot(xs, ys, marker="o", markersize=3, label=label, **style)
    ax.set_ylim(0, 1.02)


def _tdf(bundle: Path) -> str:
    """The run's TDF as its meta.json gives it ("?" for a bundle without one)."""
    try:
        return f"{float(json.loads((bundle / 'meta.json').read_text())['tdf']):g}"
    except (OSError, ValueError, KeyError, TypeError):
        return "?"


def _note(ax: Any, text: str) -> None:
    """A legend line that is not a curve (the load, the TDF)."""
    ax.plot([], [], " ", label=text)


def _text(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="write the plots (PNG) into DIR")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        tables = [ping_rows(args.root), memcached_rows(args.root), ptpd_rows(args.root)]
        plots = plot(args.root, args.plots) if args.plots else []
    except AnalysisError as exc:
        log.error("qjump: %s", exc)
        return 1
    for rows in tables:
        log.info("%s\n", "\n".join(rows))
    for path in plots:
        log.info("plot: %s", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
