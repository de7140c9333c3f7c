"""TDF sweeps: the same scenario at several TDFs (and repeats), one results
bundle per run, then a summary that says which TDF is worth its real time.

Running and analysing are separate. `run_sweep` drives one Experiment per
run (the same lifecycle as `selena run`) and writes DIR/sweep.json and
DIR/runs/tdf<T>-r<k>/. `analyze` reads only those bundles, so a sweep run in
the lab's Dom0 can be analysed (and plotted) on the host. Each sweep has an
id (sweep.json's sweep_id, also in every run's meta.json and summary.csv):
a bundle of another sweep left in the same directory, or one with no
meta.json (a run that never finished), is skipped and named, never analysed
as this sweep's. `run_sweep(..., resume=True)` continues the sweep in the
directory instead of starting one: the same scenario file (by its bytes)
and settings, its finished runs kept, the others run.

The analysis:

- one row per run and metric (summary.csv): median, p5, p95, mean, stddev,
  expected, error %, real seconds and a verdict;
- per metric, a two-sample Kolmogorov-Smirnov test of each TDF's samples
  (all repeats pooled) against the highest TDF's;
- the recommended TDF: the smallest whose samples are indistinguishable
  from the highest TDF's (p >= 0.05) for every metric and whose runs all
  have the verdict ok (also in recommendation.json, with why each other
  TDF was not).

Verdict of one run and metric, always one of three: "failed" when the run
failed; "degraded (...)" when the run's fidelity monitor found the host
behind (selena/fidelity.py, its reasons in the parentheses), the median is
off the expected value the scenario recorded by more than the tolerance (5 %
by default), or nothing checked the run at all (no monitor verdict and no
expected value: never called faithful); "ok" otherwise. What could not be
checked (no expected value, no delayed path for the latency signal, ...)
is in the separate column "unchecked", never in the verdict.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selena import units
from selena.errors import AnalysisError, ResultsError, ScenarioError, SelenaError, UnitError
from selena.ownership import hand_over, missing_dirs
from selena.results import directory_entries, read_fidelity, read_meta, read_metrics

log = logging.getLogger(__name__)

KS_ALPHA = 0.05
DEFAULT_TOLERANCE_PCT = 5.0
SUMMARY_COLUMNS = ("scenario", "params", "tdf", "repeat", "metric", "unit", "n", "median",
                   "p5", "p95", "mean", "stddev", "expected", "error_pct", "real_s", "verdict",
                   "unchecked", "sweep_id")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class SweepRun:
    tdf: float
    repeat: int
    baseline: str | None = None     # a real-time baseline backend ("mininet"), TDF 1
    # The sweep it belongs to: run_one writes it into the bundle's meta.json
    # (Experiment(meta={"sweep_id": ...})), so analysis can tell its bundles.
    sweep_id: str | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """The run's column in tables and plots: its TDF, or the baseline."""
        return self.baseline or units.tdf_text(self.tdf)

    @property
    def name(self) -> str:
        if self.baseline:
            return f"{self.baseline}-r{self.repeat}"
        return f"tdf{units.tdf_text(self.tdf)}-r{self.repeat}"


@dataclass
class SweepPlan:
    scenario: str
    tdfs: list[float]
    repeat: int = 1
    params: dict[str, object] = field(default_factory=dict)
    baseline: str | None = None
    sweep_id: str | None = None     # set by run_sweep; None: a sweep.json from before ids
    # What a resumed sweep must find unchanged: the scenario file's bytes and
    # how each run is made (backend, shaping, monitor, ...; name -> value).
    scenario_sha256: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.tdfs:
            raise ScenarioError("sweep: give at least one TDF (--tdf 1,2,5,10)")
        tdfs = [units.tdf(t) for t in self.tdfs]
        dupes = sorted({t for t in tdfs if tdfs.count(t) > 1})
        if dupes:
            raise ScenarioError(f"sweep: TDF {', '.join(units.tdf_text(t) for t in dupes)} "
                                "given twice")
        self.tdfs = sorted(tdfs)
        if isinstance(self.repeat, bool) or not isinstance(self.repeat, int) \
                or not 1 <= self.repeat <= 100:
            raise ScenarioError(f"sweep: --repeat {self.repeat!r} must be a whole number "
                                "from 1 to 100")

    def runs(self) -> list[SweepRun]:
        """Repeats interleave the TDFs (1,2,5,1,2,5), so a drift in the host's
        load over the sweep spreads across every TDF instead of one."""
        extra = [self.baseline] if self.baseline else []
        return [SweepRun(1.0, r, b, self.sweep_id) if b else
                SweepRun(t, r, sweep_id=self.sweep_id)
                for r in range(1, self.repeat + 1) for t, b in
                [*((t, None) for t in self.tdfs), *((1.0, b) for b in extra)]]

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "tdfs": self.tdfs, "repeat": self.repeat,
                "params": {k: str(v) for k, v in self.params.items()},
                "baseline": self.baseline, "sweep_id": self.sweep_id,
                "scenario_sha256": self.scenario_sha256, "options": dict(self.options)}


