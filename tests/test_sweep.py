"""TDF sweeps: the plan, running (a failed run does not stop the sweep),
and the analysis of bundles (summary rows, verdicts, KS tests, the
recommended TDF, plots), on synthetic bundles and through the real
lifecycle against the fake Dom0."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from scenario_module import PAIR_RECORDING

from selena.backends.xl import XlBackend
from selena.cli import main
from selena.errors import AnalysisError, BackendError, ResultsError, ScenarioError
from selena.experiment import Experiment
from selena.model import Topology
from selena.sweep import (
    SUMMARY_COLUMNS,
    RunOutcome,
    SweepPlan,
    SweepRun,
    analyze,
    check_resumable,
    plot,
    run_sweep,
    unchecked,
    verdict,
    write_summary,
)

EXPECTED_RTT = 20.0


def write_bundle(bundle: Path, *, tdf: float, samples: list[float], status: str = "ok",
                 real_s: float = 10.0, sweep_id: str | None = None) -> None:
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "meta.json").write_text(json.dumps({"status": status, "tdf": tdf,
                                                  "real_seconds": real_s,
                                                  "sweep_id": sweep_id}))
    ordered = sorted(samples)
    median = ordered[len(ordered) // 2]
    (bundle / "metrics.json").write_text(json.dumps({"rtt_ms": {
        "unit": "ms", "expected": EXPECTED_RTT, "n": len(samples), "samples": samples,
        "median": median, "mean": sum(samples) / len(samples), "p5": ordered[0],
        "p95": ordered[-1], "stddev": 0.1,
        "error_pct": 100 * (median / EXPECTED_RTT - 1)}}))


def rtts(tdf: float, seed: int) -> list[float]:
    """Like the lab: a real-time floor of some ms per round trip, divided by
    the TDF in the guests' time, plus some noise."""
    rng = random.Random(seed)
    return [EXPECTED_RTT + 8.0 / tdf + rng.gauss(0, 0.3) for _ in range(30)]


def synthetic_sweep(out: Path, tdfs=(1, 5, 10),
                    repeat: int = 2) -> tuple[list[RunOutcome], list[str]]:
    plan = SweepPlan("scenarios/demo.py", list(tdfs), repeat, {"rate_mbit": 20})

    def run_one(run: SweepRun, bundle: Path) -> None:
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id,
                     samples=rtts(run.tdf, int(run.tdf) * 10 + run.repeat), real_s=5.0 * run.tdf)

    ticks = iter(range(1000))
    lines: list[str] = []
    outcomes = run_sweep(plan, out, run_one, progress=lines.append,
                         clock=lambda: float(next(ticks)))
    return outcomes, lines


def test_plan_orders_tdfs_interleaves_repeats_and_refuses_bad_input():
    plan = SweepPlan("s.py", [10, 1, 2.5], 2)
    assert [(r.tdf, r.repeat) for r in plan.runs()] == \
        [(1, 1), (2.5, 1), (10, 1), (1, 2), (2.5, 2), (10, 2)]
    assert plan.runs()[1].name == "tdf2.5-r1"
    with pytest.raises(ScenarioError, match="TDF 2 given twice"):
        SweepPlan("s.py", [2, 2.0], 1)
    with pytest.raises(Exception, match="0.5"):
        SweepPlan("s.py", [0.5, 2], 1)
    with pytest.raises(ScenarioError, match="--repeat 0"):
        SweepPlan("s.py", [1], 0)
    with pytest.raises(ScenarioError, match="at least one TDF"):
        SweepPlan("s.py", [], 1)


def test_the_time_to_go_fits_a_fixed_and_a_per_tdf_part_to_the_runs_done():
    from selena.sweep import RunOutcome, SweepRun, _estimate_remaining

    def outcome(tdf: float, real_s: float) -> RunOutcome:
        return RunOutcome(SweepRun(tdf=tdf, repeat=1), Path("x"), "ok", real_s)
    grid = [SweepRun(tdf=t, repeat=1) for t in (4, 8, 16)]
    # Scenario-bound: 60 s of deploy and 60 virtual s at each TDF.
    done = [outcome(1, 120), outcome(2, 180)]
    assert _estimate_remaining(done, grid) == pytest.approx(300 + 540 + 1020)
    # A TDF done before costs what it cost then.
    assert _estimate_remaining([*done, outcome(8, 500)], grid[1:2]) == pytest.approx(500)
    # All fixed (the spacing sweep: as long at TDF 10 as at 1): not 10 times.
    flat = [outcome(1, 100), outcome(2, 98)]
    assert _estimate_remaining(flat, [SweepRun(tdf=10, repeat=1)]) == pytest.approx(99)
    # One TDF done: proportional, the only guess it allows.
    assert _estimate_remaining([outcome(1, 100)], grid) == pytest.approx(2800)


