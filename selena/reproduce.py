"""The paper reproductions as named, one-command runs (`selena reproduce
NAME`, `make reproduce-all`; docs/reproductions.md).

Each reproduction is a list of steps (a `selena run` or `selena sweep` each)
run inside the lab in one boot. A run writes into a FRESH directory,
`build/results/<name>/<UTC date>/`, never over an older one; when every step
has finished, docs/results/<name>/ is refreshed from it (`collect`): per
bundle meta.json, metrics.json (samples capped), fidelity.json, a summary.csv
of its metrics, the flowgen CSVs and the few command outputs a figure is
drawn from, plus provenance.json (the commands, commit, date and real times).
`make figures` (selena.analysis.figures) draws docs/figures and the docs'
tables from docs/results alone.
"""

from __future__ import annotations

import csv
import datetime
import json
import logging
import math
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selena import units
from selena.errors import ResultsError, ScenarioError, UnitError
from selena.runner import Runner

log = logging.getLogger(__name__)

# An interrupted reproduction gives its `selena lab run` this long to power
# the lab off before it is killed: the lab session waits up to 60 s for Dom0
# to stop before it kills QEMU.
LAB_STOP_GRACE_S = 90.0

OUT = "{out}"               # replaced by the step's directory inside the run's
MARK = "@@selena-reproduce"  # the lab script's progress marks (parsed, not shown)
# docs/results/<this>: a run of every reproduction in one go, written when the
# last has ended (the index in docs/reproductions.md says so).
ALL_RUN = "reproduce-all.json"
MAX_SAMPLES = 20_000        # a metric with more samples keeps only its summary
SUMMARY_COLUMNS = ("metric", "unit", "n", "median", "p5", "p95", "mean", "stddev",
                   "expected", "error_pct")


@dataclass(frozen=True)
class Step:
    """One `selena` command inside the lab (or another program: a lab
    benchmark writing a bundle); OUT in argv is its directory."""

    name: str
    argv: tuple[str, ...]
    env: tuple[str, ...] = ()        # NAME=VALUE for the scenario (SELENA_FCT_RATE)
    program: tuple[str, ...] = ("selena",)

    def command(self, out: Path) -> list[str]:
        argv = [*self.program, *(str(out) if a == OUT else a for a in self.argv)]
        return ["env", *self.env, *argv] if self.env else argv


@dataclass(frozen=True)
class Reproduction:
    name: str
    paper: str                       # what of which paper it reproduces
    steps: tuple[Step, ...]
    minutes: int                     # about how long in the lab (2 cores, TCG)
    lab_args: tuple[str, ...] = ()   # `selena lab run` options (a larger machine)
    # Commands whose output a figure is drawn from, kept in docs/results
    # (nodes/<node>/<n>.json and .stdout), by command prefix.
    keep_outputs: tuple[str, ...] = ()
    figures: tuple[str, ...] = field(default=())   # docs/figures it draws

    @property
    def lab_timeout_s(self) -> int:
        """`selena lab run --timeout`: twice the estimate, at least the lab's
        default hour (which alone would stop QJump's two hours midway)."""
        return max(3600, 2 * 60 * self.minutes)


def _sweep(scenario: str, tdfs: str) -> tuple[str, ...]:
    return ("sweep", f"scenarios/{scenario}", "--tdf", tdfs, "--baseline", "mininet",
            "--out", OUT)


def _qjump_steps(ptpd_tdfs: Sequence[str]) -> tuple[Step, ...]:
    def run(scenario: str, *params: str, tdf: str | None = None) -> tuple[str, ...]:
        argv = ["run", f"scenarios/{scenario}"]
        argv += ["--tdf", tdf] if tdf else []
        for param in params:
            argv += ["--param", param]
        return (*argv, "--out", OUT)

    steps = [Step("ping", run("qjump_ping.py")),
             Step("ping-prio", run("qjump_ping.py", "prio=1")),
             Step("memcached", run("qjump_memcached.py")),
             Step("memcached-prio", run("qjump_memcached.py", "prio=1")),
             Step("memcached-real", run("qjump_memcached.py", "cpu=real")),
             Step("memcached-c8", run("qjump_memcached.py", "concurrency=8")),
             Step("memcached-c8-prio", run("qjump_memcached.py", "concurrency=8", "prio=1"))]
    for tdf in ptpd_tdfs:
        # Above TDF 20 the paper's 20 s windows take too long: 10 s ones.
        short = ("settle_s=15", "idle_s=10", "bulk_s=10") if float(tdf) > 20 else ()
        steps.append(Step(f"ptpd-tdf{tdf}", run("qjump_ptpd.py", *short, tdf=tdf)))
    return tuple(steps)