def new_sweep_id() -> str:
    return uuid.uuid4().hex


def scenario_digest(path: str | Path) -> str:
    """The scenario file's sha256: what `--resume` holds a sweep to (a
    module the file imports is not in it). ScenarioError if unreadable."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file "
                            f"({exc.strerror or exc})") from None


@dataclass
class RunOutcome:
    run: SweepRun
    bundle: Path
    status: str
    real_s: float
    error: str | None = None
    kept: bool = False      # finished by the sweep before it was resumed; not run again


RunOne = Callable[[SweepRun, Path], None]


def check_sweep_dir(out: Path) -> None:
    """A sweep may go to `out`: nothing there, an empty directory or an
    earlier sweep's (whose bundles it will not take for its own), and no
    regular file in the way. Raises ResultsError naming the path and the
    fix, before anything is created."""
    entries = directory_entries(out, "sweep directory")
    if entries and "sweep.json" not in entries:
        raise ResultsError(f"sweep directory {out} exists and holds no sweep (no "
                           "sweep.json); choose another --out or empty it")


def write_sweep_plan(out: Path, plan: SweepPlan) -> None:
    """The sweep directory and its sweep.json (ResultsError in one line if
    it cannot be written)."""
    check_sweep_dir(out)
    created = missing_dirs(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.json").write_text(json.dumps(plan.to_json(), indent=1) + "\n")
    except OSError as exc:
        raise ResultsError(f"sweep directory {out}: cannot write it "
                           f"({exc.strerror or exc}); choose another --out") from None
    hand_over(*(created[:1] or [out / "sweep.json"]))


def run_sweep(plan: SweepPlan, out: Path, run_one: RunOne, *, resume: bool = False,
              progress: Progress | None = None,
              clock: Callable[[], float] = time.monotonic) -> list[RunOutcome]:
    """Every run of the plan, one after another; a failed run is recorded and
    the sweep goes on (its bundle holds the error). Ctrl-C stops the sweep
    after the current run's teardown and propagates. The sweep gets a new
    id (plan.sweep_id): bundles left in `out` by another sweep are not its.

    With `resume`, the plan continues the sweep in `out` (check_resumable):
    it takes that sweep's id, keeps each run whose bundle of that sweep
    finished ok, and runs the others (a failed one again, and those of the
    TDFs and repeats it adds)."""
    plan.sweep_id = check_resumable(out, plan).sweep_id if resume else new_sweep_id()
    write_sweep_plan(out, plan)     # a resume's with the TDFs and repeats it may add
    runs = plan.runs()
    # Read once, before any run: the estimates leave out what is kept.
    finished = {run.name: done for run in runs
                if resume and (done := _finished_before(run, out)) is not None}
    outcomes: list[RunOutcome] = []
    started = clock()
    for k, run in enumerate(runs, start=1):
        kept = finished.get(run.name)
        if kept is not None:
            outcomes.append(kept)
            if progress:
                progress(f"run {k} of {len(runs)}: {_what(run)}, repeat {run.repeat}: "
                         f"finished before ({kept.real_s:.0f} s), kept")
            continue
        if progress:
            progress(_progress_line(k, len(runs), run, clock() - started, outcomes,
                                    [r for r in runs[k - 1:] if r.name not in finished]))
        t0 = clock()
        outcome = run_sweep_one(run, out, run_one)
        outcome.real_s = clock() - t0
        if outcome.error:
            log.warning("sweep run %s failed: %s", run.name, outcome.error)
        outcomes.append(outcome)
    return outcomes


def check_resumable(out: Path, plan: SweepPlan) -> SweepPlan:
    """The sweep in `out` that `plan` would continue: the same scenario file
    (by its bytes), params, baseline and options, and its TDFs and repeats
    or more. Raises ResultsError naming every difference and the fix, before
    anything runs."""
    if not (out / "sweep.json").is_file():
        raise ResultsError(f"sweep --resume: {out} holds no sweep (no sweep.json); drop "
                           "--resume to start one there")
    try:
        old = _read_plan(out)
    except AnalysisError as exc:
        raise ResultsError(f"sweep --resume: {exc}; drop --resume to start a new "
                           "sweep there") from None
    if old.sweep_id is None or old.scenario_sha256 is None:
        raise ResultsError(f"sweep --resume: the sweep in {out} is from a selena that did "
                           "not record what a resumed sweep must match; drop --resume to "
                           "start a new sweep there")
    differences = _plan_differences(old, plan)
    if differences:
        raise ResultsError(f"sweep --resume: the sweep in {out} was begun with "
                           f"{'; '.join(differences)}; give the same scenario and options "
                           "as it was begun with (a resume may add TDFs and repeats), or a "
                           "new --out")
    return old


def _plan_differences(old: SweepPlan, new: SweepPlan) -> list[str]:
    """What `new` asks differently from the sweep `old` began, each as
    `<what it was> (this command: <what it asks>)`; more TDFs or repeats
    are no difference (they extend the sweep), fewer are."""
    def params(plan: SweepPlan) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(plan.params.items())) or "no --param"

    def tdfs(plan: SweepPlan) -> str:
        return ",".join(units.tdf_text(t) for t in plan.tdfs)

    pairs = [
        (f"{old.scenario} as it was then (sha256 {(old.scenario_sha256 or '')[:12]})",
         f"{new.scenario} as it is now (sha256 {(new.scenario_sha256 or '')[:12]})",
         old.scenario_sha256 == new.scenario_sha256),
        (f"--tdf {tdfs(old)}", tdfs(new), set(old.tdfs) <= set(new.tdfs)),
        (f"--repeat {old.repeat}", str(new.repeat), old.repeat <= new.repeat),
        (params(old), params(new),
         {k: str(v) for k, v in old.params.items()} == {k: str(v) for k, v in new.params.items()}),
        (f"--baseline {old.baseline or 'none'}", new.baseline or "none",
         old.baseline == new.baseline),
    ]
    for name in sorted({*old.options, *new.options}):
        was, asks = old.options.get(name, "unset"), new.options.get(name, "unset")
        pairs.append((f"{name} {was}", asks, was == asks))
    return [f"{was} (this command: {asks})" for was, asks, same in pairs if not same]


def _finished_before(run: SweepRun, out: Path) -> RunOutcome | None:
    """The outcome of a run whose bundle of this sweep finished ok, or None:
    never run, interrupted, failed or of another sweep (to be run)."""
    bundle = out / "runs" / run.name
    try:
        meta = read_meta(bundle)
    except ResultsError:
        return None                 # a damaged meta.json: run it again
    if meta is None or meta.get("sweep_id") != run.sweep_id or meta.get("status") != "ok":
        return None
    try:
        real_s = float(meta.get("real_seconds", 0.0))
    except (TypeError, ValueError):
        real_s = 0.0
    return RunOutcome(run, bundle, "ok", real_s if math.isfinite(real_s) else 0.0, kept=True)


def _what(run: SweepRun) -> str:
    return f"{run.baseline} baseline" if run.baseline else f"TDF {units.tdf_text(run.tdf)}"


def _progress_line(k: int, n: int, run: SweepRun, elapsed: float,
                   done: Sequence[RunOutcome], upcoming: Sequence[SweepRun] = ()) -> str:
    line = (f"run {k} of {n}: {_what(run)}, repeat {run.repeat}; "
            f"elapsed {elapsed:.0f} s")
    if done:
        remaining = _estimate_remaining(done, upcoming or (run,))
        line += f", about {remaining:.0f} s to go"
    return line


def _estimate_remaining(done: Sequence[RunOutcome], upcoming: Sequence[SweepRun]) -> float:
    """The real seconds the runs still to come will take: a run costs what
    the last run at its TDF cost; at a TDF not run yet, a fixed part (deploy,
    teardown) plus a part proportional to the TDF (the scenario's virtual
    time), both fitted to the runs done. One TDF done cannot tell the two
    apart: then proportional, as a scenario-bound run is."""
    last_at = {o.run.tdf: o.real_s for o in done}
    fixed, per_tdf = _fit_real_time(done)
    return sum(last_at.get(run.tdf, fixed + per_tdf * run.tdf) for run in upcoming)


def _fit_real_time(done: Sequence[RunOutcome]) -> tuple[float, float]:
    """Least squares of real_s = fixed + per_tdf x TDF over the runs done,
    neither part negative (a spacing sweep took about as long at TDF 10 as
    at 1: all fixed; the proportional guess was 10 times too long)."""
    tdfs = [o.run.tdf for o in done]
    reals = [o.real_s for o in done]
    mean_tdf, mean_real = sum(tdfs) / len(tdfs), sum(reals) / len(reals)
    spread = sum((t - mean_tdf) ** 2 for t in tdfs)
    if spread == 0:
        return 0.0, mean_real / mean_tdf
    slope = sum((t - mean_tdf) * (r - mean_real) for t, r in zip(tdfs, reals, strict=True)) \
        / spread
    if slope <= 0:
        return mean_real, 0.0
    fixed = mean_real - slope * mean_tdf
    if fixed < 0:
        return 0.0, sum(t * r for t, r in zip(tdfs, reals, strict=True)) / \
            sum(t * t for t in tdfs)
    return fixed, slope


def _bundle_status(bundle: Path, sweep_id: str | None) -> str | None:
    """The status in a bundle's meta.json, if that bundle is of this sweep."""
    meta = bundle / "meta.json"
    if not meta.exists():
        return None
    try:
        data = json.loads(meta.read_text())
    except (OSError, ValueError):
        return None
    if sweep_id is not None and data.get("sweep_id") != sweep_id:
        return None                 # left by another sweep: says nothing of this run
    return str(data.get("status", "ok"))