def test_sweep_runs_every_point_with_progress_and_survives_a_failed_run(tmp_path):
    plan = SweepPlan("s.py", [1, 4], 1)
    seen = []

    def run_one(run: SweepRun, bundle: Path) -> None:
        seen.append(run.name)
        if run.tdf == 1:
            raise BackendError("xl create h1: out of memory")
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=[20.0, 20.1])

    lines: list[str] = []
    outcomes = run_sweep(plan, tmp_path, run_one, progress=lines.append)
    assert seen == ["tdf1-r1", "tdf4-r1"]
    assert [(o.status, o.error) for o in outcomes] == \
        [("failed", "xl create h1: out of memory"), ("ok", None)]
    assert lines[0].startswith("run 1 of 2: TDF 1, repeat 1")
    assert lines[1].startswith("run 2 of 2: TDF 4") and "to go" in lines[1]
    assert json.loads((tmp_path / "sweep.json").read_text())["tdfs"] == [1, 4]


def test_analysis_rows_verdicts_ks_and_the_smallest_faithful_tdf(tmp_path):
    outcomes, lines = synthetic_sweep(tmp_path)
    assert len(outcomes) == 6 and "about" in lines[-1]
    analysis = analyze(tmp_path)
    assert [(r["tdf"], r["repeat"]) for r in analysis.rows] == \
        [("1", 1), ("1", 2), ("5", 1), ("5", 2), ("10", 1), ("10", 2)]
    by_tdf = {r["tdf"]: r for r in analysis.rows}
    assert by_tdf["1"]["verdict"].startswith("degraded (median +4")   # 28 ms of 20
    assert by_tdf["5"]["verdict"].startswith("degraded (median +8")   # 21.6 ms
    assert by_tdf["10"]["verdict"] == "ok"
    assert by_tdf["10"]["params"] == "rate_mbit=20" and by_tdf["10"]["real_s"] == 50.0
    ks = analysis.ks["rtt_ms"]
    assert ks[10.0] == 1.0 and ks[1.0] < 1e-6
    # 20 + 8/5 against 20 + 8/10 with 0.3 ms of noise: distinguishable too.
    assert ks[5.0] < 0.05
    assert analysis.recommended == 10.0
    text = analysis.report()
    assert "recommendation: TDF 10" in text and "TDF 1 not recommended" in text
    assert "KS against TDF 10, rtt_ms" in text


def test_indistinguishable_samples_recommend_the_cheaper_tdf(tmp_path):
    plan = SweepPlan("s.py", [2, 8], 1)

    def run_one(run: SweepRun, bundle: Path) -> None:
        rng = random.Random(7)                 # the same samples at both TDFs
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id,
                     samples=[20 + rng.gauss(0, 0.2) for _ in range(20)], real_s=3.0 * run.tdf)

    run_sweep(plan, tmp_path, run_one)
    analysis = analyze(tmp_path)
    assert analysis.ks["rtt_ms"][2.0] == pytest.approx(1.0)
    assert analysis.recommended == 2.0
    assert "TDF 2 (the smallest faithful one; 6 s of real time per run)" in analysis.report()


def test_no_faithful_tdf_says_so(tmp_path):
    plan = SweepPlan("s.py", [1, 2], 1)
    run_sweep(plan, tmp_path, lambda run, bundle: write_bundle(
        bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 3)))
    analysis = analyze(tmp_path)
    assert analysis.recommended is None          # TDF 2 is still 20 % off
    assert "none of these TDFs was faithful" in analysis.report()


def test_summary_csv_has_every_column_and_plots_are_drawn(tmp_path):
    synthetic_sweep(tmp_path)
    analysis = analyze(tmp_path)
    path = write_summary(analysis.rows, tmp_path / "summary.csv")
    with path.open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == SUMMARY_COLUMNS
        rows = list(reader)
    assert len(rows) == 6 and rows[0]["metric"] == "rtt_ms" and rows[0]["expected"] == "20.0"
    pngs = plot(analysis, tmp_path)
    assert [p.name for p in pngs] == ["rtt_ms.png", "real_time.png"]
    assert all(p.stat().st_size > 5000 for p in pngs)


def test_verdict_rules():
    assert verdict("failed", {}) == "failed"
    # Nothing checked the run (no monitor, no expected value): never ok.
    assert verdict("ok", {"expected": None}) == \
        "degraded (nothing checked this run: no expected value; no fidelity monitor)"
    nothing = "throughput: no shaped queue with a known rate"
    monitored = {"verdict": "ok", "reasons": [], "unchecked": [nothing]}
    assert verdict("ok", {"expected": None}, fidelity=monitored) == "ok"
    assert unchecked({"expected": None}, monitored) == ["no expected value", nothing]
    too_short = {"verdict": "unknown", "reasons": ["run too short to judge"]}
    assert verdict("ok", {"expected": None}, fidelity=too_short).startswith(
        "degraded (nothing checked this run: no expected value; fidelity unknown")
    assert verdict("ok", {"expected": 10, "error_pct": 1.0}, fidelity=too_short) == "ok"
    assert verdict("ok", {"expected": 10, "error_pct": 4.9}) == "ok"
    assert verdict("ok", {"expected": 10, "error_pct": -7.0}) == \
        "degraded (median -7.0 % off expected)"
    assert verdict("ok", {"expected": 10, "error_pct": 7.0}, tolerance_pct=10) == "ok"


