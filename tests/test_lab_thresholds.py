"""tests/support/lab_thresholds.py (scripts/lab-thresholds) on made-up
records: the spread, the failures against the current bound, what n runs
support, the binomial view of counts, and the script's output."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import lab_thresholds as lt
import pytest
from lab_stats import record

ROOT = Path(__file__).resolve().parents[1]


def entry(name, value, *, t, values=None, trials=None, **bounds):
    e = {"name": name, "value": value, "bounds": bounds, "unit": " ms", "test": "t.py::x",
         "time": f"2026-11-{t:02d}T00:00:00Z"}
    if values is not None:
        e["values"] = values
    if trials is not None:
        e["trials"] = trials
    return e


def test_quantiles_interpolate_and_the_binomial_sums_to_one():
    assert lt.quantile([4, 1, 3, 2, 5], 0.5) == 3
    assert lt.quantile([1, 2, 3, 4, 5], 0.05) == pytest.approx(1.2)
    assert lt.quantile([7], 0.95) == 7
    assert lt.binom_cdf(3, 3, 0.4) == 1.0 and lt.binom_cdf(-1, 3, 0.4) == 0.0
    assert lt.binom_cdf(1, 3, 0.5) == pytest.approx(0.5)
    # A thousand trials do not overflow.
    assert lt.binom_cdf(500, 1000, 0.5) == pytest.approx(0.5126, abs=1e-3)


def test_the_rule_of_three_and_the_runs_a_one_percent_claim_needs():
    # No failure in n runs: the 95% limit is 1 - 0.05^(1/n), about 3/n.
    assert lt.upper_limit(0, 20) == pytest.approx(1 - 0.05 ** (1 / 20), rel=1e-6)
    assert lt.upper_limit(0, 300) == pytest.approx(3 / 300, rel=0.01)
    assert lt.upper_limit(1, 20) == pytest.approx(0.2161, abs=1e-3)     # Clopper-Pearson
    assert lt.runs_needed(0) == 299
    assert lt.runs_needed(1) > 299


def test_a_summary_judges_every_run_against_the_latest_bound():
    records = [entry("a", v, t=i + 1, low=95, high=110) for i, v in enumerate([100, 101, 99])]
    records.append(entry("a", 120, t=9, low=99, high=110))       # bound moved, fails it
    records.append(entry("b", 0.41, t=1, values=[0.5, 0.41, 0.58], low=0.4, high=0.6))
    a, b = lt.summarize(records)
    assert (a.name, a.n, a.failed, a.bounds) == ("a", 4, 1, lt.Bounds(low=99, high=110))
    assert min(a.lows) == 99 and max(a.highs) == 120
    assert "1 of 4 outside" in a.confidence()
    assert a.proposed() == "none yet (n = 4 < 20)"
    assert b.lows == [0.41] and b.highs == [0.58] and b.failed == 0
    # Exclusive bounds exclude their own value.
    assert not lt.Bounds(below=5000).holds(5000) and lt.Bounds(high=5000).holds(5000)
    assert not lt.Bounds(low=0).holds(math.nan)


def test_with_twenty_runs_a_bound_is_proposed_outside_everything_seen():
    values = [100 + (i % 5) for i in range(20)]             # 100..104, four times
    records = [entry("c", v, t=i + 1, low=99, high=150) for i, v in enumerate(values)]
    (c,) = lt.summarize(records)
    low, high = c.proposed().split(" and ")
    # Two-sided, the wider of mean 102 -+ 2.576 sd (1.451): 98.26 and 105.74, and
    # the extremes 100 and 104 -+ half of p5..p95 (2): 98 and 106.
    assert (low, high) == (">= 98", "<= 106")
    spread = [entry("d", v, t=i + 1, high=150) for i, v in enumerate([100] * 19 + [140])]
    (d,) = lt.summarize(spread)
    # One-sided: the normal fit, mean 102 + 2.326 sd (8.94) = 122.8, lies below
    # a value seen (140); the proposal is that value plus (102 - 100) / 2.
    assert d.proposed() == "<= 141"
    assert "0 of 20 outside: rate < 13.9%" in c.confidence()


def test_a_count_of_trials_gets_the_binomial_chance_of_failing_its_bound():
    # Three runs: 1 slow flow of 89, 3 of 100, 2 of 90: pooled rate 6/279.
    records = [entry("slow", k, t=i + 1, trials=n, low=0.02 * n)
               for i, (k, n) in enumerate([(1, 89), (3, 100), (2, 90)])]
    (s,) = lt.summarize(records)
    b = s.binomial
    p = 6 / 279
    assert b.pooled_rate == pytest.approx(p) and b.trials == 90
    # Failing >= 1.8 of 90 means 0 or 1 slow flows.
    assert b.fail_probability == pytest.approx((1 - p) ** 90 + 90 * p * (1 - p) ** 89)
    assert b.fail_probability > 0.3
    assert b.proposed == "none possible (>= 0) of 90"
    assert s.failed == 1
    high = lt.binomial_view([entry("k", 2, t=1, trials=1000, high=30)], lt.Bounds(high=30))
    assert high.fail_probability < 1e-6 and high.proposed == "<= 6 of 1000"


def test_the_script_prints_a_markdown_table_and_skips_a_cut_line(tmp_path):
    path = tmp_path / "stats.jsonl"
    lines = [json.dumps(entry("x.rtt_ms", 100 + i, t=1, low=99, high=150)) for i in range(3)]
    path.write_text("\n".join(lines) + '\n{"name": "x.rt')       # cut by a killed run
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab-thresholds"), "--file",
                          str(path), "--markdown"], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    table = [line for line in out.splitlines() if line.startswith("|")]
    assert table[0].startswith("| assertion | n | min | p5 | median | p95 | max | bound |")
    assert table[2].startswith("| x.rtt_ms [ms] | 3 | 100 | 100.1 | 101 | 101.9 | 102 | "
                               ">= 99 and <= 150 | 0 | none yet (n = 3 < 20) |"), table[2]
    assert "3 values of 1 assertions" in out and "1 unreadable line(s) skipped" in out
    empty = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab-thresholds"), "--file",
                            str(tmp_path / "none.jsonl")], capture_output=True, text=True,
                           timeout=60)
    assert empty.returncode == 1 and "no recorded values" in empty.stderr


def test_collect_appends_only_new_records_and_load_reads_each_once(tmp_path):
    cache, committed = tmp_path / "cache.jsonl", tmp_path / "docs" / "lab-stats.jsonl"
    first = [entry("x.rtt_ms", 100 + i, t=i, high=150) for i in range(3)]
    cache.write_text("".join(json.dumps(e) + "\n" for e in first))
    assert lt.collect(cache, committed) == 3
    assert lt.collect(cache, committed) == 0            # nothing new: nothing appended
    later = entry("x.rtt_ms", 120, t=9, high=150)
    with cache.open("a") as out:
        out.write(json.dumps(later) + "\n" + '{"name": "x.rt')   # and a cut line
    assert lt.collect(cache, committed) == 1
    assert len(committed.read_text().splitlines()) == 4
    records, bad = lt.load(committed, cache)
    assert [r["value"] for r in records] == [100, 101, 102, 120] and bad == 1
    # The script collects from $SELENA_LAB_STATS into --file.
    record(entry("y.mbit", 9, t=10, low=8), cache)      # after the cut line, on its own
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "lab-thresholds"), "--file",
                          str(committed), "--collect"], capture_output=True, text=True,
                         check=True, timeout=60, env={**os.environ, "SELENA_LAB_STATS": str(cache)})
    assert out.stdout.startswith("1 new record(s)"), out
    assert json.loads(committed.read_text().splitlines()[-1])["name"] == "y.mbit"


def test_the_standing_says_whether_a_bound_is_as_wide_as_the_data_asks():
    values = [100 + (i % 5) for i in range(20)]             # proposal: >= 98 and <= 106
    wide, = lt.summarize([entry("w", v, t=i + 1, low=90, high=110)
                          for i, v in enumerate(values)])
    assert wide.standing().startswith("from the data")
    tight, = lt.summarize([entry("t", v, t=i + 1, low=99, high=150)
                           for i, v in enumerate(values)])
    assert tight.standing() == "lower side tighter than the proposal"
    few, = lt.summarize([entry("f", 100, t=1, high=150)])
    assert few.standing() == "not yet: n < 20"
    assert wide.proposal() == (pytest.approx(98), pytest.approx(106))


NODE_EXISTS = lt.node_exists       # before the fixture below replaces it


@pytest.fixture(autouse=True)
def _recorded_tests_exist(monkeypatch):
    # The records here name made-up tests ("t.py::x"); the tests about
    # renamed functions use NODE_EXISTS or pass their own `exists`.
    monkeypatch.setattr(lt, "node_exists", lambda node_id: True)


def test_a_node_id_exists_while_its_test_function_does(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/test_a.py").write_text(
        "import pytest\n\n\n@pytest.mark.lab\ndef test_kept(result):\n    pass\n")
    assert NODE_EXISTS("tests/test_a.py::test_kept", tmp_path)
    assert NODE_EXISTS("tests/test_a.py::test_kept[pv-2]", tmp_path)
    assert not NODE_EXISTS("tests/test_a.py::test_renamed", tmp_path)
    assert not NODE_EXISTS("tests/test_a.py::test_kep", tmp_path)
    assert not NODE_EXISTS("tests/test_gone.py::test_kept", tmp_path)
    # This repository's own: a test that records, and the one renamed since.
    assert NODE_EXISTS("tests/lab/test_hv_e2e.py::test_default_pv_ticker_is_dilated")
    assert not NODE_EXISTS(
        "tests/lab/test_hv_e2e.py::test_save_restore_keeps_tdf_and_continuous_virtual_time")


def test_names_whose_test_function_was_renamed_are_set_apart():
    # The same test's latest run recorded them, but its function is gone:
    # a later run can only record them under the new name.
    records = [dict(entry("old", 1, t=1, high=5), boot="b1", test="a.py::test_old"),
               dict(entry("new", 1, t=2, high=5), boot="b2", test="a.py::test_new")]
    new, old = lt.summarize(records, exists=lambda node_id: node_id.endswith("test_new"))
    assert (new.current, old.current) == (True, False)
    assert old.standing().startswith("not in its test's latest run")


def test_an_assertion_its_tests_latest_run_did_not_record_is_set_apart():
    # Two runs (boots) of one test: the second records "kept" but no longer
    # "renamed"; another test's older run does not make "other" stale.
    records = [dict(entry("kept", 1, t=1, high=5), boot="b1"),
               dict(entry("renamed", 1, t=1, high=5), boot="b1"),
               dict(entry("kept", 2, t=2, high=5), boot="b2"),
               dict(entry("other", 3, t=1, high=5), boot="b1", test="u.py::y")]
    kept, other, renamed = lt.summarize(records)
    assert (kept.current, other.current, renamed.current) == (True, True, False)
    assert renamed.standing().startswith("not in its test's latest run")
    assert kept.standing() == "not yet: n < 20"
    page = lt.doc_page([kept, other, renamed], "r.jsonl", lt.sessions(records))
    assert "1 of them was not recorded by their test's latest run" in page
    # Twenty runs of a stale name do not count among the settled ones.
    stale = [dict(entry("old", 100 + i % 5, t=i + 1, low=0, high=999), boot=f"b{i}")
             for i in range(20)] + [dict(entry("new", 1, t=25, high=5), boot="b99")]
    old = next(s for s in lt.summarize(stale) if s.name == "old")
    assert not old.current
    assert "Of the others, 0 have 20 runs or more" in lt.doc_page(
        lt.summarize(stale), "r.jsonl", 21)


def test_the_committed_page_of_bounds_is_what_the_committed_records_make():
    committed = ROOT / "docs" / "results" / "lab-stats.jsonl"
    records, bad = lt.load(committed)
    assert records and bad == 0
    page = lt.doc_page(lt.summarize(records, exists=NODE_EXISTS),
                       "docs/results/lab-stats.jsonl", lt.sessions(records))
    assert (ROOT / "docs" / "lab-thresholds.md").read_text(encoding="utf-8") == page, \
        "docs/lab-thresholds.md is stale: run scripts/lab-thresholds --write-doc"
    # One row per assertion, each with its standing.
    rows = [line for line in page.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) - 1 == len({r["name"] for r in records})
