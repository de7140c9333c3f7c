"""The QJump reproduction's tables from result bundles (metrics.json)."""

import json

import pytest

from selena.analysis.qjump import main, ping_rows, ptpd_rows
from selena.errors import AnalysisError


def _bundle(root, name, metrics):
    (root / name).mkdir(parents=True)
    (root / name / "metrics.json").write_text(json.dumps(
        {k: {"samples": v, "unit": "us"} for k, v in metrics.items()}))


def test_the_tables_put_each_measurement_beside_the_papers(tmp_path):
    _bundle(tmp_path, "ptpd-tdf10", {"ptpd_max_abs_offset_idle_us": [120.5],
                                     "ptpd_max_abs_offset_bulk_us": [3000.0]})
    _bundle(tmp_path, "ptpd-tdf1", {"ptpd_max_abs_offset_idle_us": [900.0],
                                    "ptpd_max_abs_offset_bulk_us": [8000.0]})
    rows = ptpd_rows(tmp_path)
    assert rows[2] == "| testbed (paper) | | 20.626 | | 1240.14 |"
    # In TDF order (1 before 10), each beside the paper's Table I.
    assert rows[3] == "| TDF 1 | 900.0 | 158.547 | 8000.0 |  |"
    assert rows[4] == "| TDF 10 | 120.5 | 131.354 | 3000.0 | 31045.6 |"
    _bundle(tmp_path, "ping", {"ping_idle_rtt_us": [50.0, 40.0, 60.0],
                               "ping_bulk_rtt_us": [900.0, 1100.0, 1000.0]})
    _bundle(tmp_path, "ping-prio", {"ping_idle_rtt_us": [50.0],
                                    "ping_bulk_rtt_us": [70.0, 80.0, 90.0, 500.0]})
    rows = ping_rows(tmp_path)
    assert rows[2:] == ["| idle | 50.0 | 60.0 | 44.9 |", "| iperf | 1000.0 | 1100.0 | 1060 |",
                        "| iperf + QJump | 85.0 | 500.0 | 86.2 |"]
    assert main([str(tmp_path)]) == 0


def test_a_missing_run_or_metric_is_named(tmp_path):
    with pytest.raises(AnalysisError, match="no ptpd-tdf"):
        ptpd_rows(tmp_path)
    _bundle(tmp_path, "ping", {"ping_idle_rtt_us": [1.0]})
    with pytest.raises(AnalysisError, match=r"ping/metrics.json: no metric ping_bulk_rtt_us"):
        ping_rows(tmp_path)
    assert main([str(tmp_path)]) == 1