def test_analysing_a_directory_that_is_no_sweep_names_it(tmp_path):
    with pytest.raises(AnalysisError, match=f"{tmp_path}: not a sweep directory"):
        analyze(tmp_path)
    SweepPlan("s.py", [1], 1)
    (tmp_path / "sweep.json").write_text(json.dumps({"scenario": "s.py", "tdfs": [1],
                                                     "repeat": 1}))
    with pytest.raises(AnalysisError, match="no finished runs"):
        analyze(tmp_path)


DEEP = "[" * 100_000


@pytest.mark.parametrize("file,content,message", [
    ("sweep.json", "[]", "sweep.json is damaged (a JSON list, not an object); a sweep "
                         "rewrites it when run again with the same --out"),
    ("sweep.json", DEEP, "sweep.json is damaged (maximum recursion depth"),
    ("sweep.json", '{"scenario": 5, "tdfs": [1], "repeat": 1}', "(scenario is 5)"),
    ("sweep.json", '{"scenario": "s.py", "tdfs": ["a"], "repeat": 1}', "tdfs are [\"a\"]"),
    ("sweep.json", '{"scenario": "s.py", "tdfs": [1]}', "(no 'repeat')"),
    ("sweep.json", '{"scenario": "s.py", "tdfs": [1], "repeat": 1, "params": []}',
     "(params is [])"),
    ("sweep.json", '{"scenario": "s.py", "tdfs": [1], "repeat": 1, "baseline": 3}',
     "(baseline is 3, not text)"),
    ("runs/tdf5-r1/meta.json", "[]", "tdf5-r1/meta.json: holds a JSON list, not an object; "
                                     "the bundle is damaged: run it again, or move it"),
    ("runs/tdf5-r1/meta.json", DEEP, "tdf5-r1/meta.json: not JSON (maximum recursion"),
    ("runs/tdf5-r1/meta.json", '{"real_seconds": "x"}', "real_seconds is \"x\", not a number"),
    ("runs/tdf5-r1/metrics.json", '{"rtt_ms": 5}', "metric 'rtt_ms' is 5, not an object"),
    ("runs/tdf5-r1/metrics.json", '{"rtt_ms": {"samples": ["x"]}}',
     "metric 'rtt_ms': samples are not a list of numbers"),
    ("runs/tdf5-r1/metrics.json", '{"rtt_ms": {"median": "x"}}',
     "metric 'rtt_ms': median is \"x\", not a number"),
    ("runs/tdf5-r1/fidelity.json", '{"reasons": 5}', "reasons is 5, not a list of text"),
    ("runs/tdf5-r1/fidelity.json", "{", "tdf5-r1/fidelity.json: not JSON (Expecting"),
])
def test_a_damaged_sweep_or_bundle_is_one_line_naming_the_file_and_the_fix(
        tmp_path, capsys, file, content, message):
    """Each was a traceback (AttributeError, RecursionError, JSONDecodeError)
    or, for sweep.json's wrong types, a report of nonsense."""
    synthetic_sweep(tmp_path, tdfs=(1, 5), repeat=1)
    (tmp_path / file).write_text(content)
    assert main(["sweep-report", str(tmp_path), "--no-plots"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_directory_in_place_of_a_bundle_file_is_named_too(tmp_path, capsys):
    synthetic_sweep(tmp_path, tdfs=(1, 5), repeat=1)
    (tmp_path / "runs/tdf5-r1/meta.json").unlink()
    (tmp_path / "runs/tdf5-r1/meta.json").mkdir()
    assert main(["sweep-report", str(tmp_path), "--no-plots"]) == 1
    assert "tdf5-r1/meta.json: cannot read it (Is a directory)" in capsys.readouterr().err


def test_cli_refuses_bad_sweeps_before_creating_anything(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "missing.py"), "--tdf", "1,2",
                 "--out", str(tmp_path / "o")]) == 1
    assert "missing.py: no such scenario file" in capsys.readouterr().err
    scenario = tmp_path / "s.py"
    scenario.write_text("from selena.model import Topology\n"
                        "topology = Topology('s')\n"
                        "topology.add_host('h1', ip='10.0.0.1/24', memory=-5)\n")
    assert main(["sweep", str(scenario), "--tdf", "1,1", "--out", str(tmp_path / "o")]) == 1
    assert "TDF 1 given twice" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit):
        main(["sweep", str(scenario), "--tdf", "1,nan", "--out", str(tmp_path / "o")])
    assert "nan" in capsys.readouterr().err
    assert main(["sweep", str(scenario), "--out", str(tmp_path / "o")]) == 1
    assert "give --tdf T1,T2,... or --auto" in capsys.readouterr().err
    assert main(["sweep", str(scenario), "--auto", "--tdf", "8", "--max-tdf", "4",
                 "--out", str(tmp_path / "o")]) == 1
    assert "--max-tdf 4 is below the start TDF 8" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


