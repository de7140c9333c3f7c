"""`selena reproduce` (selena.reproduce): each reproduction's lab commands,
the fresh directory, progress and total, and docs/results refreshed."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import subprocess
from pathlib import Path

import figures_fixture
import pytest
from fake_runner import FakeRunner

from selena.cli import build_parser, main
from selena.errors import ResultsError, ScenarioError
from selena.lab.qemu import POWER_OFF_S
from selena.reproduce import (
    ALL_RUN,
    DEFAULTS,
    MARK,
    OUT,
    Params,
    collect,
    fresh_directory,
    lab_script,
    reproductions,
    run,
    run_all,
    trim_metrics,
)
from selena.runner import CommandResult

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def test_every_reproduction_names_scenarios_that_exist():
    for r in reproductions().values():
        for step in r.steps:
            assert OUT in step.argv, (r.name, step.name)
            if step.program != ("selena",):
                # A lab benchmark writing its own bundle: a module of the tree.
                module = step.program[step.program.index("-m") + 1]
                assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module
                continue
            if step.argv[0] == "calibrate":
                continue            # this host's floor: no scenario
            scenario = next(a for a in step.argv if a.startswith("scenarios/"))
            assert (ROOT / scenario).is_file(), scenario


def test_the_new_reproductions_run_at_reduced_scale_with_the_papers_as_a_parameter():
    catalogue = reproductions(Params(deploy_hosts="52", starscale_clients="8,16",
                                      mflops_vms="1,2,5,10"))
    deploy = lab_script(catalogue["deploy"], Path("D"))
    assert "selena run scenarios/deploy_scale.py --param hosts=52 --out D/hosts52" in deploy
    assert catalogue["deploy"].lab_args == ("--memory", "6144")
    assert [s.name for s in reproductions()["deploy"].steps] == ["hosts13", "hosts26", "hosts52"]
    star = lab_script(catalogue["starscale"], Path("S"))
    assert ("selena run scenarios/star_throughput.py --tdf 20 --param clients=4 --param "
            "client_mbit=40 --param stagger_s=0 --param last_s=5 --out S/fig7-40mbit") in star
    assert ("selena sweep scenarios/star_throughput.py --tdf 5,10,20 --param clients=16 "
            "--param client_mbit=10 --param stagger_s=0 --param last_s=5 --out S/clients16") \
        in star
    mflops = lab_script(catalogue["mflops"], Path("M"))
    assert "--param cpu=real --param vms=1,2,5,10 --out M/fig3-real" in mflops
    bandwidth = lab_script(reproductions(Params(bandwidth_tdfs="5,10"))["bandwidth"], Path("B"))
    assert ("python3 -m selena.lab.bench_bandwidth --tdfs 5,10 --refine 2 --out B/bench"
            in bandwidth)
    spacing = lab_script(reproductions(Params(spacing_rates="10,1000"))["spacing"], Path("P"))
    assert ("selena sweep scenarios/spacing_ccdf.py --tdf 1,10 --param rate_mbit=1000 --out "
            "P/rate1000") in spacing
    for script in (deploy, star, mflops, bandwidth, spacing):
        subprocess.run(["sh", "-n", "-c", script], check=True)


def test_the_lab_script_runs_every_step_between_marks_into_the_fresh_directory():
    qjump = reproductions(Params(qjump_ptpd_tdfs=("10", "50")))["qjump"]
    script = lab_script(qjump, Path("build/results/qjump/D"))
    lines = script.splitlines()
    assert lines[0] == "set -e"
    commands = [line for line in lines if line.startswith("selena ")]
    assert len(commands) == len(qjump.steps) == 9
    assert commands[0] == "selena run scenarios/qjump_ping.py --out build/results/qjump/D/ping"
    # PTPd above TDF 20 with 10 s windows, the parameters the old Makefile could not pass.
    assert commands[-1] == ("selena run scenarios/qjump_ptpd.py --tdf 50 --param settle_s=15 "
                            "--param idle_s=10 --param bulk_s=10 --out "
                            "build/results/qjump/D/ptpd-tdf50")
    assert lines[1] == f"echo {MARK} start 1 ping" and lines[3] == f"echo {MARK} done 1 ping"
    # Figure 11 at the paper's load unless told.
    fct = lab_script(reproductions()["fct"], Path("F"))
    assert "env SELENA_FCT_RATE=50 SELENA_FCT_SCALE=10 selena run " \
           "scenarios/switch_model_fct.py --tdf 10 --no-latency-probe --out F/run" in fct
    subprocess.run(["sh", "-n", "-c", script], check=True)       # valid shell


def test_a_fresh_directory_is_never_an_existing_one(tmp_path):
    fresh = fresh_directory(tmp_path, "star", NOW)
    assert fresh == tmp_path / "star" / "20260101T000000Z"
    fresh.mkdir(parents=True)
    with pytest.raises(ResultsError, match="never writes over older results"):
        fresh_directory(tmp_path, "star", NOW)


class LabRunner(FakeRunner):
    """`selena lab run` as the lab would do it: the fixture's made-up
    bundles appear in the fresh directory, the script's marks on stdout."""

    def stream(self, argv, on_line, **kwargs):
        self.calls.append(tuple(argv))
        self.stop_grace_s = kwargs.get("stop_grace_s", 0.0)
        script = argv[-1]
        fresh = Path(kwargs["cwd"]) / re.search(r"--out (\S+)/[^/\s]+\n", script + "\n")[1]
        name = fresh.parent.name
        made = figures_fixture.raw(self.scratch)[name]
        fresh.parent.mkdir(parents=True, exist_ok=True)
        made.rename(fresh)
        for line in script.splitlines():
            if line.startswith("echo "):
                on_line(line[5:] + "\n")
            else:
                on_line(f"(lab) {line}\n")
        return CommandResult(tuple(argv), 0, "", "", 0.0)