def _adaptive_steps(tdfs: str) -> tuple[Step, ...]:
    """VT-Mininet's comparison: a sweep over a fixed grid (its TDF 1 run and
    the run at the TDF it recommends are the fixed runs; the recommendation
    is in its recommendation.json), the lab's latency calibration, then the
    adaptive run over the grid's range."""
    try:
        grid = [units.tdf(t) for t in tdfs.split(",") if t.strip()]
    except UnitError as exc:
        raise ScenarioError(f"adaptive TDFs {tdfs!r}: {exc}") from None
    if len(grid) < 2 or grid[0] != 1 or grid != sorted(set(grid)):
        raise ScenarioError(f"adaptive TDFs {tdfs!r}: want increasing TDFs from 1, e.g. "
                            "1,2,4,8,16 (TDF 1 is one of the three runs)")
    scenario = "scenarios/adaptive_phases.py"
    spec = f"auto:{units.tdf_text(grid[0])}-{units.tdf_text(grid[-1])}"
    # The adaptive run starts where the lab's calibration puts the latency
    # floor (selena.adaptive.calibrated_start); the sweep's runs are fixed.
    return (Step("sweep", ("sweep", scenario, "--tdf", ",".join(units.tdf_text(t) for t in grid),
                           "--out", OUT)),
            Step("calibrate", ("calibrate", "--bundle", OUT)),
            Step("adaptive", ("run", scenario, "--tdf", spec, "--out", OUT)))


def adaptive_minutes(tdfs: str, virtual_s: float = 63.0, deploy_s: float = 60.0) -> int:
    """About how long `reproduce adaptive` takes: every grid TDF's run and
    the adaptive one (at most the grid's top, about its mean here: the
    quiet two thirds low, the busy third high), each with a deploy."""
    grid = [units.tdf(t) for t in tdfs.split(",") if t.strip()]
    adaptive = virtual_s * (2 * grid[0] + grid[-1]) / 3 + 60      # + climbing and dwell
    calibrate_s = 120.0
    return math.ceil((sum(grid) * virtual_s + adaptive + (len(grid) + 1) * deploy_s
                      + calibrate_s) / 60)
def _star_run(tdf: str, clients: int, client_mbit: str) -> tuple[str, ...]:
    return ("run", "scenarios/star_throughput.py", "--tdf", tdf, *_star_params(
        clients, client_mbit), "--out", OUT)


def _star_params(clients: int, client_mbit: str) -> tuple[str, ...]:
    # Every flow at once, 5 virtual seconds: the paper's per-client boxes
    # with all clients running (its Figures 7 and 8).
    return ("--param", f"clients={clients}", "--param", f"client_mbit={client_mbit}",
            "--param", "stagger_s=0", "--param", "last_s=5")


def _starscale_steps(rates: str, clients: str, tdfs: str) -> tuple[Step, ...]:
    """Figure 7: 4 clients at each client link rate, TDF 20 (the paper's);
    Figures 8 and 10: each client count swept over the TDFs (Figure 8 is
    its TDF 20 runs, Figure 10 the most clients each TDF carries)."""
    steps = [Step(f"fig7-{rate}mbit", _star_run("20", 4, rate))
             for rate in _csv(rates)]
    steps += [Step(f"clients{n}", ("sweep", "scenarios/star_throughput.py", "--tdf", tdfs,
                                   *_star_params(int(n), "10"), "--out", OUT))
              for n in _csv(clients)]
    return tuple(steps)


def _csv(text: str) -> list[str]:
    return [x for x in text.replace(" ", ",").split(",") if x]


def _positive_int(text: str) -> int:
    value = int(text)                   # ValueError: not a whole number
    if value < 1:
        raise ValueError(text)
    return value


