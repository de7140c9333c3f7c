"""The advisor without a lab: the floor fitted from pings at several idle
gaps and at TDF 5, the least-delay path, the TDF it predicts (and when none
will do), the calibration file's errors, and `selena advise` on a shipped
scenario."""

from __future__ import annotations

import json
import math
import re

import pytest

from selena.advise import (
    TCP_SHARE,
    Calibration,
    CalibrationError,
    advise,
    busiest_link,
    busiest_node,
    fit,
    least_delay_path,
)
from selena.cli import main
from selena.model import Topology
from selena.topologies import linear


def calibration(wake_ms: float = 9.0, per_decade_ms: float = 0.0, virtual_ms: float = 1.0,
                ceiling_mbit: float = 40.0) -> Calibration:
    return Calibration(wake_ms, per_decade_ms, virtual_ms, ceiling_mbit, {}, [], [],
                       host="lab")


def demo_topology(delay_ms: float = 40, rate_mbit: float = 20) -> Topology:
    topology = Topology("demo", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24")
    h2 = topology.add_host("h2", ip="10.0.0.2/24")
    topology.add_link(h1, h2, rate=f"{rate_mbit}Mbit", delay=f"{delay_ms}ms")
    return topology


def test_the_wake_cost_is_fitted_against_the_idle_gap_and_the_rest_is_virtual():
    # Over 2 x 10 ms: 5 ms extra after 0.1 s idle, 10 ms after 1 s, 15 ms after 10 s.
    by_gap = {0.1: [25.0, 24.0, 26.0], 1.0: [30.0], 10.0: [35.0, 35.0]}
    # TDF 5 with 0.2 s between pings (1 s real idle): wake 10 ms, and the
    # senders waited 5 x 20 ms for each reply (+5 log10 5 ms), / 5; 3 measured.
    cal = fit(by_gap, [23.0, 22.9, 23.1], [19.0, 20.0, 21.0], high_tdf=5,
              high_interval_s=0.2, configured_rtt_ms=20.0)
    assert cal.wake_ms == pytest.approx(10.0)
    assert cal.per_decade_ms == pytest.approx(5.0)
    assert cal.virtual_ms == pytest.approx(3.0 - (10.0 + 5 * math.log10(5)) / 5)
    assert cal.ceiling_mbit == pytest.approx(20.0 / TCP_SHARE)
    assert cal.wake_real_ms(0.01) == pytest.approx(5.0)        # never below the shortest gap
    # At TDF 10 with pings 0.1 s apart the emulation idles 1 s between them.
    assert cal.extra_ms(10, 0.1) == pytest.approx(10.0 / 10 + cal.virtual_ms)
    assert cal.rtt_by_gap_ms == {"0.1": [25.0, 24.0, 26.0], "1": [30.0], "10": [35.0, 35.0]}


def test_noise_never_makes_a_part_negative():
    cal = fit({1.0: [2.0]}, [3.0], [10.0])      # slower at TDF 5: the excess is virtual
    assert cal.per_decade_ms == 0 and cal.wake_ms == pytest.approx(2.0)
    assert cal.virtual_ms == pytest.approx(3.0 - 2.0 / 5)
    falling = fit({0.1: [10.0], 1.0: [1.0]}, [0.0], [10.0])
    assert falling.wake_real_ms(100.0) == 0.0          # clamped, never negative


def test_missing_samples_are_named():
    with pytest.raises(CalibrationError, match="no samples of RTT at TDF 5"):
        fit({1.0: [1.0]}, [], [10.0])
    with pytest.raises(CalibrationError, match="after 0.2 s idle"):
        fit({0.2: []}, [1.0], [10.0])
    with pytest.raises(CalibrationError, match="no round trips at TDF 1"):
        fit({}, [1.0], [10.0])


def test_least_delay_path_counts_links_through_switches():
    topology = linear(3, delay="5ms")          # h1-s1-s2-s3 with a host on each switch
    path = least_delay_path(topology)
    # Neighbouring hosts: host link, switch link, host link = 3 links of 5 ms.
    assert (path.rtt_ms, path.links) == (pytest.approx(30.0), 3)
    assert least_delay_path(linear(2)) is None                   # no delay anywhere


def test_the_demo_needs_the_tdf_that_brings_the_floor_within_a_third_of_the_accuracy():
    advice = advise(demo_topology(), calibration(), 5.0)
    # A third of 5% of 80 ms = 4/3 ms; 1 ms of it is virtual; 9 ms / TDF <= 1/3 ms: TDF 27.
    assert advice.tdf == 27
    assert advice.predicted_rtt_error_pct == pytest.approx(100 * (1 + 9 / 27) / 80)
    assert "advice: TDF 27" in advice.report()
    assert "TDF >= 27 for 1.7% (5% with headroom)" in advice.report()
    assert advise(demo_topology(), calibration(), 10.0).tdf == 6    # 8/3 ms allowed: 9/6
    assert advise(demo_topology(), calibration(), 5.0, headroom=0.5).tdf == 9   # 2 ms: 9/9
    assert advise(demo_topology(), calibration(), 5.0, headroom=1).tdf == 3


def test_a_longer_idle_time_at_a_higher_tdf_raises_the_tdf_needed():
    flat = calibration(wake_ms=9.0, per_decade_ms=0.0, virtual_ms=0.0)
    growing = calibration(wake_ms=9.0, per_decade_ms=6.0, virtual_ms=0.0)
    assert advise(demo_topology(), flat, 5.0, interval_s=1.0).tdf == 7      # 9 / 7 <= 4/3
    advice = advise(demo_topology(), growing, 5.0, interval_s=1.0)
    # At TDF T the real idle gap is T s: (9 + 6 log10 T) / T <= 4/3 ms.
    expected = next(t for t in range(1, 100) if (9 + 6 * math.log10(t)) / t <= 4 / 3)
    assert advice.tdf == expected and expected > 5
    assert "packets 1 s apart: TDF >= " in advice.report()
    # Packets further apart idle longer at every TDF: never a smaller TDF.
    assert advise(demo_topology(), growing, 5.0, interval_s=4.0).tdf > expected
    with pytest.raises(Exception, match="interval 0 s"):
        advise(demo_topology(), growing, 5.0, interval_s=0)


def test_a_busy_link_can_set_the_tdf():
    advice = advise(demo_topology(delay_ms=1000, rate_mbit=100), calibration(), 5.0)
    assert busiest_link(demo_topology(rate_mbit=100))[1] == 100
    # 100 Mbit/s over 95% of a 40 Mbit/s ceiling: TDF >= 2.63.
    assert advice.tdf == 3 and advice.rate_tdf == pytest.approx(100 / 38)


def test_a_node_carrying_several_links_can_set_the_tdf():
    # A server with three 30 Mbit/s clients: each link fits a 40 Mbit/s
    # ceiling, the server's 90 Mbit/s does not.
    topology = Topology("star", tdf=1)
    server = topology.add_host("srv", ip="10.0.0.100/24")
    switch = topology.add_switch("s1")
    topology.add_link(server, switch, rate="90Mbit", delay="1s")
    for i in range(3):
        client = topology.add_host(f"c{i}", ip=f"10.0.0.{i + 1}/24")
        topology.add_link(client, switch, rate="30Mbit", delay="1s")
    # The switch forwards what enters it: half of its 180 Mbit/s of links.
    assert busiest_node(topology) == ("s1", 90.0)
    pair = Topology("pair", tdf=1)
    a, b = pair.add_host("a", ip="10.0.0.1/24"), pair.add_host("b", ip="10.0.0.2/24")
    c = pair.add_host("c", ip="10.0.1.1/24")
    pair.add_link(a, b, rate="30Mbit", delay="1s")
    pair.add_link(a, c, rate="30Mbit", delay="1s")
    assert busiest_node(pair) == ("a", 60.0)
    advice = advise(pair, calibration(virtual_ms=0.0), 5.0)
    # 60 Mbit/s over 95% of 40: TDF >= 1.58 where each link alone needs none.
    assert advice.rate_tdf == pytest.approx(60 / 38) and advice.tdf == 2
    assert "busiest node a: 60 Mbit/s over its links: TDF >= 1.58" in advice.report()
    assert busiest_node(Topology("empty", tdf=1)) is None


def test_the_run_time_is_printed_when_the_length_is_known():
    advice = advise(demo_topology(), calibration(virtual_ms=0.0), 5.0, duration_s=12)
    assert advice.tdf == 7                                   # 9 / 7 <= 4/3 ms
    assert "a run of 12 virtual s takes about 84 s of real time at TDF 7" in advice.report()
    with pytest.raises(Exception, match="duration 0 s"):
        advise(demo_topology(), calibration(), 5.0, duration_s=0)


def test_no_tdf_helps_when_the_virtual_part_exceeds_the_accuracy():
    advice = advise(demo_topology(delay_ms=5), calibration(virtual_ms=1.0), 5.0)
    assert advice.tdf is None
    assert "in virtual time" in advice.report()
    with pytest.raises(Exception, match="accuracy 0%"):
        advise(demo_topology(), calibration(), 0)


def test_calibration_file_round_trip_and_errors(tmp_path):
    path = calibration().save(tmp_path / "cal.json")
    assert Calibration.load(path) == calibration()
    with pytest.raises(CalibrationError, match="no calibration here"):
        Calibration.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CalibrationError, match="bad.json: unreadable"):
        Calibration.load(tmp_path / "bad.json")
    (tmp_path / "old.json").write_text(json.dumps({"version": 1}))
    with pytest.raises(CalibrationError, match="old.json: not a version 2"):
        Calibration.load(tmp_path / "old.json")


