"""memaslap's end-of-run report, from a real run of Debian's memcaslap
(2 threads, 16 concurrent, 1 KB values, binary protocol, -S 2s) against a
local memcached, screen-clearing escapes and periodic tables included."""

from pathlib import Path

import pytest

from selena.analysis.memaslap import parse
from selena.errors import AnalysisError

REPORT = (Path(__file__).parent / "data" / "memaslap-2s.txt").read_text()


def test_the_end_of_run_summaries_are_read():
    report = parse(REPORT)
    assert (report.run_time_s, report.ops, report.tps, report.get_misses) == \
        (2.0, 205369, 102673, 0)
    total = report.total
    assert (total.events, total.min_us, total.max_us, total.mean_us, total.std_us) == \
        (205353, 12.0, 7686.0, 155.0, 122.68)
    assert report.stats["Get"].events + report.stats["Set"].events == total.events
    # Rows are labelled by their first bucket's exponent.
    assert total.log2_counts[4] == 333 and total.log2_counts[7] == 92611
    assert total.log2_counts[13] == 26 and max(total.log2_counts) == 13


def test_the_cdf_is_cumulative_at_each_power_of_two():
    points = parse(REPORT).total.cdf()
    assert points[0] == (16.0, pytest.approx(333 / 205353))
    assert points[-1] == (8192.0, 1.0)
    fractions = [f for _, f in points]
    assert fractions == sorted(fractions)
    # memaslap's mean (155 us) lies in the bucket where the CDF crosses half.
    assert dict(points)[128.0] < 0.5 < dict(points)[256.0]


def test_a_run_without_the_summary_or_with_a_torn_histogram_is_refused():
    without_stat_freq = REPORT[REPORT.index("cmd_get:"):]
    with pytest.raises(AnalysisError, match="no 'Total Statistics'"):
        parse(without_stat_freq)
    torn = REPORT.replace("      12:      121       26\n", "")
    with pytest.raises(AnalysisError, match="Total Statistics: 205353 events but 205206"):
        parse(torn)
    with pytest.raises(AnalysisError, match="Run time"):
        parse(REPORT[:REPORT.index("cmd_get:")])