def test_a_run_writes_fresh_results_and_refreshes_docs_results(tmp_path):
    root = tmp_path / "tree"
    (root / "docs" / "results" / "fct" / "stale").mkdir(parents=True)
    runner = LabRunner()
    runner.scratch = tmp_path / "scratch"
    runner.respond(["git", "-C", str(root), "rev-parse", "HEAD"], stdout="abc123\n")
    said: list[str] = []
    fresh = run(reproductions()["fct"], root=root, runner=runner, say=said.append,
                selena=("selena",), now=NOW)
    assert fresh == root / "build/results/fct/20260101T000000Z"
    (lab,) = [c for c in runner.calls if c[:3] == ("selena", "lab", "run")]
    # The lab's default hour would stop QJump midway: each gets twice its estimate.
    assert lab[3:8] == ("--timeout", "3600", "--", "sh", "-c")
    # Interrupted, the lab run gets the time to power its lab off (the
    # session waits up to POWER_OFF_S for Dom0 before killing QEMU).
    assert runner.stop_grace_s > POWER_OFF_S
    # A long reproduction gets twice its estimate (135 min), past the lab's hour.
    assert reproductions()["qjump"].lab_timeout_s == 16200
    # One progress line per run, the output in between, the total at the end.
    assert said[0].startswith("[fct] SELENA Figure 11")
    progress = re.compile(r"\[fct 1/1\] run: (started \(\d+ s in\)|done in \d+ s)")
    assert len([s for s in said if progress.fullmatch(s)]) == 2
    assert said[2].startswith("[fct 1/1] run: started") and said[3].startswith("(lab) env")
    assert said[-2].startswith("[fct 1/1] run: done in")
    assert not [s for s in said if MARK in s]               # the marks are not shown
    assert re.fullmatch(r"\[fct\] done in 0 min \d+ s; docs/results/fct refreshed .*",
                        said[-1])
    target = root / "docs" / "results" / "fct"
    assert not (target / "stale").exists()                     # replaced whole
    assert sorted(p.name for p in (target / "run").iterdir()) == [
        "fct-ideal.csv", "fct-pica8-p3290.csv", "meta.json", "metrics.json", "summary.csv"]
    provenance = json.loads((target / "provenance.json").read_text())
    assert provenance["commit"] == "abc123"
    assert provenance["command"] == "selena reproduce fct"
    assert provenance["date"] == "2026-01-01T00:00:00Z"
    assert provenance["steps"][0]["command"].startswith(
        "env SELENA_FCT_RATE=50 SELENA_FCT_SCALE=10 selena run ")
    assert provenance["steps"][0]["real_s"] is not None
    # A second run the same second would write over it: refused before the lab.
    with pytest.raises(ResultsError):
        run(reproductions()["fct"], root=root, runner=runner, say=said.append, now=NOW)


