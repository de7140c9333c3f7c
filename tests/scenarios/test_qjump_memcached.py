"""scenarios/qjump_memcached.py: the paper's memaslap workload, the topology
each --param gives, and what a run records from memaslap's report."""

from pathlib import Path

import pytest
from scenario_module import load_scenario

from selena.errors import UnitError
from selena.metrics import make_metric

qjmc = load_scenario("qjump_memcached")
REPORT = (Path(__file__).parents[1] / "analysis" / "data" / "memaslap-2s.txt").read_bytes()


def test_the_load_is_the_papers_memaslap_workload():
    argv = qjmc.memaslap(128).split()
    assert argv[0] == "memcaslap" and "-B" in argv            # binary protocol
    argv.remove("-B")
    flags = dict(zip(argv[1::2], argv[2::2], strict=True))
    assert (flags["-T"], flags["-c"], flags["-X"]) == ("2", "128", "1024")
    assert flags["-s"] == "10.0.9.11:11211" and flags["-t"] == flags["-S"] == f"{qjmc.RUN_S}s"


def test_the_requests_in_flight_are_scaled_with_the_rates_unless_a_param_says():
    # 128 / 100, at least memaslap's one per thread (scaling rule).
    assert qjmc.PAPER_CONCURRENCY == 128 and qjmc.FACTOR == 100
    assert qjmc.CONCURRENCY == 2
    flags = qjmc.memaslap(qjmc.concurrency_of(qjmc.CONCURRENCY)).split()
    assert flags[flags.index("-c") + 1] == "2" and flags[flags.index("-T") + 1] == "2"
    assert qjmc.concurrency_of("128") == 128      # the paper's own, by --param


@pytest.mark.parametrize("params, name, prio, cpu", [
    ({}, "qjmc", False, "dilated"),
    ({"prio": "1"}, "qjmcp", True, "dilated"),
    ({"cpu": "real", "concurrency": "8"}, "qjmcr", False, "real"),
])
def test_each_param_gives_its_topology(params, name, prio, cpu):
    topology = qjmc.build(**params)
    assert topology.name == name and topology.tdf == 10
    hosts = [n for n in topology.nodes.values() if n.name != "s1"]
    assert sorted(h.name for h in hosts) == ["h11", "h3", "h8"]
    assert {(h.template, h.cpu_time) for h in hosts} == {("qjump-host", cpu)}
    assert {link.prio for link in topology.links} == {prio}


@pytest.mark.parametrize("value, complaint", [
    ("many", "concurrency='many': want a whole number"),
    ("1", "concurrency='1': want 2 to 1024 requests in flight"),
    ("2.5", "concurrency='2.5': want a whole number"),
])
def test_a_bad_concurrency_is_refused_before_anything_is_built(value, complaint):
    with pytest.raises((ValueError, UnitError), match=complaint):
        qjmc.build(concurrency=value)


class _Recorder:
    def __init__(self):
        self.metrics = {}

    def record(self, name, value, unit=""):
        self.metrics[name] = make_metric(name, value, None, unit)


def test_a_run_records_memaslaps_totals_and_histogram():
    exp = _Recorder()
    qjmc._record(exp, "idle", REPORT)
    got = {name: m.samples for name, m in exp.metrics.items()}
    assert got["memcached_idle_mean_us"] == [155.0]
    assert got["memcached_idle_std_us"] == [122.68]
    assert got["memcached_idle_tps"] == [102673.0]
    assert got["memcached_idle_get_misses"] == [0.0]
    hist = got["memcached_idle_log2_hist"]
    # Sample k is bucket k: none below 2^4 us, all 205353 requests counted.
    assert len(hist) == 14 and hist[:4] == [0.0] * 4 and hist[4] == 333.0
    assert sum(hist) == 205353


class _Guest:
    def __init__(self, listing):
        self.listing = listing

    def cmd(self, node, command, check=False):
        assert command == "nft list chain ip qjump out" and check
        return type("Result", (), {"stdout": self.listing.encode()})()


def test_the_marked_packets_are_read_from_the_rules_counter():
    listing = ("table ip qjump {\n\tchain out {\n\t\ttype filter hook output priority "
               "filter; policy accept;\n\t\ttcp dport 11211 counter packets 1234 bytes "
               "567890 ip dscp set cs4\n\t}\n}\n")
    assert qjmc._marked_packets(_Guest(listing), "h3") == 1234
    assert "counter ip dscp set cs4" in qjmc._mark("dport")
    with pytest.raises(ValueError, match="h3: no counter in the marking rule"):
        qjmc._marked_packets(_Guest("table ip qjump {\n}\n"), "h3")