# --- analysis: reads bundles only ------------------------------------------

@dataclass
class RunMetrics:
    run: SweepRun
    status: str
    real_s: float
    metrics: dict[str, dict[str, Any]]
    fidelity: dict[str, Any] | None = None


@dataclass
class SweepAnalysis:
    plan: SweepPlan
    runs: list[RunMetrics]
    rows: list[dict[str, Any]]
    ks: dict[str, dict[float, float]]           # metric -> TDF -> p-value vs highest TDF
    recommended: float | None
    reasons: dict[float, list[str]]             # why each TDF was not recommended
    ks_method: str = "scipy"
    baseline_ks: dict[str, float] = field(default_factory=dict)   # metric -> p vs highest TDF
    skipped: list[str] = field(default_factory=list)    # bundles not analysed, and why

    def report(self) -> str:
        lines = [f"sweep of {self.plan.scenario}: TDF "
                 f"{', '.join(units.tdf_text(t) for t in self.plan.tdfs)}, "
                 f"{self.plan.repeat} repeat(s)"]
        for why in self.skipped:
            lines.append(f"skipped {why}")
        lines.append(f"{'TDF':>6} {'rep':>3} {'metric':<20} {'median':>10} {'expected':>10} "
                     f"{'error %':>8} {'real s':>8}  verdict")
        for row in self.rows:
            lines.append(f"{row['tdf']:>6} {row['repeat']:>3} {row['metric']:<20} "
                         f"{_fmt(row['median']):>10} {_fmt(row['expected']):>10} "
                         f"{_fmt(row['error_pct'], '+.1f'):>8} {row['real_s']:>8.1f}  "
                         f"{row['verdict']}"
                         + (f"  [not checked: {row['unchecked']}]" if row.get("unchecked")
                            else ""))
        top = units.tdf_text(self.plan.tdfs[-1])
        if self.ks_method != "scipy":
            lines.append("KS p-values: asymptotic (scipy is not installed here; "
                         "`selena sweep-report DIR` where it is gives exact ones)")
        for metric, pvalues in sorted(self.ks.items()):
            shown = ", ".join(f"TDF {units.tdf_text(t)} p={p:.3g}" for t, p in
                              sorted(pvalues.items()))
            if metric in self.baseline_ks:
                shown += f", {self.plan.baseline} p={self.baseline_ks[metric]:.3g}"
            lines.append(f"KS against TDF {top}, {metric}: {shown}")
        for tdf in self.plan.tdfs:
            if tdf in self.reasons and tdf != self.recommended:
                lines.append(f"TDF {units.tdf_text(tdf)} not recommended: "
                             + "; ".join(self.reasons[tdf]))
        if self.recommended is None:
            lines.append("recommendation: none of these TDFs was faithful; sweep higher TDFs")
        else:
            cost = [r.real_s for r in self.runs if r.run.tdf == self.recommended]
            lines.append(f"recommendation: TDF {units.tdf_text(self.recommended)} (the smallest "
                         f"faithful one; {sum(cost) / len(cost):.0f} s of real time per run)")
        return "\n".join(lines)


