"""The parsers scenarios and calibrate share for ping and iperf3 output."""

import json

import pytest

from selena.errors import ScenarioError
from selena.metrics import iperf3_interval_mbit, ping_rtts_ms


def test_ping_rtts_are_every_time_printed():
    out = (b"64 bytes from 10.0.0.2: seq=0 ttl=64 time=81.322 ms\n"
           b"64 bytes from 10.0.0.2: seq=1 ttl=64 time=80 ms\n"
           b"round-trip min/avg/max = 80.0/80.6/81.3 ms\n")
    assert ping_rtts_ms(out) == [81.322, 80.0]
    assert ping_rtts_ms("no reply") == []


def test_iperf3_intervals_leave_the_omitted_slow_start_out():
    report = {"intervals": [
        {"sum": {"bits_per_second": 5e6, "omitted": True}},
        {"sum": {"bits_per_second": 19.1e6, "omitted": False}},
        {"sum": {"bits_per_second": 19.0e6}},
    ]}
    assert iperf3_interval_mbit(json.dumps(report).encode()) == [19.1, 19.0]


def test_an_iperf3_error_report_is_named_not_taken_for_no_intervals():
    """iperf3 3.12 -J exits 0 with this report when nothing listens."""
    report = {"start": {"connected": []}, "intervals": [], "end": {},
              "error": "unable to connect to server: Connection refused"}
    with pytest.raises(ScenarioError, match=r"^iperf3: unable to connect to server: "
                                            r"Connection refused$"):
        iperf3_interval_mbit(json.dumps(report))