@pytest.mark.parametrize("field,value,message", [
    ("wake_ms", "x", 'wake_ms is "x", not a finite number'),
    ("virtual_ms", float("nan"), "virtual_ms is NaN, not a finite number"),
    ("ceiling_mbit", True, "ceiling_mbit is true, not a finite number"),
    ("min_gap_s", 0, "min_gap_s is 0, not above 0"),
    ("tcp_mbit", [1, "a"], 'tcp_mbit is [1, "a"], not a list of finite numbers'),
    ("rtt_by_gap_ms", {"1": 5}, "rtt_by_gap_ms['1'] is 5, not a list of finite numbers"),
    ("rtt_by_gap_ms", [1], "rtt_by_gap_ms is [1], not an object of gap -> round trips"),
    ("host", 3, "host is 3, not a string"),
])
def test_a_calibration_field_the_predictions_cannot_use_is_named(tmp_path, capsys, field,
                                                                  value, message):
    """A string where a number goes was a traceback from advise's report."""
    data = json.loads(calibration().save(tmp_path / "good.json").read_text())
    data[field] = value
    (tmp_path / "cal.json").write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=re.escape(
            f"cal.json: {message} (run `selena calibrate` again)")):
        Calibration.load(tmp_path / "cal.json")
    assert main(["advise", "scenarios/dilation_demo.py", "--calibration",
                 str(tmp_path / "cal.json")]) == 1
    assert message in capsys.readouterr().err