def _fmt(value: Any, spec: str = ".4g") -> str:
    return "-" if value is None or value == "" else format(float(value), spec)


def verdict(status: str, metric: Mapping[str, Any],
            tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
            fidelity: Mapping[str, Any] | None = None) -> str:
    """The verdict: "ok", "degraded (reasons)" or "failed"; ok only when
    something checked the run (the monitor's verdict or an expected value)
    and found it right."""
    if status != "ok":
        return "failed"
    reasons = []
    monitor = (fidelity or {}).get("verdict")
    if monitor == "degraded":
        reasons += list((fidelity or {}).get("reasons", []))
    error = metric.get("error_pct")
    expected = metric.get("expected") is not None and error is not None
    if error is not None and expected and abs(float(error)) > tolerance_pct:
        reasons.append(f"median {float(error):+.1f} % off expected")
    if not reasons and monitor != "ok" and not expected:
        reasons.append("nothing checked this run: "
                       + "; ".join(unchecked(metric, fidelity)))
    return f"degraded ({'; '.join(reasons)})" if reasons else "ok"


def unchecked(metric: Mapping[str, Any], fidelity: Mapping[str, Any] | None) -> list[str]:
    """What could not be checked in a run, for a metric: the summary's
    `unchecked` column (the verdict is about what was)."""
    out = []
    if metric.get("expected") is None or metric.get("error_pct") is None:
        out.append("no expected value")
    if not fidelity:
        out.append("no fidelity monitor")
    elif fidelity.get("verdict") == "unknown":
        out.append("fidelity unknown: " + "; ".join(fidelity.get("reasons", [])))
    else:
        out += list(fidelity.get("unchecked", []))
    return out