class FailingLab(FakeRunner):
    def stream(self, argv, on_line, **kwargs):
        self.calls.append(tuple(argv))
        on_line(f"{MARK} start 1 run\n")
        on_line("selena: error: something broke\n")
        return CommandResult(tuple(argv), 1, "", "", 0.0)


def test_a_failed_lab_run_leaves_docs_results_as_it_was(tmp_path):
    old = tmp_path / "docs" / "results" / "fct" / "provenance.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    said: list[str] = []
    with pytest.raises(ResultsError, match=r"^reproduce fct: the lab run exited with status 1; "
                                           r"what it wrote is in build/results/fct/20260101T"
                                           r"000000Z, docs/results/fct is left as it was$"):
        run(reproductions()["fct"], root=tmp_path, runner=FailingLab(), say=said.append,
            now=NOW)
    assert old.read_text() == "{}"
    assert said[-1] == "selena: error: something broke"


def test_run_all_prints_the_total_and_refuses_an_unknown_name(tmp_path):
    runner = LabRunner()
    runner.scratch = tmp_path / "scratch"
    said: list[str] = []
    with pytest.raises(Exception, match="no reproduction stra"):
        run_all(["stra"], reproductions(), root=tmp_path, runner=runner, say=said.append)
    assert runner.calls == []
    run_all(["star"], reproductions(), root=tmp_path, runner=runner, say=said.append,
            selena=("selena",))
    assert re.fullmatch(r"all 1 reproduction\(s\) done in 0 min \d+ s", said[-1])
    assert (tmp_path / "docs/results/star/sweep/tdf10-r1/metrics.json").exists()
    # Not every reproduction: no record of a run in one go.
    assert not (tmp_path / "docs/results" / ALL_RUN).exists()


def test_run_all_of_every_reproduction_records_the_run_in_one_go(tmp_path):
    """Only a run of every reproduction, in order, writes reproduce-all.json:
    each one's lab time and the total, and whether the scale was the
    default; the index in docs/reproductions.md is drawn from it."""
    star_only = {"star": reproductions()["star"]}
    runner = LabRunner()
    runner.scratch = tmp_path / "scratch"
    said: list[str] = []
    run_all(["star"], star_only, root=tmp_path, runner=runner, say=said.append,
            selena=("selena",))
    record = json.loads((tmp_path / "docs/results" / ALL_RUN).read_text())
    assert [r["name"] for r in record["reproductions"]] == ["star"]
    assert record["real_s"] >= record["reproductions"][0]["real_s"] >= 0
    assert record["reproductions"][0]["source"].startswith("build/results/star/")
    assert record["default_scale"] is False     # not the default catalogue
    assert said[-1] == f"every reproduction ran in one go: docs/results/{ALL_RUN} written"
    assert not list((tmp_path / "docs/results").glob(".*.tmp"))


