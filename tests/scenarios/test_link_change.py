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


# The guests' ping (busybox, as in tools-host): seq from 0.
BUSYBOX_PING = """PING 10.0.0.2 (10.0.0.2): 56 data bytes
64 bytes from 10.0.0.2: seq=0 ttl=64 time=61.2 ms
64 bytes from 10.0.0.2: seq=1 ttl=64 time=60.9 ms
64 bytes from 10.0.0.2: seq=2 ttl=64 time=61.0 ms
64 bytes from 10.0.0.2: seq=3 ttl=64 time=121.3 ms
64 bytes from 10.0.0.2: seq=4 ttl=64 time=121.1 ms
64 bytes from 10.0.0.2: seq=5 ttl=64 time=121.4 ms
"""


def test_busybox_replies_count_their_sequence_from_zero():
    before, after = link_change.split_rtts(BUSYBOX_PING, start=10.0, change=10.5, margin=0.25)
    assert before == [61.2, 60.9] and after == [121.1, 121.4]


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
    assert main(["validate", str(SCENARIOS / "link_change.py"), "--param", "change=events",
                 "--events", str(events)]) == 0
    assert "1 scheduled events" in capsys.readouterr().out
    assert main(["validate", str(SCENARIOS / "link_change.py"), "--param", "change=file"]) == 1
    assert "change='file': want at (the scenario changes the link) or events" in \
        capsys.readouterr().err


class _Exp:
    """Just what run() uses, with a clock that the pings and the change move."""

    def __init__(self, params, events=()):
        self.params = params
        self.events = list(events)
        self.t = 0.0
        self.records = {}
        self.changes = []

    def now(self):
        return self.t

    def cmd(self, node, command):
        self.t += 0.2

    def start(self, node, command, timeout=None):
        self.t += 0.1
        return command

    def link(self, a, b):
        exp = self

        class Handle:
            def set(self, **values):
                exp.changes.append((a, b, values))
        return Handle()

    def at(self, t, fn, *args, **kwargs):
        def apply():
            fn(*args, **kwargs)
            self.events.append({"virtual_s": t + 0.01, "scheduled_s": t})

        class Done:
            def result(self):
                return None
        self.pending = apply
        return Done()

    def wait(self, command):
        if getattr(self, "pending", None):
            self.pending()
        start = 0.3
        change = self.events[-1]["virtual_s"] if self.events else float("inf")
        lines = [f"64 bytes from 10.0.0.2: icmp_seq={n} ttl=64 time="
                 f"{60.5 if start + (n - 1) * 0.2 < change else 120.5} ms"
                 for n in range(1, 41)]
        return type("R", (), {"stdout": "\n".join(lines).encode()})()

    def record(self, name, value, expected=None, unit=""):
        self.records[name] = (value, expected)


def test_run_changes_the_link_at_its_time_and_records_both_sides():
    exp = _Exp({})
    link_change.run(exp)
    assert exp.changes == [("h1", "h2", {"delay": "60ms"})]
    before, expected_before = exp.records["rtt_ms_before"]
    after, expected_after = exp.records["rtt_ms_after"]
    assert (expected_before, expected_after) == (60.0, 120.0)
    assert set(before) == {60.5} and set(after) == {120.5}
    assert len(before) >= 15 and len(after) >= 15
    assert abs(exp.records["change_late_ms"][0] - 10.0) < 1e-6


def test_run_with_the_change_from_an_events_file_only_watches():
    exp = _Exp({"change": "events"}, events=[{"virtual_s": 4.52, "scheduled_s": 4.5}])
    link_change.run(exp)
    assert exp.changes == []
    assert exp.records["rtt_ms_before"][1] == 60.0
    assert set(exp.records["rtt_ms_after"][0]) == {120.5}
    with pytest.raises(RuntimeError, match="no event was applied during the pings"):
        link_change.run(_Exp({"change": "events"}))