PAIR = ("from selena.model import Topology\n"
        "topology = Topology('s')\n"
        "topology.add_link(topology.add_host('h1', ip='10.0.0.1/24'),\n"
        "                  topology.add_host('h2', ip='10.0.0.2/24'))\n")


@pytest.mark.parametrize("where, message", [
    ("afile", "sweep directory {out} is a file; choose another --out"),
    ("afile/o", "sweep directory {out} is under {tmp}/afile, a regular file; choose another "
                "--out"),
    ("notes", "sweep directory {out} exists and holds no sweep (no sweep.json); choose "
              "another --out or empty it"),
])
def test_a_sweep_directory_it_cannot_use_is_one_line_before_anything(tmp_path, capsys,
                                                                     monkeypatch, where,
                                                                     message):
    """--out under a regular file was a NotADirectoryError traceback; a
    directory of other files took sweep.json and runs/ among them."""
    from selena.errors import HostNotReady

    ran: list[str] = []

    def preflight(self, plan):      # raises: past it a run would deploy on this machine
        ran.append("preflight")
        raise HostNotReady("the host checks ran", "test")

    monkeypatch.setattr(XlBackend, "preflight", preflight)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    scenario = tmp_path / "s.py"
    scenario.write_text(PAIR)
    out = tmp_path / where
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for mode in (["--tdf", "1,2"], ["--auto"]):
        assert main(["sweep", str(scenario), *mode, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert err == f"selena: error: {message.format(out=out, tmp=tmp_path)}\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and ran == []


def test_a_host_that_cannot_run_it_fails_the_sweep_once_before_its_first_run(
        tmp_path, capsys, monkeypatch):
    """On a machine that is not a Dom0 every run of the sweep failed in
    turn, each naming it, after the sweep directory was made."""
    from selena.errors import HostNotReady

    checked: list[object] = []

    def preflight(self, plan):
        checked.append(plan.topology)
        raise HostNotReady("this machine is not a Xen Dom0 (no /proc/xen)", "dom0")

    monkeypatch.setattr(XlBackend, "preflight", preflight)
    scenario = tmp_path / "s.py"
    scenario.write_text(PAIR)
    for mode in (["--tdf", "1,2,4"], ["--auto"]):
        assert main(["sweep", str(scenario), *mode, "--out", str(tmp_path / "o")]) == 1
        err = capsys.readouterr().err
        assert err == "selena: error: this machine is not a Xen Dom0 (no /proc/xen)\n"
    assert len(checked) == 2 and not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["nan", "-5", "0", "101"])
def test_a_tolerance_that_would_judge_nothing_is_refused(tmp_path, capsys, value):
    """--tolerance nan called every metric within it (`abs(error) > nan` is
    false), 0 or less none."""
    for argv in (["sweep", str(tmp_path / "s.py"), "--tdf", "1", "--out", str(tmp_path / "o")],
                 ["sweep-report", str(tmp_path)]):
        with pytest.raises(SystemExit):
            main([*argv, "--tolerance", value])
        assert (f"argument --tolerance: {value!r} must be above 0 and at most 100 (percent, "
                "e.g. 5)") in capsys.readouterr().err
    with pytest.raises(AnalysisError, match=r"tolerance nan: want percent above 0"):
        analyze(tmp_path, tolerance_pct=float("nan"))


def test_a_sweep_through_the_lifecycle_on_the_fake_dom0(fake_xen, tmp_path):
    """Each run is a whole Experiment: deployed at its TDF, the scenario's
    metric recorded from a real agent's output, bundle written, torn down."""
    plan = SweepPlan("pair", [2, 4], 1)

    def run_one(run: SweepRun, bundle: Path) -> None:
        topo = Topology("pair", tdf=run.tdf)
        h1 = topo.add_host("h1", ip="10.0.0.1/24")
        h2 = topo.add_host("h2", ip="10.0.0.2/24")
        topo.add_link(h1, h2, rate="10Mbit", delay="5ms")
        backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
        with Experiment(topo, backend=backend, templates=None, out=bundle,
                        ready_timeout=20, meta={"sweep_id": run.sweep_id}) as exp:
            out = exp["h1"].cmd("echo 10; echo 10.2").stdout.decode().split()
            exp.record("rtt_ms", [float(x) for x in out], expected=10.0, unit="ms")
        assert fake_xen.domains == {}

    outcomes = run_sweep(plan, tmp_path / "sweep", run_one)
    assert [o.status for o in outcomes] == ["ok", "ok"]
    analysis = analyze(tmp_path / "sweep")
    assert [r["tdf"] for r in analysis.rows] == ["2", "4"]
    assert all(r["verdict"] == "ok" and r["n"] == 2 for r in analysis.rows)
    meta = json.loads((tmp_path / "sweep/runs/tdf4-r1/meta.json").read_text())
    assert meta["tdf"] == 4 and meta["status"] == "ok"
    assert analysis.recommended == 2.0


def test_without_scipy_the_asymptotic_ks_agrees_with_scipy(tmp_path, monkeypatch):
    from scipy.stats import ks_2samp

    from selena.sweep import ks_asymptotic, ks_statistic

    rng = random.Random(1)
    for shift in (0.0, 0.2, 0.5, 1.0):
        a = [rng.gauss(0, 1) for _ in range(40)]
        b = [rng.gauss(shift, 1) for _ in range(30)]
        exact = ks_2samp(a, b)
        assert ks_statistic(a, b) == pytest.approx(exact.statistic)
        assert ks_asymptotic(a, b) == pytest.approx(exact.pvalue, abs=0.03)
    synthetic_sweep(tmp_path)
    monkeypatch.setattr("selena.sweep.scipy_available", lambda: False)
    analysis = analyze(tmp_path)
    assert analysis.ks_method == "asymptotic" and analysis.recommended == 10.0
    assert "KS p-values: asymptotic" in analysis.report()


def test_auto_doubles_the_tdf_until_two_in_a_row_are_faithful_and_alike(tmp_path):
    from selena.sweep import auto_sweep

    means = {1: 30.0, 2: 24.0, 4: 20.1, 8: 20.0, 16: 20.0}
    ran = []

    def run_one(run: SweepRun, bundle: Path) -> None:
        ran.append(run.tdf)
        rng = random.Random(int(run.tdf))
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, real_s=4.0 * run.tdf,
                     samples=[means[int(run.tdf)] + rng.gauss(0, 0.3) for _ in range(30)])

    choice = auto_sweep("s.py", tmp_path, run_one)
    assert ran == [1, 2, 4, 8] and choice.chosen == 4.0
    text = choice.report()
    assert "TDF 1: rtt_ms: degraded (median +5" in text
    assert "TDF 8: ok; against TDF 4: rtt_ms KS p=" in text
    assert "auto: TDF 4 (faithful" in text
    assert json.loads((tmp_path / "sweep.json").read_text())["tdfs"] == [1, 2, 4, 8]
    assert analyze(tmp_path).rows[0]["tdf"] == "1"           # a sweep directory like any