def _positive_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(text)
    return value


def _each(name: str, items: Sequence[str], want: str, check: Callable[[str], Any]) -> None:
    """Params' check of one option's values: a one-line error naming the
    option, the value and what it wants."""
    option = "--" + name.replace("_", "-")
    if not items:
        raise ScenarioError(f"reproduce: {option} is empty: want {want}")
    for item in items:
        try:
            check(item)
        except (ValueError, UnitError) as exc:
            why = f" ({exc})" if isinstance(exc, UnitError) else ""
            raise ScenarioError(f"reproduce: {option} {item!r}{why}: want {want}") from None


@dataclass(frozen=True)
class Params:
    """The reproductions' scale, each reduced to run in minutes on a 2-core
    lab (the paper's scale is a value of these on a larger machine). The one
    place their defaults live: `selena reproduce`'s options default to them
    and `make reproduce-*` passes only the variables that are set."""

    star_tdfs: str = "1,5,10"
    fattree_tdfs: str = "1,5,10,20"
    fattree_memory: int = 6144
    qjump_ptpd_tdfs: Sequence[str] = ("1", "10", "20", "50")
    fct_rate: float = 50.0
    fct_scale: float = 10.0
    adaptive_tdfs: str = "1,2,4,8,16,32"
    starscale_rates: str = "5,10,20,40"
    starscale_clients: str = "2,4,8"
    starscale_tdfs: str = "5,10,20"
    deploy_hosts: str = "13,26,52"
    deploy_memory: int = 6144
    mflops_vms: str = "1,2,4"
    bandwidth_tdfs: str = "5,10,20"
    bandwidth_refine: int = 2
    spacing_rates: str = "10,20,40,80,160"
    spacing_tdfs: str = "1,10"

    def __post_init__(self) -> None:
        """Every value checked before anything runs: a bad one would
        otherwise surface inside the lab, minutes after its boot."""
        for name in ("star_tdfs", "fattree_tdfs", "starscale_tdfs", "bandwidth_tdfs",
                     "spacing_tdfs", "qjump_ptpd_tdfs"):
            value = getattr(self, name)
            items = _csv(value) if isinstance(value, str) else [str(v) for v in value]
            _each(name, items, "TDFs from 1 to 1000, e.g. 1,10", units.tdf)
        for name in ("starscale_clients", "deploy_hosts", "mflops_vms"):
            _each(name, _csv(getattr(self, name)), "whole numbers from 1, e.g. 1,2,4",
                  _positive_int)
        for name in ("starscale_rates", "spacing_rates"):
            _each(name, _csv(getattr(self, name)), "rates in Mbit/s above 0, e.g. 10,20",
                  _positive_number)
        for name in ("fct_rate", "fct_scale"):
            _each(name, [str(getattr(self, name))], "a number above 0", _positive_number)
        for name in ("fattree_memory", "deploy_memory"):
            _each(name, [str(getattr(self, name))], "the lab's RAM, whole MB, e.g. 6144",
                  _positive_int)
        if self.bandwidth_refine not in range(0, 5):
            raise ScenarioError(f"reproduce: --bandwidth-refine {self.bandwidth_refine!r}: "
                                "want 0 to 4 bisections (default 2)")


DEFAULTS = Params()


