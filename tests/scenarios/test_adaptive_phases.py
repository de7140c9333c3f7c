"""scenarios/adaptive_phases.py without a lab: the topology (the scaling
rule, the probe-srv pair the smallest round trip), the flows of each phase,
and the per-phase metrics from replayed sink reports and pings."""

import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from scenario_module import load_scenario

from selena.advise import least_delay_path

phases = load_scenario("adaptive_phases")


@dataclass
class Handle:
    node: str
    argv: list


class FakeExperiment:
    """Virtual time advances by sleep and by each ping's deadline; a sink
    server's 0.5 s reports say its client sent `rate` Mbit/s; pings answer
    in `rtt` ms."""

    def __init__(self, rate: float, rtt: float, params: dict | None = None) -> None:
        self.rate, self.rtt, self.params = rate, rtt, params or {}
        self.t = 0.0
        self.metrics: dict[str, tuple[list[float], float | None]] = {}
        self.started: list[tuple[float, Handle]] = []
        self.pings: list[tuple[float, str]] = []

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.t += max(0.0, seconds)

    def parallel(self, *calls):
        return [call() for call in calls]

    def cmd(self, node, command, **_):
        if node == "probe" and "-w" in command:
            self.pings.append((self.t, command))
            seconds = int(command.split("-w ")[1].split()[0])
            self.t += seconds
            lines = [f"64 bytes from x: seq={i} ttl=64 time={self.rtt:.3f} ms"
                     for i in range(int(seconds / phases.PING_S))]
            return SimpleNamespace(ok=True, stdout="\n".join(lines).encode())
        return SimpleNamespace(ok=True, stdout=b"")

    def start(self, node, argv, **_):
        handle = Handle(node, list(argv))
        self.started.append((self.t, handle))
        return handle

    def wait(self, handle, *, check=False):
        argv = handle.argv
        if "-s" not in argv:
            return SimpleNamespace(ok=True, stdout=b"")
        port = argv[argv.index("-p") + 1]
        client = next(h for _, h in self.started if "-c" in h.argv
                      and h.argv[h.argv.index("-p") + 1] == port)
        duration = float(client.argv[client.argv.index("-t") + 1])
        step = phases.REPORT_S
        intervals = [{"sum": {"start": i * step, "seconds": step,
                              "bytes": self.rate * 1e6 * step / 8}}
                     for i in range(round(duration / step))]
        intervals.append({"sum": {"start": duration, "seconds": 0.001, "bytes": 10}})
        return SimpleNamespace(ok=True, stdout=json.dumps({"intervals": intervals}).encode())

    def record(self, name, samples, *, expected=None, unit=""):
        self.metrics[name] = (list(samples), expected)


def test_the_topology_follows_the_scaling_rule_and_probe_srv_is_the_smallest_rtt():
    topology = phases.build()
    assert set(topology.nodes) == {"s1", "srv", "probe", "h1", "h2", "h3", "h4"}
    rates = sorted(link.rate_bps for link in topology.links)
    assert rates == [10e6] * 5 + [100e6]
    path = least_delay_path(topology)
    # The monitor's latency signal and the scenario's pings use the same pair,
    # whose links carry no flow's standing queue.
    assert (path.a, path.b, path.rtt_ms) == ("probe", "srv", 200.0)


def test_flows_run_through_contiguous_phases():
    assert phases.flow_spans([1, 4, 1]) == [(1, 0, 2), (2, 1, 1), (3, 1, 1), (4, 1, 1)]
    assert phases.flow_spans([2, 1, 2]) == [(1, 0, 2), (2, 0, 0), (2, 2, 2)]


@pytest.mark.parametrize("transport, per_flow", [("udp", 9.0), ("tcp", 10 * 1448 / 1514)])
def test_each_phase_is_measured_against_its_configured_values(transport, per_flow):
    exp = FakeExperiment(rate=8.5, rtt=203.0, params={"transport": transport})
    phases.run(exp)
    clients = [(t, h) for t, h in exp.started if "-c" in h.argv]
    starts = [(t, h.node, float(h.argv[h.argv.index("-t") + 1])) for t, h in clients]
    assert starts == [(3.0, "h1", 60.0), (23.0, "h2", 20.0), (23.0, "h3", 20.0),
                      (23.0, "h4", 20.0)]
    # Constant-rate UDP: 9 Mbit/s of 1400-byte payloads, 9.27 Mbit/s of
    # frames on a 10 Mbit/s link; TCP as VT-Mininet's.
    udp = [h.argv[h.argv.index("-u"):] for _, h in clients if "-u" in h.argv]
    assert udp == ([["-u", "-b", "9M", "-l", "1400"]] * 4 if transport == "udp" else [])
    assert phases.UDP_MBIT * (phases.UDP_BYTES + 42) / phases.UDP_BYTES < 10
    assert [t for t, _ in exp.pings] == [5.0, 25.0, 45.0]      # past SETTLE_S
    assert exp.metrics["phase_bounds_s"][0] == [3.0, 23.0, 43.0, 63.0]
    assert exp.metrics["phase_flows"][0] == [1, 4, 1]
    for i, k in ((1, 1), (2, 4), (3, 1)):
        samples, expected = exp.metrics[f"phase{i}_mbit"]
        assert expected == pytest.approx(k * per_flow)
        # 1 s windows past the first 2 s and before the last 1 s of the phase.
        assert samples == [pytest.approx(k * 8.5)] * 17, (i, samples)
        rtts, expected = exp.metrics[f"phase{i}_rtt_ms"]
        assert expected == 200 and rtts and set(rtts) == {203.0}


def test_udp_is_the_default_transport():
    exp = FakeExperiment(rate=9.0, rtt=200.0)
    phases.run(exp)
    assert all("-u" in h.argv for _, h in exp.started if "-c" in h.argv)
    assert exp.metrics["phase2_mbit"][1] == pytest.approx(36.0)


def test_bad_parameters_are_refused_naming_them():
    with pytest.raises(ValueError, match="flows='1,x'"):
        phases.build(flows="1,x")
    with pytest.raises(ValueError, match="phase_s=2"):
        phases.build(phase_s=2)
    with pytest.raises(ValueError, match="transport='sctp'"):
        phases.build(transport="sctp")
    with pytest.raises(ValueError, match="transport='quic'"):
        phases.run(FakeExperiment(rate=1, rtt=1, params={"transport": "quic"}))
