"""selena.scaling: the reproductions' one scaling rule (rates / k, queues as
the paper's time, flow sizes / k), and that every reproduction uses it."""

import ast
from pathlib import Path

import pytest

from selena.errors import UnitError
from selena.scaling import (
    LINUX_QUEUE_S_AT_1GBIT,
    paper_queue_s,
    queue_packets,
    scaled_bytes,
    scaled_link,
    scaled_rate_bps,
    scaled_window,
)

ROOT = Path(__file__).resolve().parents[1]


def test_qjump_queue_keeps_the_papers_drain_time():
    # 100 packets at 10 Gbit/s drain in 0.12 ms; at 100 Mbit/s that is one
    # packet, plus one for the 0.02 ms netem delay line (netem counts it).
    queue_s = paper_queue_s(100, "10Gbit")
    assert queue_s == pytest.approx(120e-6)
    link = scaled_link("10Gbit", 100, queue_s=queue_s, delay="0.02ms")
    assert link == {"rate": "100Mbit", "queue": 2, "delay": "0.02ms"}


def test_queue_time_is_the_same_at_every_factor():
    for factor in (1, 10, 100):
        rate = scaled_rate_bps("1Gbit", factor)
        packets = queue_packets(rate, LINUX_QUEUE_S_AT_1GBIT)
        assert packets * 1500 * 8 / rate == pytest.approx(LINUX_QUEUE_S_AT_1GBIT)
    assert scaled_link("1Gbit", 100, queue_s=LINUX_QUEUE_S_AT_1GBIT) == {
        "rate": "10Mbit", "queue": 10}


def test_queue_never_below_one_packet_and_rounds_up():
    assert queue_packets(1e6, 1e-9) == 1
    assert queue_packets(1e6, 0.013) == 2        # 1.08 packets: two


def test_flow_sizes_scale_with_the_rates():
    assert scaled_bytes(10_000_000, 100) == 100_000
    # The fat tree's ideal FCT (10 flows sharing a link) is the paper's.
    paper = 10 * 10_000_000 * 8 / 1e9
    scaled = 10 * scaled_bytes(10_000_000, 100) * 8 / scaled_rate_bps("1Gbit", 100)
    assert scaled == pytest.approx(paper)


def test_windows_in_requests_scale_with_the_rates_down_to_what_the_tool_runs():
    # QJump's memaslap: 128 requests of 1 KB in flight at 10 Gbit/s is
    # about 1.3 at 100 Mbit/s; memaslap runs one per thread, two threads.
    assert scaled_window(128, 100) == 1
    assert scaled_window(128, 100, least=2) == 2
    assert scaled_window(128, 10) == 13
    with pytest.raises(UnitError, match="paper window 0"):
        scaled_window(0, 100)


@pytest.mark.parametrize("factor", [0.5, 0, -3, float("nan"), True])
def test_bad_factor_is_one_line_error(factor):
    with pytest.raises(UnitError, match="scaling factor"):
        scaled_rate_bps("1Gbit", factor)


def test_bad_queue_is_refused():
    with pytest.raises(UnitError, match="queue of"):
        queue_packets(0, 0.1)


REPRODUCTION_SCENARIOS = ("star_throughput.py", "adaptive_phases.py", "fat_tree_fct.py",
                          "switch_model_fct.py", "qjump_ping.py", "qjump_memcached.py",
                          "qjump_ptpd.py", "spacing_ccdf.py")


@pytest.mark.parametrize("name", REPRODUCTION_SCENARIOS)
def test_every_reproduction_sizes_links_with_the_rule(name):
    """No reproduction sets a rate or a queue by hand: each add_link or
    fat_tree call takes its link from scaled_link."""
    tree = ast.parse((ROOT / "scenarios" / name).read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {getattr(c.func, "attr", getattr(c.func, "id", None)) for c in calls}
    assert "scaled_link" in names
    for call in calls:
        if getattr(call.func, "attr", getattr(call.func, "id", None)) in ("add_link", "fat_tree"):
            given = {k.arg for k in call.keywords}
            assert not given & {"rate", "queue"}, f"{name}: {ast.unparse(call)}"