def reproductions(params: Params = DEFAULTS) -> dict[str, Reproduction]:
    """Every reproduction by name, in `make reproduce-all`'s order."""
    return {r.name: r for r in (
        Reproduction("star", "SELENA Figures 4 and 5 (star topology)",
                     (Step("sweep", _sweep("star_throughput.py", params.star_tdfs)),), 10,
                     figures=("star_fig4_client.png", "star_fig5_aggregate.png")),
        Reproduction("fct", "SELENA Figure 11 (an OpenFlow switch's control plane)",
                     (Step("run", ("run", "scenarios/switch_model_fct.py", "--tdf", "10",
                                   # the probe's pings would be packet_ins the paper's
                                   # switch never saw
                                   "--no-latency-probe", "--out", OUT),
                           env=(f"SELENA_FCT_RATE={params.fct_rate:g}",
                                f"SELENA_FCT_SCALE={params.fct_scale:g}")),),
                     20, figures=("fct_cdf.png",)),
        Reproduction("qjump", "QJump in SELENA: Tables I and II, Figures 10-14",
                     _qjump_steps(params.qjump_ptpd_tdfs), 135,
                     lab_args=("--with", "debian"),     # its hosts boot the debian images
                     keep_outputs=("exec ptpd -s", "date +%s.%N"),
                     figures=("qjump_ping_cdf.png", "qjump_memcached_cdf.png",
                              "qjump_ptpd_offsets.png")),
        Reproduction("fattree", "SELENA Figure 6, Tables 2 and 3 (fat tree)",
                     (Step("sweep", _sweep("fat_tree_fct.py", params.fattree_tdfs)),), 41,
                     lab_args=("--memory", str(params.fattree_memory)),
                     figures=("fattree_fct_cdf.png",)),
        Reproduction("adaptive", "VT-Mininet's adaptive TDF against fixed TDFs (seed 002)",
                     _adaptive_steps(params.adaptive_tdfs), adaptive_minutes(params.adaptive_tdfs),
                     figures=("adaptive_phases.png",)),
        Reproduction("starscale", "SELENA Figures 7, 8 and 10 (star scalability)",
                     _starscale_steps(params.starscale_rates, params.starscale_clients,
                                      params.starscale_tdfs),
                     40, figures=("star_fig7_link_rate.png", "star_fig8_clients.png",
                                  "star_fig10_clients_per_tdf.png")),
        Reproduction("deploy", "SELENA section 3: cold boot of a 52-node topology",
                     tuple(Step(f"hosts{n}", ("run", "scenarios/deploy_scale.py", "--param",
                                              f"hosts={n}", "--out", OUT))
                           for n in _csv(params.deploy_hosts)),
                     13, lab_args=("--memory", str(params.deploy_memory)),
                     figures=("deploy_cold_boot.png",)),
        Reproduction("mflops", "QJump in SELENA: Figures 2 and 3 (capped CPU work)",
                     tuple(Step(f"fig{fig}-{cpu}", ("run", "scenarios/qjump_mflops.py",
                                                    "--param", f"cpu={cpu}",
                                                    "--param", f"vms={params.mflops_vms}",
                                                    "--out", OUT))
                           for fig, cpu in ((2, "dilated"), (3, "real"))),
                     5, figures=("qjump_fig2_mflops.png", "qjump_fig3_mflops.png")),
        Reproduction("bandwidth", "SELENA Figure 9 (faithful link rate per TDF)",
                     (Step("bench", ("--tdfs", params.bandwidth_tdfs, "--refine",
                                     str(params.bandwidth_refine), "--out", OUT),
                           program=("python3", "-m", "selena.lab.bench_bandwidth")),),
                     25, figures=("bandwidth_fig9.png",)),
        Reproduction("spacing", "Mininet-HiFi Figure 2.7: packet spacing error CCDF per rate",
                     tuple(Step(f"rate{rate}", ("sweep", "scenarios/spacing_ccdf.py", "--tdf",
                                                params.spacing_tdfs, "--param", f"rate_mbit={rate}",
                                                "--out", OUT))
                           for rate in _csv(params.spacing_rates)),
                     15, figures=("spacing_ccdf.png",)),
    )}


def lab_script(reproduction: Reproduction, fresh: Path) -> str:
    """The shell script the lab runs: every step in turn, each between marks."""
    lines = ["set -e"]
    for k, step in enumerate(reproduction.steps, start=1):
        lines.append(f"echo {MARK} start {k} {shlex.quote(step.name)}")
        lines.append(shlex.join(step.command(fresh / step.name)))
        lines.append(f"echo {MARK} done {k} {shlex.quote(step.name)}")
    return "\n".join(lines)


def fresh_directory(results: Path, name: str, now: datetime.datetime | None = None) -> Path:
    """build/results/<name>/<UTC date and time>/: never an existing one."""
    now = now or datetime.datetime.now(datetime.UTC)
    path = results / name / now.strftime("%Y%m%dT%H%M%SZ")
    if path.exists():
        raise ResultsError(f"results directory {path} exists: a reproduction never writes "
                           "over older results; wait a second and run it again")
    return path


