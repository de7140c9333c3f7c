"""scenarios/link_change.py: its delays parameter, and how it splits ping's
replies into the round trips before and after the change."""

import pytest
from scenario_module import load_scenario

link_change = load_scenario("link_change")

PING = """PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.
64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=61.2 ms
64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=60.9 ms
64 bytes from 10.0.0.2: icmp_seq=3 ttl=64 time=61.0 ms
64 bytes from 10.0.0.2: icmp_seq=4 ttl=64 time=121.3 ms
64 bytes from 10.0.0.2: icmp_seq=5 ttl=64 time=121.1 ms
64 bytes from 10.0.0.2: icmp_seq=6 ttl=64 time=121.4 ms
"""


def test_replies_are_split_at_the_change_leaving_out_those_near_it():
    # Sent at 10.0, 10.2, ..., 11.0; the change at 10.5, 0.25 s of margin.
    before, after = link_change.split_rtts(PING, start=10.0, change=10.5, margin=0.25)
    assert before == [61.2, 60.9]            # 10.0, 10.2 (10.4 is too near)
    assert after == [121.1, 121.4]           # 10.8, 11.0 (10.6 is too near)


def test_the_topology_starts_at_the_first_delay_at_tdf_10():
    topo = link_change.build()
    assert topo.tdf == 10 and topo.links[0].delay_s == 0.03
    assert link_change.build(delays="20,60").links[0].delay_s == 0.02


def test_a_bad_delays_parameter_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"delays='30': want two one-way delays in ms"):
        link_change.delays_ms("30")


def test_the_scenario_and_an_events_file_validate(capsys, tmp_path):
    from scenario_module import SCENARIOS

    from selena.cli import main

    events = tmp_path / "change.events"
    events.write_text("4.5 link h1 h2 delay=60ms\n")
    assert main(["validate", str(SCENARIOS / "link_change.py"), "--events", str(events)]) == 0
    assert "1 scheduled events" in capsys.readouterr().out