def test_metrics_over_the_cap_keep_their_summary_only():
    metrics = {"big": {"samples": list(range(20_001)), "median": 10000, "n": 20001},
               "small": {"samples": [1.0, 2.0]}}
    trimmed = trim_metrics(metrics)
    assert trimmed["big"] == {"samples": [], "samples_dropped": 20001, "median": 10000,
                              "n": 20001}
    assert trimmed["small"] == metrics["small"]


def test_collect_refuses_a_directory_without_bundles(tmp_path):
    (tmp_path / "fresh").mkdir()
    with pytest.raises(ResultsError, match="no results bundle"):
        collect(tmp_path / "fresh", tmp_path / "out", {})
    assert not (tmp_path / "out").exists()


def test_the_makefile_runs_every_reproduction_through_selena_reproduce():
    make = subprocess.run(["make", "-n", "-C", str(ROOT), "reproduce-all",
                           "VENV=/nonexistent-venv", "SELENA=selena"],
                          capture_output=True, text=True, check=True).stdout
    names = " ".join(reproductions())
    lines = make.splitlines()
    # The scale checked first (--list runs nothing), then the lab built, then all.
    check = lines.index(f"selena reproduce --list {names} >/dev/null")
    assert lines[check + 1:check + 3] == ["selena lab build", f"selena reproduce {names}"]
    for name in reproductions():
        target = subprocess.run(["make", "-n", "-C", str(ROOT), f"reproduce-{name}",
                                 "SELENA=selena"], capture_output=True, text=True,
                                check=True).stdout.splitlines()
        check = target.index(f"selena reproduce --list {name} >/dev/null")
        assert target[check + 1].startswith("selena lab build"), name
        assert target[check + 2] == f"selena reproduce {name}", name


def test_a_bad_scale_is_one_line_naming_the_option_before_anything_runs(capsys, monkeypatch):
    bad = {"star_tdfs": "x", "fattree_tdfs": "1,0.5", "starscale_tdfs": ",",
           "bandwidth_tdfs": "5,2000", "spacing_tdfs": "1,10.0001",
           "qjump_ptpd_tdfs": ("1", "ten"), "starscale_clients": "2,abc",
           "deploy_hosts": "0", "mflops_vms": "-1", "starscale_rates": "5,nan",
           "spacing_rates": "0", "fct_rate": -5.0, "fct_scale": float("inf"),
           "fattree_memory": 0, "deploy_memory": -1, "bandwidth_refine": 9}
    assert set(bad) == {f.name for f in dataclasses.fields(Params)} - {"adaptive_tdfs"}
    for name, value in bad.items():
        option = "--" + name.replace("_", "-")
        with pytest.raises(ScenarioError, match=rf"^reproduce: {option} .*: want ") as caught:
            Params(**{name: value})
        assert "\n" not in str(caught.value), name
    # From the command line: one line, and nothing run.
    ran: list[object] = []
    monkeypatch.setattr("selena.cli.reproduce.run_all", lambda *a, **k: ran.append(a))
    assert main(["reproduce", "star", "--star-tdfs", "1,x"]) == 1
    assert ran == []
    err = capsys.readouterr().err.strip()
    assert err == ("selena: error: reproduce: --star-tdfs 'x' (TDF 'x' is not a number): "
                   "want TDFs from 1 to 1000, e.g. 1,10")