def test_auto_gives_up_at_the_largest_tdf_and_says_so(tmp_path):
    from selena.sweep import auto_sweep

    choice = auto_sweep("s.py", tmp_path, lambda run, bundle: write_bundle(
        bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 5)), max_tdf=4)
    assert choice.chosen is None and choice.tried == [1, 2, 4]
    assert "no faithful and stable TDF up to 4; raise --max-tdf" in choice.report()


def test_a_real_time_baseline_is_its_own_column_and_never_the_recommendation(tmp_path):
    plan = SweepPlan("scenarios/demo.py", [1, 10], 2, {}, "mininet")
    assert [r.name for r in plan.runs()] == ["tdf1-r1", "tdf10-r1", "mininet-r1",
                                             "tdf1-r2", "tdf10-r2", "mininet-r2"]

    def run_one(run: SweepRun, bundle: Path) -> None:
        # The baseline, in real time, looks like TDF 1 (the floor undivided).
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id,
                     samples=rtts(run.tdf, 7 * run.repeat + len(run.label)), real_s=5.0 * run.tdf)

    lines: list[str] = []
    run_sweep(plan, tmp_path, run_one, progress=lines.append)
    assert lines[2].startswith("run 3 of 6: mininet baseline, repeat 1")
    analysis = analyze(tmp_path)
    assert [row["tdf"] for row in analysis.rows] == ["1", "1", "10", "10", "mininet", "mininet"]
    assert analysis.baseline_ks["rtt_ms"] < 0.05          # unlike TDF 10's samples
    assert set(analysis.ks["rtt_ms"]) == {1.0, 10.0}       # baseline pooled with no TDF
    assert analysis.recommended == 10
    assert "mininet p=" in analysis.report()
    assert (tmp_path / "rtt_ms.png") in plot(analysis, tmp_path)


