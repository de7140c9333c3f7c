"""scenarios/star_throughput.py without a lab: the topology it builds and how
it turns the sink's iperf3 reports into Figure 4's per-client samples and
Figure 5's aggregate steps (a fake experiment replays receiver reports)."""

import json
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from scenario_module import load_scenario

star = load_scenario("star_throughput")


@dataclass
class Handle:
    node: str
    argv: list


class FakeExperiment:
    """Virtual time advances only by sleep; a sink server's report says every
    100 ms window received `mbit` (its client's rate)."""

    def __init__(self, rates: dict[str, float], params: dict | None = None) -> None:
        self.rates, self.params = rates, params or {}
        self.t = 0.0
        self.metrics: dict[str, tuple[list[float], float | None]] = {}
        self.started: list[tuple[float, Handle]] = []
        self.listening: list[tuple[str, int]] = []     # ports waited for, in order

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.t += max(0.0, seconds)

    def parallel(self, *calls):
        return [call() for call in calls]

    def cmd(self, node, command, **_):
        return SimpleNamespace(ok=True)

    def start(self, node, argv, **_):
        handle = Handle(node, list(argv))
        self.started.append((self.t, handle))
        return handle

    def wait_listening(self, node, port, **_):
        assert any(h.node == node and "-s" in h.argv and h.argv[h.argv.index("-p") + 1]
                   == str(port) for _, h in self.started), f"no server on {node}:{port}"
        assert not any("-c" in h.argv for _, h in self.started), "a client started first"
        self.listening.append((node, port))

    def wait(self, handle, *, check=False):
        argv = handle.argv
        port = argv[argv.index("-p") + 1]
        if "-s" not in argv:
            return SimpleNamespace(ok=True, command=" ".join(argv), stdout=b"")
        client = next(h for _, h in self.started if "-c" in h.argv
                      and h.argv[h.argv.index("-p") + 1] == port)
        duration = float(client.argv[client.argv.index("-t") + 1])
        mbit = self.rates[client.node]
        steps = round(duration / star.WINDOW_S)
        intervals = [{"sum": {"start": i * star.WINDOW_S, "seconds": star.WINDOW_S,
                              "bytes": mbit * 1e6 * star.WINDOW_S / 8,
                              "bits_per_second": mbit * 1e6}} for i in range(steps)]
        # iperf3's last report is a sliver of a window: left out.
        intervals.append({"sum": {"start": duration, "seconds": 0.001, "bytes": 10,
                                  "bits_per_second": 80_000}})
        return SimpleNamespace(ok=True, command=" ".join(argv),
                               stdout=json.dumps({"intervals": intervals}).encode())

    def record(self, name, samples, *, expected=None, unit=""):
        self.metrics[name] = (list(samples), expected)


def test_the_sink_link_carries_every_client_and_clients_have_their_own_rate():
    topology = star.build(clients=3, client_mbit=10)
    rates = sorted(link.rate_bps for link in topology.links)
    assert rates == [10e6, 10e6, 10e6, 30e6]
    assert set(topology.nodes) == {"s1", "srv", "h1", "h2", "h3"}


def test_flows_start_staggered_and_each_step_counts_the_flows_running():
    exp = FakeExperiment({"h1": 9.0, "h2": 8.0, "h3": 7.0})
    star.run(exp)
    clients = [(t, h) for t, h in exp.started if "-c" in h.argv]
    gaps = [b[0] - a[0] for a, b in zip(clients, clients[1:], strict=False)]
    assert gaps == [star.STAGGER_S, star.STAGGER_S]
    # Every server's port listened before the first client started.
    assert exp.listening == [("srv", 5201), ("srv", 5202), ("srv", 5203)]
    per_client, expected = exp.metrics["client_mbit"]
    assert expected == pytest.approx(10 * 1448 / 1514)
    # Each flow's first second (slow start) and the sliver are left out.
    assert sorted(set(per_client)) == [7.0, 8.0, 9.0]
    assert per_client.count(9.0) == round((14 - star.SLOW_START_S) / star.WINDOW_S)
    for k, total in ((1, 9.0), (2, 17.0), (3, 24.0)):
        samples, want = exp.metrics[f"aggregate_mbit_{k}flows"]
        assert samples and all(s == pytest.approx(total) for s in samples), (k, samples)
        assert want == pytest.approx(k * 10 * 1448 / 1514)


def test_a_bad_client_count_is_refused_naming_it():
    with pytest.raises(ValueError, match="clients=0"):
        star.build(clients=0)


def test_figures_7_and_8_start_every_flow_at_once_and_record_the_last_step_only():
    exp = FakeExperiment({f"h{k}": 9.0 for k in range(1, 9)},
                         params={"clients": 8, "stagger_s": 0, "last_s": 5})
    star.run(exp)
    starts = {t for t, h in exp.started if "-c" in h.argv}
    assert len(starts) == 1                              # all at once
    durations = {h.argv[h.argv.index("-t") + 1] for _, h in exp.started if "-c" in h.argv}
    assert durations == {"5"}
    assert sorted(exp.metrics) == ["aggregate_mbit_8flows", "client_mbit", "client_mbit_1s"]
    samples, _ = exp.metrics["aggregate_mbit_8flows"]
    assert samples and all(s == pytest.approx(72.0) for s in samples)
    assert len(exp.metrics["client_mbit"][0]) == 8 * round((5 - star.SLOW_START_S)
                                                           / star.WINDOW_S)
    # Four whole seconds per client past its first.
    assert exp.metrics["client_mbit_1s"][0] == [pytest.approx(9.0)] * 8 * 4


def test_one_second_windows_average_ten_reports_of_one_client_and_skip_a_partial_one():
    """Figures 7, 8 and 10 count 1 s windows, as the paper's did: each the
    bits of ten 100 ms reports of one client over their time, never two
    clients' reports together, and none from a second cut short."""
    class Swinging(FakeExperiment):
        def wait(self, handle, *, check=False):
            result = super().wait(handle, check=check)
            if "-s" not in handle.argv:
                return result
            report = json.loads(result.stdout)
            for i, interval in enumerate(report["intervals"][:-1]):
                mbit = 4.0 if i % 2 else 8.0            # 8, 4, 8, 4, ...: 6 on average
                if handle.argv[handle.argv.index("-p") + 1] == "5202":
                    mbit += 2                           # the second client: 8 on average
                interval["sum"].update(bytes=mbit * 1e6 * star.WINDOW_S / 8,
                                       bits_per_second=mbit * 1e6)
            # A report 0.05 s long closes the run: 1 s windows end where whole ones do.
            report["intervals"].insert(-1, {"sum": {"start": 5.0, "seconds": 0.05,
                                                    "bytes": 1e5, "bits_per_second": 16e6}})
            return SimpleNamespace(ok=True, command=result.command,
                                   stdout=json.dumps(report).encode())

    exp = Swinging({"h1": 0.0, "h2": 0.0}, params={"clients": 2, "stagger_s": 0, "last_s": 5})
    star.run(exp)
    per_second, expected = exp.metrics["client_mbit_1s"]
    assert per_second == [pytest.approx(6.0)] * 4 + [pytest.approx(8.0)] * 4
    assert expected == exp.metrics["client_mbit"][1]


def test_a_run_too_short_to_measure_is_refused_naming_it():
    with pytest.raises(ValueError, match="last_s=1"):
        star.run(FakeExperiment({"h1": 9.0}, params={"clients": 1, "last_s": 1}))
