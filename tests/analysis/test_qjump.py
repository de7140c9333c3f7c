"""The QJump reproduction's tables from result bundles (metrics.json)."""

import json
from datetime import UTC, datetime

import pytest

from selena.analysis.memaslap import log2_cdf
from selena.analysis.qjump import (
    main,
    memcached_rows,
    ping_rows,
    plot,
    ptpd_rows,
    ptpd_timeline,
)
from selena.errors import AnalysisError


def _bundle(root, name, metrics):
    (root / name).mkdir(parents=True)
    (root / name / "metrics.json").write_text(json.dumps(
        {k: {"samples": v, "unit": "us"} for k, v in metrics.items()}))


def test_the_tables_put_each_measurement_beside_the_papers(tmp_path):
    _ptpd_bundle(tmp_path, 10, idle_s=120.5e-6, bulk_s=3000e-6, step_at=3)
    _ptpd_bundle(tmp_path, 1, idle_s=900e-6, bulk_s=8000e-6)
    # A bundle that is not ptpd-tdf<N> is not a row.
    (tmp_path / "ptpd-tdf10b").mkdir()
    rows = ptpd_rows(tmp_path)
    assert rows[2] == "| testbed (paper) | | 20.626 | | 1240.14 |"
    # In TDF order (1 before 10), each beside the paper's Table I, computed
    # from PTPd's own output: TDF 10's clock step (1.5 s) before the idle
    # samples is synchronisation, not error.
    assert rows[3:] == ["| TDF 1 | 900.0 | 158.547 | 8000.0 |  |",
                        "| TDF 10 | 120.5 | 131.354 | 3000.0 | 31045.6 |"]
    _bundle(tmp_path, "ping", {"ping_idle_rtt_us": [50.0, 40.0, 60.0],
                               "ping_bulk_rtt_us": [900.0, 1100.0, 1000.0]})
    _bundle(tmp_path, "ping-prio", {"ping_idle_rtt_us": [50.0],
                                    "ping_bulk_rtt_us": [70.0, 80.0, 90.0, 500.0]})
    rows = ping_rows(tmp_path)
    # Median and p5 / p95, as the docs' table shows them.
    assert rows[2:] == ["| idle | 50.0 | 40.0 / 60.0 | 44.9 |",
                        "| iperf | 1000.0 | 900.0 / 1100.0 | 1060 |",
                        "| iperf + QJump | 85.0 | 70.0 / 500.0 | 86.2 |"]
    _memcached(tmp_path, "memcached", 1000.0)
    assert main([str(tmp_path)]) == 0


def _memcached(root, name, mean):
    metrics = {}
    for phase, factor in (("idle", 1), ("bulk", 3)):
        metrics.update({f"memcached_{phase}_mean_us": [mean * factor],
                        f"memcached_{phase}_std_us": [mean / 2 * factor],
                        f"memcached_{phase}_tps": [7000.0 / factor],
                        f"memcached_{phase}_log2_hist": [0, 0, 1, 3, 0, 4 * factor]})
    _bundle(root, name, metrics)


def test_memcached_runs_sit_beside_table_ii_and_the_paper_setting_is_required(tmp_path):
    with pytest.raises(AnalysisError, match=r"memcached/metrics.json: cannot read"):
        memcached_rows(tmp_path)
    _memcached(tmp_path, "memcached", 1000.0)
    _memcached(tmp_path, "memcached-real", 5000.0)
    rows = memcached_rows(tmp_path)
    # The priority run was not made: its rows are left out, in table order.
    assert rows[2:] == [
        "| paper's workload, window scaled | idle | 1000 | 500 | 7000 | 435.34 | 142.52 | "
        "329.42 | 62.05 |",
        "| paper's workload, window scaled | beside iperf | 3000 | 1500 | 2333 | 2733.97 | "
        "3303.93 | 369.09 | 158.08 |",
        "| cpu_time=real | idle | 5000 | 2500 | 7000 | 435.34 | 142.52 | 329.42 | 62.05 |",
        "| cpu_time=real | beside iperf | 15000 | 7500 | 2333 | 2733.97 | 3303.93 | 369.09 "
        "| 158.08 |"]


