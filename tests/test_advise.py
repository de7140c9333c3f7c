"""The advisor without a lab: the two-part floor fitted from TDF 1 and TDF 10,
the least-delay path, the TDF it predicts (and when none will do), the
calibration file's errors, and `selena advise` on a shipped scenario."""

from __future__ import annotations

import json

import pytest

from selena.advise import (
    TCP_SHARE,
    Calibration,
    CalibrationError,
    advise,
    busiest_link,
    fit,
    least_delay_path,
)
from selena.cli import main
from selena.model import Topology
from selena.topologies import linear


def calibration(real_ms: float = 9.0, virtual_ms: float = 1.0,
                ceiling_mbit: float = 40.0) -> Calibration:
    return Calibration(real_ms, virtual_ms, ceiling_mbit, [], [], [], host="lab")


def demo_topology(delay_ms: float = 40, rate_mbit: float = 20) -> Topology:
    topology = Topology("demo", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24")
    h2 = topology.add_host("h2", ip="10.0.0.2/24")
    topology.add_link(h1, h2, rate=f"{rate_mbit}Mbit", delay=f"{delay_ms}ms")
    return topology


def test_the_floor_splits_into_real_and_virtual_time_from_two_tdfs():
    # extra(1) = 10 ms, extra(10) = 1.9 ms: real 9 ms (divided by the TDF), virtual 1 ms.
    cal = fit([10.0, 10.5, 9.5], [1.9, 2.0, 1.8], [19.0, 20.0, 21.0], high_tdf=10)
    assert cal.real_ms == pytest.approx(9.0)
    assert cal.virtual_ms == pytest.approx(1.0)
    assert cal.ceiling_mbit == pytest.approx(20.0 / TCP_SHARE)


def test_noise_never_makes_a_part_negative():
    cal = fit([2.0], [3.0], [10.0])          # slower at TDF 10: all of it virtual
    assert cal.real_ms == 0 and cal.virtual_ms == pytest.approx(2.0)


def test_missing_samples_are_named():
    with pytest.raises(CalibrationError, match="no samples of RTT at TDF 5"):
        fit([1.0], [], [10.0])


def test_least_delay_path_counts_links_through_switches():
    topology = linear(3, delay="5ms")          # h1-s1-s2-s3 with a host on each switch
    path = least_delay_path(topology)
    # Neighbouring hosts: host link, switch link, host link = 3 links of 5 ms.
    assert (path.rtt_ms, path.links) == (pytest.approx(30.0), 3)
    assert least_delay_path(linear(2)) is None                   # no delay anywhere


def test_the_demo_needs_the_tdf_that_brings_the_floor_within_half_the_accuracy():
    advice = advise(demo_topology(), calibration(), 5.0)
    # Half of 5% of 80 ms = 2 ms; 1 ms of it is virtual; 9 ms / TDF <= 1 ms: TDF 9.
    assert advice.tdf == 9
    assert advice.predicted_rtt_error_pct == pytest.approx(2.5)
    assert "advice: TDF 9" in advice.report()
    assert advise(demo_topology(), calibration(), 10.0).tdf == 3    # 4 ms allowed: 9/3
    assert advise(demo_topology(), calibration(), 5.0, headroom=1).tdf == 3


def test_a_busy_link_can_set_the_tdf():
    advice = advise(demo_topology(delay_ms=1000, rate_mbit=100), calibration(), 5.0)
    assert busiest_link(demo_topology(rate_mbit=100))[1] == 100
    # 100 Mbit/s over 95% of a 40 Mbit/s ceiling: TDF >= 2.63.
    assert advice.tdf == 3 and advice.rate_tdf == pytest.approx(100 / 38)


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
    (tmp_path / "old.json").write_text(json.dumps({"version": 0}))
    with pytest.raises(CalibrationError, match="old.json: not a version 1"):
        Calibration.load(tmp_path / "old.json")


def test_selena_advise_prints_the_tdf_for_a_shipped_scenario(tmp_path, capsys):
    path = calibration().save(tmp_path / "cal.json")
    status = main(["advise", "scenarios/dilation_demo.py", "--calibration", str(path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "smallest round trip h1 <-> h2: 80 ms over 1 link(s)" in out
    assert "advice: TDF 9" in out
    assert main(["advise", "nope.py", "--calibration", str(path)]) == 1
    assert "nope.py: no such scenario file" in capsys.readouterr().err
