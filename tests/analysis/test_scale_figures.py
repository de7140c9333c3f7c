"""The drawing code of the scalability figures (selena.analysis.figures:
starscale, deploy, mflops) on small made-up bundles: what each figure and
table is computed from, beyond the fixture's byte comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selena.analysis.figures import deploy, mflops, spacing, spacing_ccdf, star_run, starscale
from selena.errors import AnalysisError
from selena.fidelity import SPACING_ERROR_EDGES


def _bundle(path: Path, *, tdf=20, params=None, metrics=None, timings=None,
            fidelity=None) -> Path:
    path.mkdir(parents=True)
    meta = {"tdf": tdf, "params": params or {}, "fidelity": {"verdict": "ok"}}
    if timings:
        meta["timings"] = timings
    (path / "meta.json").write_text(json.dumps(meta))
    (path / "metrics.json").write_text(json.dumps(
        {name: {"samples": samples, "expected": expected}
         for name, (samples, expected) in (metrics or {}).items()}))
    if fidelity is not None:
        (path / "fidelity.json").write_text(json.dumps(fidelity))
    return path


def _star(path: Path, tdf: float, clients: int, samples: list[float]) -> Path:
    return _bundle(path, tdf=tdf, params={"clients": clients, "client_mbit": 10},
                   metrics={"client_mbit": (samples, 9.56)},
                   fidelity={"dom0_busy": [0.2, 0.4], "guest_busy": {"h1": [0.1, 0.3],
                                                                     "h2": [0.5, 0.5]}})


def test_a_star_run_is_reliable_when_97_5_percent_of_samples_reach_the_rate(tmp_path):
    good = star_run(_star(tmp_path / "a", 20, 2, [9.5] * 78 + [9.0] * 2))
    # p2.5 interpolates between the 2nd and 3rd of 80 ordered samples.
    assert good.reliable and good.low == pytest.approx(9.4875)
    # 3 of 80 samples (3.75%) more than 5% below: not reliable.
    bad = star_run(_star(tmp_path / "b", 20, 2, [9.5] * 77 + [5.0] * 3))
    assert not bad.reliable
    # CPU: Dom0's mean busy share, and the nodes' means averaged (20% and 50%).
    assert good.dom0_pct == pytest.approx(30.0) and good.guests_pct == pytest.approx(35.0)
    assert (good.tdf, good.clients, good.client_mbit) == (20.0, 2, 10.0)


def test_the_papers_one_second_windows_are_judged_where_a_run_recorded_them(tmp_path):
    """TCP's 100 ms windows swing well past 5 % around a faithful rate; the
    paper's Figures 7, 8 and 10 count 1 s windows, which a run records as
    client_mbit_1s. Older runs have only the 100 ms ones, and say so."""
    swinging = [8.5, 10.5] * 40                         # 100 ms: p2.5 11 % low
    steady = [9.5] * 16                                 # the same flow's seconds
    both = _bundle(tmp_path / "new", params={"clients": 4, "client_mbit": 10},
                   metrics={"client_mbit": (swinging, 9.56), "client_mbit_1s": (steady, 9.56)})
    old = _star(tmp_path / "old", 20, 4, swinging)
    assert star_run(both).window == "1 s" and star_run(both).reliable
    assert star_run(both).samples == steady
    assert star_run(old).window == "100 ms" and not star_run(old).reliable


def test_figure_10_counts_the_most_clients_each_tdf_carries(tmp_path):
    root = tmp_path / "starscale"
    ok, late = [9.5] * 80, [9.5] * 70 + [3.0] * 10
    for clients, by_tdf in ((2, {5: ok, 20: ok}), (4, {5: late, 20: ok}),
                            (8, {5: late, 20: late})):
        for tdf, samples in by_tdf.items():
            _star(root / f"clients{clients}" / f"tdf{tdf}-r1", tdf, clients, samples)
    drawn = starscale(root, tmp_path / "out")
    assert [p.name for p in drawn.figures] == ["star_fig8_clients.png",
                                              "star_fig10_clients_per_tdf.png"]
    rows = drawn.tables["starscale"].splitlines()[2:]
    reliable = {(r.split("|")[2].strip(), r.split("|")[3].strip()): r.split("|")[8].strip()
                for r in rows}
    assert reliable == {("5", "2"): "yes", ("5", "4"): "no", ("5", "8"): "no", ("20", "2"): "yes",
                        ("20", "4"): "yes", ("20", "8"): "no"}


def test_deploy_sums_deploy_and_boot_and_keeps_the_paper_row(tmp_path):
    root = tmp_path / "deploy"
    for hosts, dep, boot in ((52, 40.0, 80.0), (13, 10.0, 30.0)):
        _bundle(root / f"hosts{hosts}", tdf=1, params={"hosts": hosts},
                timings={"deploy_s": dep, "boot_to_agents_s": boot},
                metrics={"guests_up": ([hosts], hosts), "dom0_used_mb": ([400.0], None),
                         "dom0_total_mb": ([1536.0], None)})
    drawn = deploy(root, tmp_path / "out")
    rows = drawn.tables["deploy"].splitlines()
    assert rows[2] == "| 13 | 13 | 10.0 | 30.0 | 40.0 | 3.08 | 400 of 1536 |"
    assert rows[3] == "| 52 | 52 | 40.0 | 80.0 | 120.0 | 2.31 | 400 of 1536 |"
    assert rows[4] == "| 52 (paper) | | | | about 130 | 2.5 | |"
    with pytest.raises(AnalysisError, match="no hosts"):
        deploy(tmp_path / "empty", tmp_path / "out")


def test_mflops_tables_both_figures_and_the_ideal_from_one_capped_vm(tmp_path):
    root = tmp_path / "mflops"
    _bundle(root / "fig2-dilated", tdf=1, metrics={
        "work_per_s_tdf1_vms1": ([1000.0, 1200.0], None),
        "work_per_s_tdf1_vms2": ([2000.0], None), "work_per_s_tdf10_vms2": ([20000.0], None)})
    _bundle(root / "fig3-real", tdf=1, metrics={
        "work_per_s_tdf1_vms1": ([1000.0], None), "work_per_s_tdf10_vms2": ([1900.0], None)})
    drawn = mflops(root, tmp_path / "out")
    assert [p.name for p in drawn.figures] == ["qjump_fig2_mflops.png", "qjump_fig3_mflops.png"]
    rows = drawn.tables["mflops"].splitlines()[2:]
    assert rows == ["| 1 | 1 | 1.1 | 1 | 1 |", "| 2 | 1 | 2 |  | 2 |",
                    "| 2 | 10 | 20 | 1.9 | 2 |"]


def test_the_spacing_ccdf_counts_departures_at_or_beyond_each_edge():
    hist = [0] * (len(SPACING_ERROR_EDGES) + 1)
    hist[0], hist[4], hist[-1] = 6, 3, 1      # on time; in [1, 2) frames; >= 1024
    ccdf = dict(spacing_ccdf(hist))
    assert ccdf[0.125] == pytest.approx(0.4) and ccdf[1.0] == pytest.approx(0.4)
    assert ccdf[2.0] == pytest.approx(0.1) and ccdf[1024.0] == pytest.approx(0.1)
    assert spacing_ccdf([0] * len(hist)) == []
    with pytest.raises(AnalysisError, match="3 bins"):
        spacing_ccdf([1, 2, 3])


def test_the_spacing_table_takes_each_run_s_busiest_link(tmp_path):
    hist = [0] * (len(SPACING_ERROR_EDGES) + 1)
    hist[0], hist[9] = 90, 10                  # 10% at >= 32 frames
    spaced = {"label": "h1 -> h2", "spaced": 100, "late": 10, "late_share": 0.1,
              "worst_late_ms": 2.0, "error_hist": hist}
    idle = {**spaced, "spaced": 3, "late_share": 0.0, "error_hist": [3] + [0] * (len(hist) - 1)}
    _bundle(tmp_path / "spacing" / "rate80" / "tdf1-r1", tdf=1, params={"rate_mbit": 80},
            metrics={"tcp_mbit": ([70.0], 76.5)},
            fidelity={"spacing": {"vif1.0": idle, "vif2.0": spaced}})
    drawn = spacing(tmp_path / "spacing", tmp_path / "out")
    assert [p.name for p in drawn.figures] == ["spacing_ccdf.png"]
    row = drawn.tables["spacing"].splitlines()[2]
    assert row.startswith("| 80 | 1 | 100 | 10.00% | 10.00% | 2 |"), row