def test_bundles_of_an_earlier_sweep_in_the_same_directory_are_skipped_and_named(
        tmp_path, capsys):
    out = tmp_path / "sweep"
    synthetic_sweep(out, tdfs=(1, 5), repeat=1)          # the earlier sweep: all finished
    first_id = json.loads((out / "sweep.json").read_text())["sweep_id"]
    (out / "runs" / "tdf9-r1").mkdir()                   # a stray, of neither sweep

    def run_one(run: SweepRun, bundle: Path) -> None:
        if run.tdf == 5:
            raise BackendError("xl create h1: out of memory")   # no bundle this time
        if run.repeat == 2:
            bundle.mkdir(parents=True)                   # died before its meta.json
            return
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 1))

    plan = SweepPlan("scenarios/demo.py", [1, 5], 2)
    outcomes = run_sweep(plan, out, run_one)
    second_id = json.loads((out / "sweep.json").read_text())["sweep_id"]
    assert second_id == plan.sweep_id and second_id != first_id
    # tdf5-r1 still holds the earlier sweep's ok bundle: this run failed all the same
    assert [(o.run.name, o.status) for o in outcomes] == [
        ("tdf1-r1", "ok"), ("tdf5-r1", "failed"), ("tdf1-r2", "failed"), ("tdf5-r2", "failed")]
    analysis = analyze(out)
    assert [(r["tdf"], r["repeat"], r["sweep_id"]) for r in analysis.rows] == [
        ("1", 1, second_id)]
    assert analysis.skipped == [
        f"{out}/runs/tdf5-r1: of another sweep (sweep_id {first_id}, this sweep's is "
        f"{second_id})",
        f"{out}/runs/tdf1-r2: incomplete (no meta.json)",
        f"{out}/runs/tdf9-r1: not a run of this sweep"]
    assert "TDF 5 not recommended: not run" in analysis.report()
    assert main(["sweep-report", str(out), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert f"skipped {out}/runs/tdf5-r1: of another sweep" in printed
    with (out / "summary.csv").open() as f:
        assert [r["sweep_id"] for r in csv.DictReader(f)] == [second_id]


def _cli_on_the_fake_dom0(fake_xen, tmp_path, monkeypatch) -> Path:
    """`selena sweep` in this process deploys on the fake Dom0; the scenario
    file it is given."""
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    monkeypatch.setattr("selena.experiment.get_backend", lambda name, **kw: backend)
    monkeypatch.setattr("selena.experiment.installed_templates", lambda: None)
    scenario = tmp_path / "pair.py"
    scenario.write_text(PAIR_RECORDING)
    return scenario


def test_the_cli_sweep_writes_its_id_into_every_bundle(fake_xen, tmp_path, monkeypatch,
                                                       capsys):
    scenario = _cli_on_the_fake_dom0(fake_xen, tmp_path, monkeypatch)
    assert main(["sweep", str(scenario), "--tdf", "2", "--out", str(tmp_path / "o"),
                 "--no-plots", "--no-monitor"]) == 0, capsys.readouterr().err
    sweep_id = json.loads((tmp_path / "o/sweep.json").read_text())["sweep_id"]
    meta = json.loads((tmp_path / "o/runs/tdf2-r1/meta.json").read_text())
    assert sweep_id and meta["sweep_id"] == sweep_id and meta["status"] == "ok"


def test_the_report_keeps_its_recommendation_in_recommendation_json(tmp_path, capsys):
    synthetic_sweep(tmp_path, repeat=1)
    assert main(["sweep-report", str(tmp_path), "--no-plots", "--tolerance", "5"]) == 0
    assert "recommendation: TDF 10" in capsys.readouterr().out
    kept = json.loads((tmp_path / "recommendation.json").read_text())
    assert kept["recommended"] == 10.0 and kept["tdfs"] == [1.0, 5.0, 10.0]
    assert kept["sweep_id"] == json.loads((tmp_path / "sweep.json").read_text())["sweep_id"]
    assert sorted(kept["not_recommended"]) == ["1", "5"]
    assert any("differs from TDF 10" in why for why in kept["not_recommended"]["5"])
    # None faithful: null, and every TDF says why.
    other = tmp_path / "none"
    plan = SweepPlan("s.py", [1, 2], 1)
    run_sweep(plan, other, lambda run, bundle: write_bundle(
        bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 3)))
    assert main(["sweep-report", str(other), "--no-plots"]) == 0
    kept = json.loads((other / "recommendation.json").read_text())
    assert kept["recommended"] is None and sorted(kept["not_recommended"]) == ["1", "2"]


def test_metrics_that_share_a_verdict_are_named_together_when_a_tdf_is_not_recommended():
    """The adaptive reproduction's eight metrics repeated one run's monitor
    reasons eight times in a line of 9000 characters."""
    from selena.sweep import _not_recommended

    rows = [{"tdf": "4", "metric": m, "repeat": 1, "verdict": v} for m, v in (
        ("phase1_mbit", "degraded (link late)"),
        ("phase2_mbit", "degraded (link late; median -38.2 % off expected)"),
        ("phase3_mbit", "degraded (link late)"),
        ("phase1_mbit", "ok"))]
    rows.append({"tdf": "8", "metric": "phase1_mbit", "repeat": 1, "verdict": "degraded (x)"})
    assert _not_recommended(4.0, 16.0, [], rows, [], {}, 0.05) == [
        "not run",
        "phase1_mbit, phase3_mbit repeat 1 degraded (link late)",
        "phase2_mbit repeat 1 degraded (link late; median -38.2 % off expected)"]


def _resumable_plan(tdfs=(1, 2, 4), repeat: int = 1, **changes) -> SweepPlan:
    fields = {"scenario": "s.py", "tdfs": list(tdfs), "repeat": repeat, "params": {"n": "3"},
              "scenario_sha256": "ab" * 32, "options": {"--shaping": "dom0"}, **changes}
    return SweepPlan(**fields)


def test_a_resumed_sweep_keeps_what_finished_and_runs_the_rest(tmp_path):
    """An overnight sweep stopped by Ctrl-C (or a power cut) in its third
    run, its first run failed: resumed, it runs those two and keeps the
    second, whose bundle is not touched, under the same sweep id; the time
    to go counts only the runs still to run."""
    ran: list[str] = []

    def interrupted(run: SweepRun, bundle: Path) -> None:
        ran.append(run.name)
        if run.tdf == 1:
            write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=[20.0],
                         status="failed")
        elif run.tdf == 4:
            raise KeyboardInterrupt
        else:
            write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(2, 1),
                         real_s=42.0)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(_resumable_plan(), tmp_path, interrupted)
    assert ran == ["tdf1-r1", "tdf2-r1", "tdf4-r1"]
    sweep_id = json.loads((tmp_path / "sweep.json").read_text())["sweep_id"]
    second = (tmp_path / "runs/tdf2-r1/meta.json").read_bytes()
    ran.clear()

    def finishing(run: SweepRun, bundle: Path) -> None:
        ran.append(run.name)
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 2))

    lines: list[str] = []
    plan = _resumable_plan()
    ticks = iter([0.0, 0.0, 0.0, 21.0, 21.0, 21.0, 105.0])     # TDF 1 takes 21 s
    outcomes = run_sweep(plan, tmp_path, finishing, resume=True, progress=lines.append,
                         clock=lambda: next(ticks))
    assert ran == ["tdf1-r1", "tdf4-r1"] and plan.sweep_id == sweep_id
    assert [(o.run.name, o.status, o.kept) for o in outcomes] == \
        [("tdf1-r1", "ok", False), ("tdf2-r1", "ok", True), ("tdf4-r1", "ok", False)]
    # 21 and 42 s at TDF 1 and 2: 84 s to go at TDF 4.
    assert lines[0] == "run 1 of 3: TDF 1, repeat 1; elapsed 0 s"
    assert lines[1] == "run 2 of 3: TDF 2, repeat 1: finished before (42 s), kept"
    assert lines[2] == "run 3 of 3: TDF 4, repeat 1; elapsed 21 s, about 84 s to go"
    assert (tmp_path / "runs/tdf2-r1/meta.json").read_bytes() == second
    analysis = analyze(tmp_path)
    assert analysis.skipped == [] and [r["tdf"] for r in analysis.rows] == ["1", "2", "4"]
    # Nothing left to do: a second resume runs nothing.
    ran.clear()
    again = run_sweep(_resumable_plan(), tmp_path, finishing, resume=True)
    assert ran == [] and all(o.kept for o in again)