def test_make_passes_only_the_scale_variables_that_are_set():
    # The defaults live in selena.reproduce.Params alone: unset, make passes
    # nothing and the CLI's defaults (Params') hold; set, the option goes
    # through (a space-separated list quoted).
    def dry_run(target, *assignments):
        return subprocess.run(["make", "-n", "-s", "-C", str(ROOT), target, "SELENA=selena",
                               *assignments], capture_output=True, text=True,
                              check=True).stdout.splitlines()[-1]
    assert dry_run("reproduce-star") == "selena reproduce star"
    assert dry_run("reproduce-qjump", "QJUMP_PTPD_TDFS=1 10", "STAR_TDFS=1,2") == \
        'selena reproduce --star-tdfs 1,2 --qjump-ptpd-tdfs "1 10" qjump'
    assert dry_run("bench-bandwidth") == "selena lab bench-bandwidth"
    assert dry_run("bench-bandwidth", "BANDWIDTH_REFINE=1") == \
        "selena lab bench-bandwidth --refine 1"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for field in dataclasses.fields(Params):
        assert not re.search(rf"^{field.name.upper()}\s*\??=", makefile, re.M), field.name
    args = build_parser().parse_args(["reproduce", "star"])
    assert {f.name: getattr(args, f.name) for f in dataclasses.fields(Params)} == {
        **dataclasses.asdict(DEFAULTS), "qjump_ptpd_tdfs": "1,10,20,50"}


def test_the_docs_list_the_reproductions_defaults():
    text = (ROOT / "docs" / "reproductions.md").read_text(encoding="utf-8")
    paragraph = " ".join(next(part for part in text.split("\n\n")
                              if part.startswith("Variables")).split())
    listed = {name: quoted or bare for name, quoted, bare in re.findall(
        r"`([A-Z_]+)` \(default (?:`([^`]+)`|([^\s;)]+))", paragraph)}
    for field in dataclasses.fields(Params):
        name = field.name.upper()
        if name == "FCT_SCALE":
            continue                # `selena reproduce --fct-scale` only, no make variable
        default = getattr(DEFAULTS, field.name)
        default = " ".join(default) if isinstance(default, tuple) else default
        expected = f"{default:g}" if isinstance(default, float) else str(default)
        assert listed.get(name) == expected, (name, listed.get(name), expected)


def test_the_cli_lists_and_refuses_with_one_line(capsys):
    assert main(["reproduce", "--list", "fct"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# fct: SELENA Figure 11") and "SELENA_FCT_RATE=50" in out
    # Options reach the reproductions (a space-separated list as make quotes it).
    assert main(["reproduce", "--qjump-ptpd-tdfs", "10 50", "--list", "qjump"]) == 0
    listed = capsys.readouterr().out
    want = lab_script(reproductions(Params(qjump_ptpd_tdfs=("10", "50")))["qjump"],
                      Path("build/results/qjump/DATE"))
    assert want in listed and want != lab_script(reproductions()["qjump"],
                                                 Path("build/results/qjump/DATE"))
    assert main(["reproduce", "stra"]) != 0
    err = capsys.readouterr().err.strip()
    assert err == "selena: error: reproduce: no reproduction stra (have star, fct, qjump, " \
                  "fattree, adaptive, starscale, deploy, mflops, bandwidth, spacing)"


def test_the_adaptive_comparison_sweeps_its_grid_then_runs_auto_over_its_range():
    adaptive = reproductions(Params(adaptive_tdfs="1,4,16"))["adaptive"]
    commands = [line for line in lab_script(adaptive, Path("A")).splitlines()
                if line.startswith("selena ")]
    assert commands == [
        "selena sweep scenarios/adaptive_phases.py --tdf 1,4,16 --out A/sweep",
        "selena calibrate --bundle A/calibrate",
        "selena run scenarios/adaptive_phases.py --tdf auto:1-16 --out A/adaptive"]
    assert adaptive.figures == ("adaptive_phases.png",)
    # The estimate grows with the grid: its runs dominate.
    assert reproductions()["adaptive"].minutes > adaptive.minutes >= 20
    for bad, why in (("2,4", "from 1"), ("1", "from 1"), ("1,8,4", "increasing"),
                     ("1,x", "TDF")):
        with pytest.raises(Exception, match=rf"adaptive TDFs '{re.escape(bad)}': .*{why}"):
            reproductions(Params(adaptive_tdfs=bad))
    assert main(["reproduce", "--adaptive-tdfs", "1,0.5", "--list", "adaptive"]) != 0