@dataclass
class _Progress:
    """Turns the lab script's marks into one progress line per step."""

    name: str
    total: int
    say: Callable[[str], None]
    started: float = field(default_factory=time.monotonic)
    step_started: float = 0.0
    times: dict[str, float] = field(default_factory=dict)

    def line(self, text: str) -> None:
        words = text.split()
        if len(words) == 4 and words[0] == MARK:
            k, step = words[2], words[3]
            now = time.monotonic()
            if words[1] == "start":
                self.step_started = now
                self.say(f"[{self.name} {k}/{self.total}] {step}: started "
                         f"({now - self.started:.0f} s in)")
            else:
                self.times[step] = round(now - self.step_started, 1)
                self.say(f"[{self.name} {k}/{self.total}] {step}: done in "
                         f"{self.times[step]:.0f} s")
            return
        self.say(text.rstrip("\n"))


def _git(runner: Runner, root: Path, *args: str) -> str:
    result = runner.run(["git", "-C", str(root), *args], check=False, timeout=30)
    return result.stdout.strip() if result.returncode == 0 else ""


def run(reproduction: Reproduction, *, root: Path, runner: Runner,
        say: Callable[[str], None], selena: Sequence[str] = (sys.executable, "-m", "selena"),
        now: datetime.datetime | None = None) -> Path:
    """Runs one reproduction in the lab into a fresh directory, then
    refreshes docs/results/<name>/ from it; returns the fresh directory."""
    now = now or datetime.datetime.now(datetime.UTC)
    fresh = fresh_directory(root / "build" / "results", reproduction.name, now)
    relative = fresh.relative_to(root)       # the lab sees the tree at the same place
    script = lab_script(reproduction, relative)
    argv = [*selena, "lab", "run", *reproduction.lab_args,
            "--timeout", str(reproduction.lab_timeout_s), "--", "sh", "-c", script]
    progress = _Progress(reproduction.name, len(reproduction.steps), say)
    say(f"[{reproduction.name}] {reproduction.paper}: {len(reproduction.steps)} run(s) into "
        f"{relative} (about {reproduction.minutes} min)")
    commit = _git(runner, root, "rev-parse", "HEAD")
    dirty = bool(_git(runner, root, "status", "--porcelain", "--untracked-files=no"))
    result = runner.stream(argv, progress.line, timeout=None, cwd=root, check=False,
                           stop_grace_s=LAB_STOP_GRACE_S)
    if result.returncode != 0:
        # The whole script (a sweep, a QJump run) printed its own error above.
        raise ResultsError(f"reproduce {reproduction.name}: the lab run exited with status "
                           f"{result.returncode}; what it wrote is in {relative}, "
                           f"docs/results/{reproduction.name} is left as it was")
    real_s = time.monotonic() - progress.started
    provenance = {
        "reproduction": reproduction.name, "paper": reproduction.paper,
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit + ("-dirty" if dirty else ""),
        "command": f"selena reproduce {reproduction.name}",
        "lab_command": shlex.join(["selena", "lab", "run", *reproduction.lab_args,
                                   "--timeout", str(reproduction.lab_timeout_s), "--",
                                   "sh", "-c", "..."]),
        "steps": [{"name": s.name, "command": shlex.join(s.command(relative / s.name)),
                   "real_s": progress.times.get(s.name)} for s in reproduction.steps],
        "real_s": round(real_s, 1), "source": str(relative),
    }
    target = root / "docs" / "results" / reproduction.name
    collect(fresh, target, provenance, keep_outputs=reproduction.keep_outputs)
    say(f"[{reproduction.name}] done in {_minutes(real_s)}; docs/results/{reproduction.name} "
        "refreshed (`make figures` draws it)")
    return fresh


