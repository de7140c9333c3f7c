"""tests/support/lab_stats.py: every statistical check of the lab tests is
recorded (also when it fails) before it is asserted."""

import json

import lab_stats
import pytest
from lab_stats import check


@pytest.fixture
def stats(tmp_path, monkeypatch):
    path = tmp_path / "deep" / "lab-stats.jsonl"
    monkeypatch.setenv(lab_stats.ENV, str(path))
    return path


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_passing_check_appends_one_line_with_its_context(stats, monkeypatch):
    monkeypatch.setattr(lab_stats, "_boot", {"id": "20261126-1-abc"})
    check("x.rtt_ms", 101.5, low=99, high=150, unit=" ms", samples=[101, 102])
    check("x.rtt_ms", 100.0, low=99, high=150, unit=" ms")
    first, second = lines(stats)        # the directory was created, both appended
    assert first["name"] == "x.rtt_ms" and first["value"] == 101.5 and first["passed"]
    assert first["bounds"] == {"low": 99, "high": 150} and first["unit"] == " ms"
    assert first["samples"] == [101.0, 102.0] and first["boot"] == "20261126-1-abc"
    assert first["test"].startswith("tests/test_lab_stats.py::test_a_passing_check")
    assert first["time"].endswith("Z") and first["revision"]
    assert second["value"] == 100.0 and "samples" not in second


def test_a_failing_check_is_recorded_before_it_fails_naming_value_and_bound(stats):
    with pytest.raises(AssertionError, match=r"y\.slow = 1, want >= 1\.78 \(a count out of "
                                             r"89\): ctx"):
        check("y.slow", 1, low=0.02 * 89, trials=89, context="ctx")
    (entry,) = lines(stats)
    assert entry["passed"] is False and entry["value"] == 1 and entry["trials"] == 89


def test_exclusive_bounds_fail_at_the_bound_inclusive_ones_pass(stats):
    check("z", 1.0, low=1.0, high=1.0)
    with pytest.raises(AssertionError, match="want > 1"):
        check("z", 1.0, above=1.0)
    with pytest.raises(AssertionError, match="want < 5000"):
        check("z", 5000, below=5000)
    with pytest.raises(AssertionError):
        check("z", float("nan"), low=0)
    assert [e["passed"] for e in lines(stats)] == [True, False, False, False]


def test_several_values_all_must_hold_and_the_nearest_to_a_bound_is_the_value(stats):
    check("w", [0.5, 0.41, 0.58], low=0.4, high=0.6)
    with pytest.raises(AssertionError, match=r"w = 0\.7 s \(worst of 3"):
        check("w", [0.5, 0.7, 0.35], low=0.4, high=0.6, unit=" s")
    ok, bad = lines(stats)
    assert ok["value"] == 0.41 and ok["values"] == [0.5, 0.41, 0.58] and ok["passed"]
    assert bad["value"] == 0.7 and not bad["passed"]


def test_a_bound_given_twice_on_one_side_is_refused(stats):
    with pytest.raises(ValueError, match="not both"):
        check("v", 1, low=0, above=0)
    assert not stats.exists()


def test_the_default_file_is_in_the_selena_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(lab_stats.ENV, raising=False)
    monkeypatch.setenv("SELENA_CACHE", str(tmp_path / "cache"))
    assert lab_stats.stats_path() == tmp_path / "cache" / "lab-stats.jsonl"
