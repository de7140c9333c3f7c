"""selena.session: Mininet's pingall lines and summary, node-name
substitution, iperf and links, on a fake running experiment."""

from selena.session import PingAll, rate_text


def test_pingall_results_line_is_mininets():
    result = PingAll([("h1", "h2", True), ("h2", "h1", True)])
    assert (result.sent, result.received, result.dropped_percent) == (2, 2, 0.0)
    assert result.results_line() == "*** Results: 0% dropped (2/2 received)"
    assert result.lines() == ["h1 -> h2", "h2 -> h1"]


def test_pingall_truncates_the_percentage_and_marks_misses():
    result = PingAll([("h1", "h2", True), ("h1", "h3", False), ("h2", "h1", True),
                      ("h2", "h3", False), ("h3", "h1", False), ("h3", "h2", True)])
    assert result.results_line() == "*** Results: 50% dropped (3/6 received)"
    assert result.lines() == ["h1 -> h2 X", "h2 -> h1 X", "h3 -> X h2"]
    third = PingAll([("h1", "h2", False), ("h2", "h1", True), ("h1", "h3", True)])
    assert third.results_line() == "*** Results: 33% dropped (2/3 received)"


def test_pingall_without_hosts_warns_as_mininet():
    assert PingAll([]).results_line() == "*** Warning: No packets sent"


def test_rate_text_uses_iperfs_units():
    assert rate_text(9.41e6) == "9.41 Mbits/sec"
    assert rate_text(1.5e9) == "1.50 Gbits/sec"
    assert rate_text(640e3) == "640.00 Kbits/sec"
    assert rate_text(12) == "12 bits/sec"