def test_a_calibration_nested_past_the_parser_is_unreadable_not_a_traceback(tmp_path):
    (tmp_path / "cal.json").write_text("[" * 100_000)
    with pytest.raises(CalibrationError, match="cal.json: unreadable calibration: maximum "
                                               "recursion"):
        Calibration.load(tmp_path / "cal.json")


def test_selena_advise_prints_the_tdf_for_a_shipped_scenario(tmp_path, capsys):
    path = calibration().save(tmp_path / "cal.json")
    status = main(["advise", "scenarios/dilation_demo.py", "--calibration", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "smallest round trip h1 <-> h2: 80 ms over 1 link(s)" in out
    assert "advice: TDF 27" in out
    assert main(["advise", "scenarios/dilation_demo.py", "--calibration", str(path),
                 "--duration", "20"]) == 0
    assert "a run of 20 virtual s takes about 540 s of real time at TDF 27" \
        in capsys.readouterr().out
    assert main(["advise", "nope.py", "--calibration", str(path)]) == 1
    assert "nope.py: no such scenario file" in capsys.readouterr().err


def test_selena_advise_takes_runs_events_file_and_checks_it(tmp_path, capsys):
    path = calibration().save(tmp_path / "cal.json")
    events = tmp_path / "change.events"
    events.write_text("5 link h1 h2 delay=60ms\n")
    assert main(["advise", "scenarios/dilation_demo.py", "--calibration", str(path),
                 "--events", str(events)]) == 0
    assert "advice: TDF 27" in capsys.readouterr().out
    events.write_text("5 link h1 h3 down\n")
    assert main(["advise", "scenarios/dilation_demo.py", "--calibration", str(path),
                 "--events", str(events)]) == 1
    assert f"{events}:1: no node named 'h3'" in capsys.readouterr().err


def test_a_sender_waiting_longer_for_its_reply_than_the_calibration_adds_the_wake_cost():
    # Calibrated over 20 ms round trips: 10 ms after 1 s idle, +5 ms per tenfold.
    by_gap = {0.1: [25.0], 1.0: [30.0], 10.0: [35.0]}
    # At TDF 5 the senders waited 100 ms real (5 x 20): 5 x log10(5) = 3.49 ms
    # more than at TDF 1, which is real time too, not the virtual part.
    wake_5 = (10.0 + 5 * math.log10(5)) / 5
    cal = fit(by_gap, [20.0 + wake_5 + 0.5], [20.0], high_tdf=5, high_interval_s=0.2,
              configured_rtt_ms=20.0)
    assert cal.rtt_ms == 20.0 and cal.virtual_ms == pytest.approx(0.5)
    assert cal.extra_ms(5, 0.2, 20.0) == pytest.approx(wake_5 + 0.5)
    # An 80 ms path at TDF 5: its senders wait 400 ms, 5 times what they wait at TDF 1.
    assert cal.extra_ms(5, 0.2, 80.0) == pytest.approx((10.0 + 5 * math.log10(5)) / 5 + 0.5)
    assert cal.extra_ms(1, 0.2, 80.0) == pytest.approx(cal.wake_real_ms(0.2) + 0.5)
    # A 5 ms path waits less than the calibration's 20 ms up to TDF 4: no term.
    assert cal.extra_ms(4, 0.2, 5.0) == pytest.approx(cal.wake_real_ms(0.8) / 4 + 0.5)
    assert cal.extra_ms(8, 0.2, 5.0) == pytest.approx(
        (cal.wake_real_ms(1.6) + 5 * math.log10(2)) / 8 + 0.5)
    # A file without the round trip has no term.
    cal.rtt_ms = 0.0
    assert cal.extra_ms(5, 0.2, 80.0) == pytest.approx(10.0 / 5 + 0.5)
    # advise uses the path's round trip: the 80 ms demo needs more than a 20 ms one would.
    cal.rtt_ms = 20.0
    long_wait = advise(demo_topology(delay_ms=40), cal, 5.0, interval_s=0.2)
    assert long_wait.predicted_rtt_error_pct == pytest.approx(
        100 * cal.extra_ms(long_wait.tdf, 0.2, 80.0) / 80.0)
    cal.rtt_ms = 0.0
    assert advise(demo_topology(delay_ms=40), cal, 5.0, interval_s=0.2).tdf < long_wait.tdf
