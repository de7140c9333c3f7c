"""scenarios/fat_tree_fct.py without a lab: the topology it builds, the
flowgen commands it gives each host and how their CSVs become Table 2's
figures (a fake experiment replays flowgen output)."""

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from scenario_module import load_scenario

from selena.errors import ScenarioError

fat = load_scenario("fat_tree_fct")


@dataclass
class Handle:
    node: str
    argv: list


class FakeExperiment:
    """Each client's CSV: `flows` flows of `fct` s each, plus one timeout on h8."""

    def __init__(self, out_dir: Path | None, params: dict | None = None, fct: float = 0.9,
                 ping_fails: str | None = None) -> None:
        self.out_dir, self.params, self.fct = out_dir, params or {}, fct
        self.ping_fails = ping_fails
        self.started: list[Handle] = []
        self.listening: list[tuple[str, int]] = []
        self.killed: list[Handle] = []
        self.metrics: dict[str, tuple] = {}

    def parallel(self, *calls):
        return [call() for call in calls]

    def cmd(self, node, command, **_):
        failed = node == self.ping_fails
        return SimpleNamespace(exit_code=1 if failed else 0, stdout=b"100% packet loss")

    def sleep(self, seconds):
        pass

    def start(self, node, argv, **_):
        handle = Handle(node, list(argv))
        self.started.append(handle)
        return handle

    def wait_listening(self, node, port, **_):
        assert any(h.node == node and "server" in h.argv for h in self.started), node
        assert not any("client" in h.argv for h in self.started), "a client started first"
        self.listening.append((node, port))

    def kill(self, handle):
        self.killed.append(handle)

    def wait(self, handle, **_):
        if "client" not in handle.argv:
            return SimpleNamespace(state="killed", exit_code=None)
        rows = ["flow,start_ns,end_ns,fct_s,bytes,status"]
        for k in range(4):
            end = int((k + self.fct) * 1e9)
            rows.append(f"{k},{k * 10**9},{end},{self.fct},100000,ok")
        if handle.node == "h8":
            rows.append("4,0,0,30.0,5000,timeout")
        return SimpleNamespace(state="exited", exit_code=0, stdout=("\n".join(rows) + "\n")
                               .encode(), stderr=b"", summary=lambda: "exited 0")

    def record(self, name, value, *, expected=None, unit=""):
        self.metrics[name] = (value, expected, unit)


def test_half_a_k4_tree_with_static_routes_and_the_scaled_link_rate():
    topology = fat.build(link_mbit=5)
    hosts = [n for n in topology.nodes if n.startswith("h")]
    assert len(hosts) == 8 and len(topology.nodes) == 18
    assert {link.rate_bps for link in topology.links} == {5e6}
    assert all(node.flows for node in topology.nodes.values() if not node.name.startswith("h"))
    with pytest.raises(ValueError, match="link_mbit=0"):
        fat.build(link_mbit=0)


def test_every_host_runs_a_sink_and_a_closed_loop_generator_to_its_pair(tmp_path):
    exp = FakeExperiment(tmp_path / "runs" / "tdf10-r1", params={"link_mbit": 10, "duration": 4})
    fat.run(exp)                         # (the bundle's directory is made at the end)
    clients = {h.node: h.argv for h in exp.started if "client" in h.argv}
    servers = {h.node for h in exp.started if "server" in h.argv}
    assert servers == set(clients) == {f"h{k}" for k in range(1, 9)}
    # Every sink listened on flowgen's port before any generator started.
    assert sorted(exp.listening) == [(f"h{k}", 5001) for k in range(1, 9)]
    assert clients["h1"][clients["h1"].index("--host") + 1] == "10.0.0.5"
    assert clients["h6"][clients["h6"].index("--host") + 1] == "10.0.0.2"
    argv = clients["h3"]
    # the paper's 10 flows of 10 MB at 1 Gbit/s, scaled with the link: 100 KB at 10 Mbit/s
    assert argv[argv.index("--concurrency") + 1] == "10"
    assert argv[argv.index("--size") + 1] == "100000"
    assert argv[argv.index("--duration") + 1] == "4"
    assert len(exp.killed) == 8
    fcts, ideal, unit = exp.metrics["fct_s"]
    assert len(fcts) == 32 and set(fcts) == {0.9} and unit == "s"
    assert ideal == pytest.approx(10 * 100_000 * 8 / (10e6 * 1448 / 1514))
    assert exp.metrics["flows"][0] == 32 and exp.metrics["failed_flows"][0] == 1
    assert sorted(p.name for p in exp.out_dir.glob("fct-h*.csv")) == \
        [f"fct-h{k}.csv" for k in range(1, 9)]


def test_an_unreachable_pair_stops_the_run_before_any_flow_naming_it(tmp_path):
    exp = FakeExperiment(tmp_path, ping_fails="h7")
    with pytest.raises(ScenarioError, match=r"h7 cannot reach h3 \(10.0.0.3\)"):
        fat.run(exp)
    assert not exp.started
