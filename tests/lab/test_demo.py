"""The demo's side-by-side table (selena/lab/demo.py) without a lab: the
link it names comes from what the scenario expected, and TDF N passes only
when every figure is within the tolerance."""

from selena.lab.demo import Row, report

TCP_SHARE = 1448 / 1514


def rows(tdf10_rtt_error: float) -> list[Row]:
    expected = {"rtt_ms": 80.0, "tcp_mbit": 20 * TCP_SHARE}
    return [Row(1.0, {"rtt_ms": (expected["rtt_ms"], 88.5, 10.6),
                      "tcp_mbit": (expected["tcp_mbit"], 17.9, -6.4)}, 27.3, "ok"),
            Row(10.0, {"rtt_ms": (expected["rtt_ms"], 80 * (1 + tdf10_rtt_error / 100),
                                  tdf10_rtt_error),
                       "tcp_mbit": (expected["tcp_mbit"], 19.0, -0.4)}, 160.0, "ok")]


def test_the_table_names_the_configured_link_and_passes_within_tolerance():
    text, ok = report(rows(3.4), 10)
    assert text.splitlines()[0].startswith(
        "time dilation demo: h1 -> h2, 20 Mbit/s with 40 ms one-way delay"), text
    assert ok and "RESULT: at TDF 10" in text


def test_tdf_n_outside_the_tolerance_fails():
    text, ok = report(rows(6.7), 10)
    assert not ok and "RESULT: FAILED" in text