def load_runs(out: Path) -> tuple[SweepPlan, list[RunMetrics]]:
    """The sweep's plan and its finished runs (see find_runs)."""
    plan, found, _ = find_runs(out)
    return plan, found


def _read_plan(out: Path) -> SweepPlan:
    """sweep.json, the plan `selena sweep` wrote; AnalysisError naming the
    directory, what is wrong and the fix otherwise."""
    if not (out / "sweep.json").is_file():
        raise AnalysisError(f"{out}: not a sweep directory (no sweep.json in it): give the "
                            "--out of a `selena sweep`")
    try:
        raw = json.loads((out / "sweep.json").read_bytes())
        why = _plan_shape_problem(raw)
        if why is None:
            return SweepPlan(raw["scenario"], [float(t) for t in raw["tdfs"]], raw["repeat"],
                             dict(raw.get("params", {})), raw.get("baseline"),
                             raw.get("sweep_id"), raw.get("scenario_sha256"),
                             dict(raw.get("options") or {}))
    except (OSError, ValueError, TypeError, RecursionError, ScenarioError, UnitError) as exc:
        why = str(exc)[:120]
    raise AnalysisError(f"{out}: sweep.json is damaged ({why}); a sweep rewrites it when run "
                        "again with the same --out")


def _plan_shape_problem(raw: object) -> str | None:
    """What keeps sweep.json's JSON from being a plan (SweepPlan checks the
    values themselves), or None."""
    if not isinstance(raw, dict):
        return f"a JSON {type(raw).__name__}, not an object"
    for key in ("scenario", "tdfs", "repeat"):
        if key not in raw:
            return f"no '{key}'"
    for key, kind in (("scenario", str), ("tdfs", list), ("params", dict)):
        if key in raw and not isinstance(raw[key], kind):
            return f"{key} is {json.dumps(raw[key])[:40]}"
    if not all(isinstance(t, int | float) and not isinstance(t, bool) for t in raw["tdfs"]):
        return f"tdfs are {json.dumps(raw['tdfs'])[:40]}, not numbers"
    for key in ("baseline", "sweep_id", "scenario_sha256"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            return f"{key} is {json.dumps(raw[key])[:40]}, not text"
    options = raw.get("options")
    if options is not None and not (isinstance(options, dict) and all(
            isinstance(v, str) for v in options.values())):
        return f"options are {json.dumps(options)[:40]}, not names and text"
    return None


def find_runs(out: Path) -> tuple[SweepPlan, list[RunMetrics], list[str]]:
    """The sweep's plan, the bundles of its runs, and those skipped (each
    `<path>: why`): of another sweep (their sweep_id differs), incomplete
    (no meta.json), or not a run of this plan."""
    plan = _read_plan(out)
    found = []
    skipped = []
    names = set()
    for run in plan.runs():
        bundle = out / "runs" / run.name
        names.add(run.name)
        meta = read_meta(bundle)
        if meta is None:
            if bundle.exists():
                skipped.append(f"{bundle}: incomplete (no meta.json)")
            continue                      # not run (interrupted sweep): left out
        metrics = read_metrics(bundle)
        if plan.sweep_id is not None and meta.get("sweep_id") != plan.sweep_id:
            skipped.append(f"{bundle}: of another sweep (sweep_id "
                           f"{meta.get('sweep_id') or 'none'}, this sweep's is {plan.sweep_id})")
            continue
        fidelity = read_fidelity(bundle)
        found.append(RunMetrics(run, str(meta.get("status", "ok")),
                                float(meta.get("real_seconds", 0.0)), metrics, fidelity))
    runs_dir = out / "runs"
    if runs_dir.is_dir():
        for other in sorted(runs_dir.iterdir()):
            # Hidden ones are bundles being written (results.BundleWriter).
            if other.name not in names and not other.name.startswith("."):
                skipped.append(f"{other}: not a run of this sweep")
    for why in skipped:
        log.info("sweep %s: skipped %s", out, why)
    if not found:
        raise AnalysisError(f"{out}: no finished runs of this sweep to analyse"
                            + (f" (skipped {'; '.join(skipped)})" if skipped else ""))
    return plan, found, skipped


def check_tolerance(tolerance_pct: float) -> None:
    """A NaN tolerance would call every metric within it; 0 or less none."""
    if not isinstance(tolerance_pct, int | float) or not 0 < tolerance_pct <= 100:
        raise AnalysisError(f"tolerance {tolerance_pct!r}: want percent above 0 and at most "
                            "100, e.g. 5")


def analyze(out: Path, *, tolerance_pct: float = DEFAULT_TOLERANCE_PCT,
            alpha: float = KS_ALPHA) -> SweepAnalysis:
    check_tolerance(tolerance_pct)
    plan, runs, skipped = find_runs(out)
    rows = summary_rows(plan, runs, tolerance_pct)
    metric_names = sorted({name for r in runs for name in r.metrics})
    top = plan.tdfs[-1]
    pooled, base = _pooled_samples(runs, metric_names)
    ks: dict[str, dict[float, float]] = {}
    for name, by_tdf in pooled.items():
        if top not in by_tdf or not by_tdf[top]:
            continue
        ks[name] = {t: (1.0 if t == top else ks_pvalue(s, by_tdf[top]))
                    for t, s in by_tdf.items() if s}
    baseline_ks = {name: ks_pvalue(samples, pooled[name][top]) for name, samples in base.items()
                   if samples and pooled[name].get(top)}
    reasons: dict[float, list[str]] = {}
    for tdf in plan.tdfs:
        why = _not_recommended(tdf, top, runs, rows, metric_names, ks, alpha)
        if why:
            reasons[tdf] = why
    recommended = next((t for t in plan.tdfs if t not in reasons), None)
    return SweepAnalysis(plan, runs, rows, ks, recommended, reasons,
                         "scipy" if scipy_available() else "asymptotic", baseline_ks, skipped)


def _pooled_samples(runs: Sequence[RunMetrics], metric_names: list[str]
                    ) -> tuple[dict[str, dict[float, list[float]]], dict[str, list[float]]]:
    """The samples of the finished runs per metric: by TDF, and the baseline's."""
    pooled: dict[str, dict[float, list[float]]] = {m: {} for m in metric_names}
    base: dict[str, list[float]] = {m: [] for m in metric_names}
    for r in runs:
        if r.status != "ok":
            continue
        for name, m in r.metrics.items():
            samples = [float(x) for x in m.get("samples", [])]
            if r.run.baseline:
                base[name].extend(samples)
            else:
                pooled[name].setdefault(r.run.tdf, []).extend(samples)
    return pooled, base


def _not_recommended(tdf: float, top: float, runs: Sequence[RunMetrics],
                     rows: list[dict[str, Any]], metric_names: list[str],
                     ks: dict[str, dict[float, float]], alpha: float) -> list[str]:
    """Why the TDF cannot be recommended (nothing when it can)."""
    why = []
    at = [r for r in runs if r.run.tdf == tdf and not r.run.baseline]
    if not at:
        why.append("not run")
    for r in at:
        if r.status != "ok":
            why.append(f"repeat {r.run.repeat} {r.status}")
    # Metrics of a repeat with the same verdict together: the monitor's
    # reasons are the run's, and eight metrics repeated them eight times.
    same: dict[tuple[Any, str], list[str]] = {}
    for row in rows:
        if row["tdf"] == units.tdf_text(tdf) and row["verdict"] not in ("ok", "failed"):
            same.setdefault((row["repeat"], row["verdict"]), []).append(row["metric"])
    for (repeat, verdict_text), metrics in same.items():
        why.append(f"{', '.join(metrics)} repeat {repeat} {verdict_text}")
    for name in metric_names:
        p = ks.get(name, {}).get(tdf)
        if p is None:
            why.append(f"{name}: no samples to compare")
        elif p < alpha:
            why.append(f"{name} differs from TDF {units.tdf_text(top)} (KS p={p:.3g})")
    return why


def summary_rows(plan: SweepPlan, runs: Sequence[RunMetrics],
                 tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> list[dict[str, Any]]:
    params = ";".join(f"{k}={v}" for k, v in sorted(plan.params.items()))
    rows = []
    for r in sorted(runs, key=lambda r: (bool(r.run.baseline), r.run.tdf, r.run.repeat)):
        names = sorted(r.metrics) or [""]
        for name in names:
            m = r.metrics.get(name, {})
            rows.append({
                "scenario": plan.scenario, "params": params, "tdf": r.run.label,
                "repeat": r.run.repeat, "metric": name, "unit": m.get("unit", ""),
                "n": m.get("n", 0), "median": m.get("median"), "p5": m.get("p5"),
                "p95": m.get("p95"), "mean": m.get("mean"), "stddev": m.get("stddev"),
                "expected": m.get("expected"), "error_pct": m.get("error_pct"),
                "real_s": round(r.real_s, 3), "sweep_id": plan.sweep_id,
                "verdict": verdict(r.status, m, tolerance_pct, r.fidelity),
                "unchecked": "; ".join(unchecked(m, r.fidelity)),
            })
    return rows


def write_summary(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row.get(k)
                             for k in SUMMARY_COLUMNS})
    hand_over(path)
    return path


def write_recommendation(analysis: SweepAnalysis, path: Path,
                         tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> Path:
    """The recommendation as the report states it, for what reads the sweep
    later without its samples' layout (`selena reproduce adaptive`'s figures
    take their faithful TDF from it): the TDF or null, and why each other
    TDF was not recommended."""
    data = {"sweep_id": analysis.plan.sweep_id, "scenario": analysis.plan.scenario,
            "tdfs": analysis.plan.tdfs, "tolerance_pct": tolerance_pct, "ks_alpha": KS_ALPHA,
            "ks_method": analysis.ks_method, "recommended": analysis.recommended,
            "not_recommended": {units.tdf_text(t): why for t, why in analysis.reasons.items()
                                if t != analysis.recommended}}
    path.write_text(json.dumps(data, indent=1) + "\n")
    hand_over(path)
    return path


def scipy_available() -> bool:
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        return False
    return True


def ks_pvalue(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sample Kolmogorov-Smirnov p-value: scipy's ks_2samp (exact where
    it can be) when scipy is installed, else the asymptotic Kolmogorov
    distribution with Stephens' small-sample correction (a host without
    the `analysis` extra)."""
    if scipy_available():
        from scipy.stats import ks_2samp

        return float(ks_2samp(list(a), list(b)).pvalue)
    return ks_asymptotic(a, b)


def ks_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    """The largest distance between the two empirical CDFs."""
    xs, ys = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(xs) and j < len(ys):
        value = min(xs[i], ys[j])
        while i < len(xs) and xs[i] == value:
            i += 1
        while j < len(ys) and ys[j] == value:
            j += 1
        d = max(d, abs(i / len(xs) - j / len(ys)))
    return d


def ks_asymptotic(a: Sequence[float], b: Sequence[float]) -> float:
    if not a or not b:
        raise AnalysisError("KS test: a sample is empty")
    d = ks_statistic(a, b)
    en = math.sqrt(len(a) * len(b) / (len(a) + len(b)))
    lam = (en + 0.12 + 0.11 / en) * d
    if lam < 1e-3:
        return 1.0
    total = sum(2 * (-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return min(1.0, max(0.0, total))


def plot(analysis: SweepAnalysis, out: Path) -> list[Path]:
    """One PNG per metric (box plots per TDF, expected value dashed) and one
    of real time per run against the TDF."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise AnalysisError("sweep plots need matplotlib (pip install matplotlib)") from exc
    written = []
    # One box per TDF, then the real-time baseline's.
    columns = [units.tdf_text(t) for t in analysis.plan.tdfs]
    columns += [analysis.plan.baseline] if analysis.plan.baseline else []
    names = sorted({n for r in analysis.runs for n in r.metrics})
    for name in names:
        data, expected, unit = [], None, ""
        for column in columns:
            samples = [float(x) for r in analysis.runs
                       if r.run.label == column and r.status == "ok"
                       for x in r.metrics.get(name, {}).get("samples", [])]
            data.append(samples or [math.nan])
        for r in analysis.runs:
            m = r.metrics.get(name)
            if m:
                expected = m.get("expected", expected)
                unit = m.get("unit", unit) or unit
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.boxplot(data)
        ax.set_xticks(range(1, len(columns) + 1), columns)
        if expected is not None:
            ax.axhline(float(expected), linestyle="--", color="tab:red", label="expected")
            ax.legend()
        ax.set_xlabel("TDF")
        ax.set_ylabel(f"{name} ({unit})" if unit else name)
        ax.set_title(f"{name} vs TDF")
        path = out / f"{_safe(name)}.png"
        fig.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    dilated = [r for r in analysis.runs if not r.run.baseline]
    ax.plot([r.run.tdf for r in dilated], [r.real_s for r in dilated], "o", label="selena")
    base = [r for r in analysis.runs if r.run.baseline]
    if base:
        ax.plot([1.0] * len(base), [r.real_s for r in base], "s",
                label=f"{analysis.plan.baseline} (real time)")
        ax.legend()
    ax.set_xlabel("TDF")
    ax.set_ylabel("real time per run (s)")
    ax.set_title("cost of dilation")
    path = out / "real_time.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    written.append(path)
    hand_over(*written)
    return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


# --- choosing the TDF: --auto ------------------------------------------------

@dataclass
class AutoChoice:
    chosen: float | None
    tried: list[float]
    real_s: dict[float, float]
    log: list[str]

    def report(self) -> str:
        lines = list(self.log)
        if self.chosen is None:
            lines.append(f"auto: no faithful and stable TDF up to "
                         f"{units.tdf_text(self.tried[-1])}; raise --max-tdf")
        else:
            lines.append(f"auto: TDF {units.tdf_text(self.chosen)} (faithful, and the same "
                         f"as twice its TDF); a run costs {self.real_s[self.chosen]:.0f} s "
                         "of real time")
        return "\n".join(lines)


def auto_sweep(scenario: str, out: Path, run_one: RunOne, *, start: float = 1.0,
               max_tdf: float = 64.0, params: dict[str, object] | None = None,
               tolerance_pct: float = DEFAULT_TOLERANCE_PCT, alpha: float = KS_ALPHA,
               options: Mapping[str, str] | None = None,
               progress: Progress | None = None) -> AutoChoice:
    """VT-Mininet's question, answered by measurement: run at `start`, then
    double the TDF until two successive TDFs both have the verdict ok and
    samples indistinguishable from each other (KS p >= alpha for every
    metric); the lower of the two is chosen."""
    check_tolerance(tolerance_pct)
    tried: list[float] = []
    real: dict[float, float] = {}
    log_lines: list[str] = []
    tdf = units.tdf(start)
    previous_ok = False
    sweep_id = new_sweep_id()       # one for every run of this search
    digest = scenario_digest(scenario) if Path(scenario).is_file() else None
    while tdf <= max_tdf:
        tried.append(tdf)
        plan = SweepPlan(scenario, list(tried), 1, dict(params or {}), sweep_id=sweep_id,
                         scenario_sha256=digest, options=dict(options or {}))
        write_sweep_plan(out, plan)
        run = SweepRun(tdf, 1, sweep_id=sweep_id)
        if progress:
            progress(f"auto: run at TDF {units.tdf_text(tdf)}")
        outcome = run_sweep_one(run, out, run_one)
        real[tdf] = outcome.real_s
        plan_now, runs = load_runs(out)
        rows = [r for r in summary_rows(plan_now, runs, tolerance_pct)
                if r["tdf"] == units.tdf_text(tdf)]
        faithful = outcome.status == "ok" and all(r["verdict"] == "ok" for r in rows)
        bad = [f"{r['metric']}: {r['verdict']}" for r in rows if r["verdict"] != "ok"]
        line = f"TDF {units.tdf_text(tdf)}: " + ("ok" if faithful else "; ".join(bad)
                                                  or outcome.status)
        if len(tried) > 1:
            low = tried[-2]
            pvalues = _pairwise_ks(runs, low, tdf)
            stable = all(p >= alpha for p in pvalues.values())
            line += "; against TDF " + units.tdf_text(low) + ": " + (", ".join(
                f"{m} KS p={p:.3g}" for m, p in sorted(pvalues.items())) or "no samples")
            log_lines.append(line)
            if faithful and previous_ok and stable:
                return AutoChoice(low, tried, real, log_lines)
        else:
            log_lines.append(line)
        previous_ok = faithful
        tdf = tdf * 2
    return AutoChoice(None, tried, real, log_lines)


def run_sweep_one(run: SweepRun, out: Path, run_one: RunOne) -> RunOutcome:
    bundle = out / "runs" / run.name
    begin = time.monotonic()
    error = None
    try:
        run_one(run, bundle)
    except SelenaError as exc:
        error = str(exc)
    status = _bundle_status(bundle, run.sweep_id)
    if status is None and error is None:
        # run_one returned but left no bundle of this sweep: nothing to trust.
        error = f"{bundle}: no results bundle of this sweep was written"
    return RunOutcome(run, bundle, status or ("failed" if error else "ok"),
                      time.monotonic() - begin, error)


def _pairwise_ks(runs: Sequence[RunMetrics], a: float, b: float) -> dict[str, float]:
    def pooled(tdf: float) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for r in runs:
            if r.run.tdf == tdf and r.status == "ok":
                for name, m in r.metrics.items():
                    found.setdefault(name, []).extend(float(x) for x in m.get("samples", []))
        return found

    left, right = pooled(a), pooled(b)
    return {name: ks_pvalue(left[name], right[name]) for name in sorted(left)
            if left[name] and right.get(name)}