def test_a_resumed_sweeps_time_to_go_leaves_out_the_runs_it_keeps(tmp_path):
    plan = _resumable_plan(tdfs=(1, 2, 4, 8))
    real = {1: 10.0, 2: 1.0, 4: 40.0, 8: 1.0}
    run_sweep(plan, tmp_path, lambda run, bundle: write_bundle(
        bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=[20.0], real_s=real[int(run.tdf)],
        status="ok" if run.tdf in (1, 4) else "failed"))
    lines: list[str] = []
    run_sweep(_resumable_plan(tdfs=(1, 2, 4, 8)), tmp_path, lambda run, bundle: None,
              resume=True, progress=lines.append, clock=lambda: 0.0)
    # 10 s at TDF 1: TDF 2 and 8 about 20 and 80 s; TDF 4 is kept.
    assert lines[1] == "run 2 of 4: TDF 2, repeat 1; elapsed 0 s, about 100 s to go"


def test_a_resume_that_asks_for_another_sweep_is_refused_naming_each_difference(tmp_path):
    run_sweep(_resumable_plan(repeat=2), tmp_path, lambda run, bundle: write_bundle(
        bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=[20.0]))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    def must_not_run(run: SweepRun, bundle: Path) -> None:
        raise AssertionError(f"{run.name} ran")

    for changes, difference in [
        ({"tdfs": [1, 2, 8]}, "--tdf 1,2,4 (this command: 1,2,8)"),
        ({"repeat": 1}, "--repeat 2 (this command: 1)"),
        ({"params": {"n": 4}}, "n=3 (this command: n=4)"),
        ({"params": {}}, "n=3 (this command: no --param)"),
        ({"baseline": "mininet"}, "--baseline none (this command: mininet)"),
        ({"options": {"--shaping": "guest"}}, "--shaping dom0 (this command: guest)"),
        ({"scenario_sha256": "cd" * 32}, "s.py as it was then (sha256 abababababab) (this "
                                         "command: s.py as it is now (sha256 cdcdcdcdcdcd))"),
    ]:
        with pytest.raises(ResultsError) as refused:
            run_sweep(_resumable_plan(**{"repeat": 2, **changes}), tmp_path, must_not_run,
                      resume=True)
        message = str(refused.value)
        assert message == (f"sweep --resume: the sweep in {tmp_path} was begun with "
                           f"{difference}; give the same scenario and options as it was "
                           "begun with (a resume may add TDFs and repeats), or a new --out"), \
            message
    with pytest.raises(ResultsError, match=r"--tdf 1,2,4 \(this command: 1\); --repeat 2 "
                                           r"\(this command: 1\)"):
        check_resumable(tmp_path, _resumable_plan(tdfs=[1], repeat=1))
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_resume_with_more_tdfs_or_repeats_runs_only_what_is_new(tmp_path):
    first = run_sweep(_resumable_plan(tdfs=(1, 2)), tmp_path, lambda run, bundle: write_bundle(
        bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 1)))
    ran: list[str] = []

    def run_one(run: SweepRun, bundle: Path) -> None:
        ran.append(run.name)
        write_bundle(bundle, tdf=run.tdf, sweep_id=run.sweep_id, samples=rtts(run.tdf, 2))

    plan = _resumable_plan(tdfs=(1, 2, 4), repeat=2)
    outcomes = run_sweep(plan, tmp_path, run_one, resume=True)
    assert ran == ["tdf4-r1", "tdf1-r2", "tdf2-r2", "tdf4-r2"]
    assert plan.sweep_id == first[0].run.sweep_id
    assert [o.run.name for o in outcomes if o.kept] == ["tdf1-r1", "tdf2-r1"]
    kept = json.loads((tmp_path / "sweep.json").read_text())
    assert (kept["tdfs"], kept["repeat"], kept["sweep_id"]) == ([1, 2, 4], 2, plan.sweep_id)
    assert len(analyze(tmp_path).runs) == 6