def test_the_recorded_log2_histogram_becomes_a_cdf_at_powers_of_two():
    # Sample k of the recorded metric counts requests in (2^(k-1), 2^k] us.
    assert log2_cdf(dict(enumerate([0, 0, 1, 3, 0, 4]))) == [
        (4.0, 0.125), (8.0, 0.5), (16.0, 0.5), (32.0, 1.0)]
    assert log2_cdf(dict(enumerate([0, 0]))) == []


def _ptpd_bundle(root, tdf, idle_s=0.00001, bulk_s=0.001, step_at=None):
    node = root / f"ptpd-tdf{tdf}" / "nodes" / "h1"
    node.mkdir(parents=True)
    commands = [(1, "exec ptpd -M -i eth0", ""), (2, "exec ptpd -s -i eth0 -V", None)]
    marks = (1795600000.0, 1795600020.0, 1795600040.0)
    commands += [(3 + i, "date +%s.%N", f"{t:.6f}\n") for i, t in enumerate(marks)]
    lines = []
    for i in range(-8, 48 * 4):
        when = marks[0] + i / 4
        offset = 1.5 if i == step_at else (idle_s if when < marks[1] else bulk_s)
        stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"{stamp}, slv, 1, 0.000050, {offset:.9f}, 0, 0")
    for seq, command, out in commands:
        (node / f"{seq}.json").write_text(json.dumps({"command": command, "seq": seq}))
        (node / f"{seq}.stdout").write_text("\n".join(lines) if out is None else out)
    return marks


def test_the_ptpd_timeline_comes_from_the_slaves_own_output_and_clock(tmp_path):
    marks = _ptpd_bundle(tmp_path, 10)
    samples, found = ptpd_timeline(tmp_path / "ptpd-tdf10")
    assert found == list(marks)
    assert len(samples) == 200 and samples[0].t == marks[0] - 2
    with pytest.raises(AnalysisError, match="no PTPd slave output on h2"):
        ptpd_timeline(tmp_path / "ptpd-tdf10", slave="h2")
    (tmp_path / "ptpd-tdf10" / "nodes" / "h1" / "5.json").unlink()
    with pytest.raises(AnalysisError, match=r"2 `date` marks on h1, want 3"):
        ptpd_timeline(tmp_path / "ptpd-tdf10")


def test_the_plots_are_drawn_from_the_bundles(tmp_path):
    _bundle(tmp_path, "ping", {"ping_idle_rtt_us": [50.0, 40.0, 60.0],
                               "ping_bulk_rtt_us": [900.0, 1100.0, 1000.0]})
    _bundle(tmp_path, "ping-prio", {"ping_bulk_rtt_us": [70.0, 80.0, 90.0, 500.0]})
    _memcached(tmp_path, "memcached", 1000.0)
    _memcached(tmp_path, "memcached-prio", 800.0)
    _ptpd_bundle(tmp_path, 1)
    _ptpd_bundle(tmp_path, 10, step_at=3)
    paths = plot(tmp_path, tmp_path / "plots")
    assert [p.name for p in paths] == ["qjump_ping_cdf.png", "qjump_memcached_cdf.png",
                                       "qjump_ptpd_offsets.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    # A run missing its samples is named, not drawn empty.
    _bundle(tmp_path, "memcached-real", {"memcached_idle_log2_hist": [0, 0]})
    with pytest.raises(AnalysisError, match="cpu_time=real, idle: no samples to plot"):
        plot(tmp_path, tmp_path / "plots")
    _bundle(tmp_path, "memcached-c8", {"memcached_idle_log2_hist": [0, 1]})
    (tmp_path / "memcached-real" / "metrics.json").unlink()
    (tmp_path / "memcached-real").rmdir()
    with pytest.raises(AnalysisError, match="memcached-c8/metrics.json: no metric "
                                            "memcached_bulk_log2_hist"):
        plot(tmp_path, tmp_path / "plots")


def test_a_missing_run_or_metric_is_named(tmp_path):
    with pytest.raises(AnalysisError, match="no ptpd-tdf<N> bundles"):
        ptpd_rows(tmp_path)
    _bundle(tmp_path, "ping", {"ping_idle_rtt_us": [1.0]})
    with pytest.raises(AnalysisError, match=r"ping/metrics.json: no metric ping_bulk_rtt_us"):
        ping_rows(tmp_path)
    assert main([str(tmp_path)]) == 1
