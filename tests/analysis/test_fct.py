"""FCT analysis: flowgen CSV parsing, empirical CDF, summary statistics, the CDF
table and the PNG plot."""

from __future__ import annotations

import csv
import logging
import math
import sys
from pathlib import Path

import pytest

from selena.analysis import fct
from selena.analysis.fct import FlowRecord
from selena.errors import AnalysisError, FlowCsvError, SelenaError

FLOWGEN_OUTPUT = """\
flow,start_ns,end_ns,fct_s,bytes,status
0,1000000000,1012000000,0.012000000,1000000,ok
1,1100000000,2150000000,1.050000000,1000000,ok
2,1200000000,61200000000,60.000000000,65536,timeout
3,1300000000,1300100000,0.000100000,0,error:ECONNREFUSED
4,1400000000,4500000000,3.100000000,1000000,ok
"""


def test_parses_flowgen_output_into_typed_records() -> None:
    records = fct.parse_flowgen_csv(FLOWGEN_OUTPUT)
    assert records[0] == FlowRecord(0, 1000000000, 1012000000, 0.012, 1000000, "ok")
    assert [r.status for r in records] == ["ok", "ok", "timeout", "error:ECONNREFUSED", "ok"]
    assert [r.ok for r in records] == [True, True, False, False, True]
    assert fct.completion_times(records) == [0.012, 1.05, 3.1]
    s = fct.summarize_records(records)
    assert (s.n, s.failed) == (3, 2)


def test_reads_a_file_and_ignores_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "h1.stdout"
    path.write_text(FLOWGEN_OUTPUT + "\n\n")
    assert len(fct.read_flowgen_csv(path)) == 5


@pytest.mark.parametrize(("text", "line", "words"), [
    ("", 1, "no flowgen header"),
    ("flow,start,end\n", 1, "expected header"),
    (FLOWGEN_OUTPUT + "5,1,2,0.1,10\n", 7, "expected 6 fields"),
    (FLOWGEN_OUTPUT.replace("1,1100000000", "x,1100000000"), 3, "flow is not an integer"),
    (FLOWGEN_OUTPUT.replace("1.050000000", "fast"), 3, "fct_s is not a number"),
    (FLOWGEN_OUTPUT.replace("1.050000000", "nan"), 3, "fct_s must be finite"),
    (FLOWGEN_OUTPUT.replace(",65536,", ",-1,"), 4, "bytes is negative"),
    (FLOWGEN_OUTPUT.replace("error:ECONNREFUSED", "broken"), 5, "status must be"),
    (FLOWGEN_OUTPUT.replace("error:ECONNREFUSED", "error:"), 5, "status must be"),
    (FLOWGEN_OUTPUT.replace("1,1100000000,2150000000", "1,2150000000,1100000000"), 3,
     "before start_ns"),
])
def test_bad_csv_names_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(FlowCsvError) as caught:
        fct.parse_flowgen_csv(text, source="h1.stdout")
    assert caught.value.line == line
    assert str(caught.value).startswith(f"h1.stdout, line {line}: ")
    assert words in str(caught.value)
    assert isinstance(caught.value, SelenaError)


def test_ecdf_steps_with_ties() -> None:
    assert fct.ecdf([3.0, 1.0, 2.0, 2.0]) == [(1.0, 0.25), (2.0, 0.75), (3.0, 1.0)]
    assert fct.ecdf([]) == []
    assert fct.ecdf([5.0]) == [(5.0, 1.0)]


def test_percentiles_interpolate_linearly() -> None:
    values = [float(v) for v in range(1, 11)]       # 1..10
    assert fct.percentile(values, 50) == pytest.approx(5.5)
    assert fct.percentile(values, 90) == pytest.approx(9.1)
    assert fct.percentile(values, 0) == 1.0 and fct.percentile(values, 100) == 10.0
    with pytest.raises(AnalysisError):
        fct.percentile([], 50)
    with pytest.raises(AnalysisError):
        fct.percentile(values, 101)


def test_summary_on_known_data() -> None:
    # 100 flows: 90 fast (10 ms), 7 with one SYN retransmission (~1 s), 3 with two (~3 s)
    fcts = [0.01] * 90 + [1.01] * 7 + [3.01] * 3
    s = fct.summarize(fcts, failed=2)
    assert (s.n, s.failed) == (100, 2)
    assert s.median_s == pytest.approx(0.01)
    assert s.p90_s == pytest.approx(0.01 + 0.1 * 1.0)   # between the 90th and 91st values
    assert s.p99_s == pytest.approx(3.01)
    assert s.over_1s == pytest.approx(0.10)
    assert s.over_3s == pytest.approx(0.03)
    empty = fct.summarize([], failed=4)
    assert empty.n == 0 and empty.failed == 4 and math.isnan(empty.median_s)