def run_all(names: Iterable[str], catalogue: Mapping[str, Reproduction], *, root: Path,
            runner: Runner, say: Callable[[str], None],
            selena: Sequence[str] = (sys.executable, "-m", "selena")) -> list[Path]:
    chosen = list(names)
    unknown = [n for n in chosen if n not in catalogue]
    if unknown:
        raise ScenarioError(f"no reproduction {', '.join(unknown)} (have "
                            f"{', '.join(catalogue)})")
    started = time.monotonic()
    now = datetime.datetime.now(datetime.UTC)
    times = []
    done = []
    for name in chosen:
        began = time.monotonic()
        done.append(run(catalogue[name], root=root, runner=runner, say=say, selena=selena))
        times.append({"name": name, "real_s": round(time.monotonic() - began, 1),
                      "source": str(done[-1].relative_to(root))})
    real_s = time.monotonic() - started
    say(f"all {len(chosen)} reproduction(s) done in {_minutes(real_s)}")
    if chosen == list(catalogue):
        record = {"date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "commit": _git(runner, root, "rev-parse", "HEAD"),
                  "default_scale": dict(catalogue) == reproductions(),
                  "real_s": round(real_s, 1), "reproductions": times}
        target = root / "docs" / "results" / ALL_RUN
        partial = target.with_name(f".{ALL_RUN}.tmp")
        partial.write_text(json.dumps(record, indent=1) + "\n")
        partial.replace(target)
        say(f"every reproduction ran in one go: docs/results/{ALL_RUN} written")
    return done


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


# ------------------------------------------------------------------ collect

def bundles(fresh: Path) -> list[Path]:
    """Every results bundle (a directory with meta.json) under `fresh`."""
    return sorted(p.parent for p in fresh.rglob("meta.json"))


def trim_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json with any metric of more than MAX_SAMPLES samples cut to
    its summary (the count of dropped samples says so)."""
    out: dict[str, Any] = {}
    for name, metric in metrics.items():
        metric = dict(metric)
        samples = metric.get("samples", [])
        if len(samples) > MAX_SAMPLES:
            metric["samples"] = []
            metric["samples_dropped"] = len(samples)
        out[name] = metric
    return out


def summary_csv(metrics: Mapping[str, Any], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(SUMMARY_COLUMNS)
        for name in sorted(metrics):
            m = metrics[name]
            writer.writerow([name, *("" if m.get(c) is None else m.get(c)
                                     for c in SUMMARY_COLUMNS[1:])])


def _kept_outputs(bundle: Path, target: Path, prefixes: Sequence[str]) -> None:
    if not prefixes or not (bundle / "nodes").is_dir():
        return
    for record in sorted((bundle / "nodes").glob("*/*.json")):
        command = str(json.loads(record.read_text()).get("command", ""))
        if command.startswith(tuple(prefixes)):
            where = target / "nodes" / record.parent.name
            where.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(record, where / record.name)
            stdout = record.with_suffix(".stdout")
            if stdout.exists():
                shutil.copyfile(stdout, where / stdout.name)


def collect(fresh: Path, target: Path, provenance: Mapping[str, Any], *,
            keep_outputs: Sequence[str] = ()) -> Path:
    """docs/results/<name>/ from a fresh run directory, replacing the old
    one only once the new one is whole."""
    found = bundles(fresh)
    if not found:
        raise ResultsError(f"{fresh}: no results bundle (meta.json) to collect")
    staging = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for bundle in found:
        # A sweep's bundles are <step>/runs/<run>: kept as <step>/<run>.
        parts = [p for p in bundle.relative_to(fresh).parts if p != "runs"]
        out = staging.joinpath(*parts)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bundle / "meta.json", out / "meta.json")
        metrics = trim_metrics(json.loads((bundle / "metrics.json").read_text())
                               if (bundle / "metrics.json").exists() else {})
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
        summary_csv(metrics, out / "summary.csv")
        for extra in ("fidelity.json", *sorted(p.name for p in bundle.glob("fct-*.csv"))):
            if (bundle / extra).exists():
                shutil.copyfile(bundle / extra, out / extra)
        _kept_outputs(bundle, out, keep_outputs)
    for sweep in sorted(fresh.rglob("sweep.json")):
        rel = sweep.parent.relative_to(fresh)
        # The sweep's own summary.csv (every run's metrics) as sweep-summary.csv.
        for name, kept in (("sweep.json", "sweep.json"), ("summary.csv", "sweep-summary.csv"),
                           ("recommendation.json", "recommendation.json")):
            if (sweep.parent / name).exists():
                shutil.copyfile(sweep.parent / name, staging / rel / kept)
    (staging / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target