def test_a_resume_needs_a_sweep_that_recorded_what_it_must_match(tmp_path):
    with pytest.raises(ResultsError, match=r"holds no sweep \(no sweep.json\); drop --resume "
                                           "to start one there"):
        check_resumable(tmp_path / "new", _resumable_plan())
    assert not (tmp_path / "new").exists()
    # A sweep.json from before --resume: its scenario's bytes are unknown.
    old = _resumable_plan(scenario_sha256=None, options={})
    old.sweep_id = "0" * 32
    (tmp_path / "sweep.json").write_text(json.dumps(old.to_json()))
    with pytest.raises(ResultsError, match="did not record what a resumed sweep must match; "
                                           "drop --resume to start a new sweep there"):
        check_resumable(tmp_path, _resumable_plan())
    (tmp_path / "sweep.json").write_text('{"scenario": "s.py", "tdfs": [1], "repeat": 1, '
                                         '"options": [1]}')
    with pytest.raises(ResultsError, match=r"sweep.json is damaged \(options are \[1\], not "
                                           r"names and text\)"):
        check_resumable(tmp_path, _resumable_plan())


def test_the_cli_resumes_a_sweep_with_the_same_command_and_refuses_another(
        fake_xen, tmp_path, monkeypatch, capsys):
    scenario = _cli_on_the_fake_dom0(fake_xen, tmp_path, monkeypatch)
    out = tmp_path / "o"
    argv = ["sweep", str(scenario), "--tdf", "2,4", "--out", str(out), "--no-plots",
            "--no-monitor"]
    assert main(argv) == 0, capsys.readouterr().err
    kept = (out / "runs/tdf2-r1/meta.json").read_bytes()
    sweep_id = json.loads((out / "sweep.json").read_text())["sweep_id"]
    # As if the sweep had been stopped during its last run.
    for path in sorted((out / "runs/tdf4-r1").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (out / "runs/tdf4-r1").rmdir()
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 0, capsys.readouterr().err
    printed = capsys.readouterr()
    assert "run 1 of 2: TDF 2, repeat 1: finished before" in printed.err, printed.err
    assert "run 2 of 2: TDF 4, repeat 1; elapsed" in printed.err
    assert "resumed: 1 run(s) kept from before, 1 run now" in printed.err
    assert (out / "runs/tdf2-r1/meta.json").read_bytes() == kept
    meta = json.loads((out / "runs/tdf4-r1/meta.json").read_text())
    assert meta["status"] == "ok" and meta["sweep_id"] == sweep_id
    assert "skipped" not in printed.out and "recommendation: TDF" in printed.out
    # Another shaping, an edited scenario, --auto: refused, nothing run.
    for extra, message in [
        (["--shaping", "guest"], "--shaping dom0 (this command: guest)"),
        (["--no-latency-probe"], "latency probe on (this command: off (--no-latency-probe))"),
    ]:
        assert main([*argv, *extra, "--resume"]) == 1
        assert message in capsys.readouterr().err
    scenario.write_text(PAIR_RECORDING + "# edited\n")
    assert main([*argv, "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"selena: error: sweep --resume: the sweep in {out} was begun with "
                          f"{scenario} as it was then (sha256 ") and err.count("\n") == 1, err
    assert main(["sweep", str(scenario), "--auto", "--out", str(out), "--resume"]) == 1
    assert "--resume continues a sweep of --tdf" in capsys.readouterr().err
    assert (out / "runs/tdf2-r1/meta.json").read_bytes() == kept
    # Without --resume the same directory takes a new sweep, and says so.
    assert main(argv) == 0
    assert "a new sweep; the earlier one's runs there are not its" in capsys.readouterr().err
    assert json.loads((out / "sweep.json").read_text())["sweep_id"] != sweep_id