def test_cdf_csv_round_trip(tmp_path: Path) -> None:
    series = {"ideal": [0.02, 0.01, 0.03, 0.01], "pica8-p3290": [0.01, 1.02, 3.05]}
    path = fct.write_cdf_csv(series, tmp_path / "out" / "fct_cdf.csv")
    with path.open() as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["profile", "fct_s", "cdf"]
    assert rows[1] == ["ideal", "0.01", "0.5"]
    back = fct.read_cdf_csv(path)
    assert back == {profile: fct.ecdf(values) for profile, values in series.items()}
    assert back["pica8-p3290"][-1] == (3.05, 1.0)


def test_read_cdf_csv_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("a,b\n")
    with pytest.raises(AnalysisError, match="line 1"):
        fct.read_cdf_csv(path)
    path.write_text("profile,fct_s,cdf\nideal,0.1\n")
    with pytest.raises(AnalysisError, match="line 2"):
        fct.read_cdf_csv(path)


def test_analyze_writes_table_summary_and_png(tmp_path: Path) -> None:
    ideal = fct.parse_flowgen_csv(FLOWGEN_OUTPUT)
    pica8 = [FlowRecord(i, 0, 1, f, 1000000, "ok") for i, f in enumerate([0.02, 1.03, 3.2])]
    summaries = fct.analyze({"ideal": ideal, "pica8-p3290": pica8}, tmp_path)
    assert summaries["ideal"].n == 3 and summaries["ideal"].failed == 2
    assert summaries["pica8-p3290"].over_3s == pytest.approx(1 / 3)
    assert set(fct.read_cdf_csv(tmp_path / "fct_cdf.csv")) == {"ideal", "pica8-p3290"}
    with (tmp_path / "fct_summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["profile"] for r in rows] == ["ideal", "pica8-p3290"]
    assert rows[0]["n"] == "3" and rows[0]["failed"] == "2"
    png = (tmp_path / "fct_cdf.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000


def test_plot_copes_with_empty_and_zero_series(tmp_path: Path) -> None:
    path = fct.plot_cdf({"none": [], "zero": [0.0, 0.5]}, tmp_path / "p.png")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_without_matplotlib_the_plot_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # import now fails
    with pytest.raises(AnalysisError, match="pip install matplotlib"):
        fct.plot_cdf({"ideal": [0.1]}, tmp_path / "p.png")
    # everything but the plot still works
    fct.analyze({"ideal": fct.parse_flowgen_csv(FLOWGEN_OUTPUT)}, tmp_path, plot=False)
    assert (tmp_path / "fct_cdf.csv").exists() and not (tmp_path / "p.png").exists()


def test_command_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    ideal = tmp_path / "ideal.csv"
    ideal.write_text(FLOWGEN_OUTPUT)
    out = tmp_path / "out"
    assert fct.main(["--out", str(out), "--no-plot", f"ideal={ideal}"]) == 0
    assert set(fct.read_cdf_csv(out / "fct_cdf.csv")) == {"ideal"}
    assert "ideal: 3 flows ok, 2 failed" in caplog.text
    bad = tmp_path / "bad.csv"
    bad.write_text(FLOWGEN_OUTPUT + "oops\n")
    assert fct.main(["--out", str(out), f"bad={bad}"]) == 1
    assert f"{bad}, line 7" in caplog.text
    assert fct.main(["--out", str(out), f"gone={tmp_path / 'gone.csv'}"]) == 1
    assert "No such file" in caplog.text
    with pytest.raises(SystemExit) as usage:
        fct.main(["--out", str(out), "no-equals-sign"])
    assert usage.value.code == 2


def test_a_run_directory_is_one_series_of_all_its_hosts_flows(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    run = tmp_path / "tdf10-r1"
    run.mkdir()
    (run / "fct-h1.csv").write_text(FLOWGEN_OUTPUT)
    (run / "fct-h5.csv").write_text(FLOWGEN_OUTPUT)
    (run / "metrics.json").write_text("{}")                 # not a flowgen file
    assert len(fct.read_series(run)) == 2 * len(fct.parse_flowgen_csv(FLOWGEN_OUTPUT))
    assert fct.main(["--out", str(tmp_path / "out"), "--no-plot", f"tdf10={run}"]) == 0
    assert "tdf10: 6 flows ok, 4 failed" in caplog.text
    assert fct.main(["--out", str(tmp_path / "out"), f"empty={tmp_path / 'out'}"]) == 1
    assert "no fct-*.csv in this directory" in caplog.text
