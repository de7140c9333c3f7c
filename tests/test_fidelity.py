"""The fidelity monitor: parsing what Dom0 reports, the verdict rules, the
sampling thread, and the verdict in the bundle and in a sweep's rows."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from selena.backends.base import LoadSample, QdiscStats
from selena.backends.xl import XlBackend, parse_qdisc_stats, parse_vcpu_list
from selena.errors import BackendError
from selena.experiment import Experiment
from selena.fidelity import Monitor, judge
from selena.model import Topology
from selena.sweep import SweepPlan, analyze, run_sweep, verdict

VCPU_LIST = """\
Name                                ID  VCPU   CPU State   Time(s) Affinity (Hard / Soft)
Domain-0                             0     0    0   r--     181.9  all / all
Domain-0                             0     1    1   -b-     170.2  all / all
selena-pair-h1                       3     0    1   -b-       4.5  all / all
selena-pair-h1                       3     1    0   -b-       3.5  all / all
selena-pair-h2                       4     0    0   ---p      0.0  all / all
"""

TC_JSON = json.dumps([
    {"kind": "htb", "handle": "1:", "dev": "vif3.0", "packets": 900, "drops": 2,
     "overlimits": 40, "backlog": 3028, "qlen": 2},
    {"kind": "netem", "handle": "10:", "parent": "1:1", "dev": "vif3.0", "packets": 902,
     "drops": 1, "overlimits": 0, "backlog": 1514, "qlen": 1},
    {"kind": "noqueue", "handle": "0:", "dev": "lo", "packets": 0, "drops": 0,
     "overlimits": 0, "backlog": 0, "qlen": 0},
])


def test_vcpu_list_and_qdisc_stats_are_parsed():
    vcpus = parse_vcpu_list(VCPU_LIST)
    assert vcpus == {"Domain-0": [181.9, 170.2], "selena-pair-h1": [4.5, 3.5],
                     "selena-pair-h2": [0.0]}
    stats = parse_qdisc_stats(TC_JSON)
    assert stats["vif3.0"] == QdiscStats(sent_packets=902, drops=3, overlimits=40,
                                         backlog_bytes=3028)
    with pytest.raises(BackendError, match="no JSON"):
        parse_qdisc_stats("Error: garbage")


def samples(dom0_share: float, guests: dict[str, list[float]], n: int = 11,
            step: float = 2.0) -> list[LoadSample]:
    """n samples `step` s apart; guests[node] is its busy share per interval."""
    out = []
    used = {node: 0.0 for node in guests}
    for i in range(n):
        if i:
            for node, shares in guests.items():
                used[node] += shares[(i - 1) % len(shares)] * step
        out.append(LoadSample(real=i * step, dom0_vcpu_s=[dom0_share * i * step] * 2,
                              guest_vcpu_s={node: [used[node]] for node in guests},
                              qdiscs={"vif3.0": QdiscStats(100 * i, i // 5, 3 * i, 1514 * i)},
                              vif_nodes={"vif3.0": "h1 eth0"}))
    return out


def test_a_busy_guest_and_a_saturated_dom0_make_the_run_degraded():
    # h2 saturated in 4 of 10 intervals, h1 never; Dom0 always.
    report = judge(samples(0.97, {"h1": [0.2], "h2": [1.0, 0.3, 1.0, 0.3, 0.3]}))
    assert report.verdict == "degraded"
    assert report.reasons == ["vCPU of h2 busy >= 95% in 40% of the run",
                              "Dom0 CPU busy >= 55% in 100% of the run (limit 10%; peak 97%)"]
    assert report.intervals == 10 and report.guest_busy["h1"] == [pytest.approx(0.2)] * 10
    assert report.links["vif3.0"] == {"node": "h1 eth0", "sent_packets": 1000, "drops": 2,
                                      "overlimits": 30, "max_backlog_bytes": 15140}


def test_an_idle_host_is_ok_and_rare_spikes_are_tolerated():
    report = judge(samples(0.3, {"h1": [0.99] + [0.1] * 19}, n=21))
    assert report.verdict == "ok" and report.reasons == []       # 1 of 20 intervals
    assert "fidelity: ok (20 intervals of 2 s" in report.line()


def test_the_line_says_how_long_the_intervals_really_were():
    """A lab run at TDF 1 asked for 2 s and got about 5 s (each sample two
    Dom0 commands under load), yet the line said "12 intervals of 2 s"."""
    slow = judge(samples(0.3, {"h1": [0.1]}, n=13, step=5.2))
    assert slow.mean_interval_s == pytest.approx(5.2)
    assert "fidelity: ok (12 intervals of 5.2 s on average (every 2 s asked);" in slow.line()
    assert slow.to_json()["mean_interval_s"] == 5.2 and slow.to_json()["interval_s"] == 2.0
    near = judge(samples(0.3, {"h1": [0.1]}, n=13, step=2.3))     # within a quarter
    assert "(12 intervals of 2 s;" in near.line()


def test_an_interval_that_held_a_pause_is_judged_by_nothing():
    """h1 saturated in 4 of 10 intervals; a pause of 60 s in the middle
    (frozen guests, an idle Dom0) would make that 4 of 40 s out of 80 and
    call the run ok."""
    run = samples(0.97, {"h1": [1.0, 0.3, 1.0, 0.3, 0.3]})
    later = [dataclasses.replace(s, real=s.real + 60.0) for s in run[5:]]
    # One sample at the pause's end, its counters as at its start.
    resumed = dataclasses.replace(run[5], real=run[5].real + 60.0, after_pause=True)
    paused = judge([*run[:6], resumed, *later[1:]])
    assert paused.reasons == judge(run).reasons == [
        "vCPU of h1 busy >= 95% in 40% of the run",
        "Dom0 CPU busy >= 55% in 100% of the run (limit 10%; peak 97%)"]
    assert (paused.intervals, paused.sampled_s, paused.paused_intervals) == (10, 20.0, 1)
    assert (paused.to_json()["paused_intervals"], paused.to_json()["sampled_s"]) == (1, 20.0)
    assert paused.guest_busy == judge(run).guest_busy
    assert paused.links == judge(run).links       # counters are the run's, pause or not


def test_the_monitor_samples_nothing_while_paused():
    taken: list[float] = []

    def sample() -> LoadSample:
        taken.append(time.monotonic())
        return LoadSample(real=taken[-1], dom0_vcpu_s=[0.0])

    monitor = Monitor(sample, interval_s=0.05).start()
    time.sleep(0.3)
    monitor.pause()
    paused = time.monotonic()
    time.sleep(0.5)
    resumed = time.monotonic()
    monitor.resume()
    time.sleep(0.3)
    report = monitor.stop()
    assert not [t for t in taken if paused < t < resumed], (paused, resumed, taken)
    assert [s.after_pause for s in monitor.samples].count(True) == 1
    # The pause's half second is not in the sampled time; the rest is.
    assert report.sampled_s < monitor.samples[-1].real - monitor.samples[0].real - 0.45
    monitor = Monitor(sample, interval_s=0.05).start()
    monitor.pause()
    time.sleep(0.2)
    assert monitor.stop().sampled_s < 0.1 and monitor.samples[-1].after_pause


def test_too_short_or_failed_sampling_is_unknown_with_the_reason():
    assert judge(samples(0.1, {"h1": [0.1]}, n=2)).reasons == \
        ["run too short to judge (1 interval(s) of 2 s)"]
    failed = judge(samples(0.1, {"h1": [0.1]}), failure="xl vcpu-list: exit 1")
    assert failed.verdict == "unknown" and failed.reasons == \
        ["sampling failed: xl vcpu-list: exit 1"]


def test_the_monitor_samples_in_a_thread_and_records_a_failure():
    calls = []

    def sample() -> LoadSample:
        calls.append(time.monotonic())
        if len(calls) == 4:
            raise BackendError("xl vcpu-list: connection refused")
        return LoadSample(real=time.monotonic(), dom0_vcpu_s=[0.0])

    monitor = Monitor(sample, interval_s=0.05).start()
    time.sleep(0.5)
    report = monitor.stop()
    assert len(calls) == 4 and report.verdict == "unknown"
    assert report.reasons == ["sampling failed: xl vcpu-list: connection refused"]
    assert report.sampling_real_s >= 0 and report.monitor_cpu_s >= 0


def pair() -> Topology:
    topo = Topology("pair", tdf=4)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit", delay="5ms")
    return topo


def test_every_run_gets_a_verdict_in_its_bundle(fake_xen, tmp_path):
    fake_xen.cpu_share["selena-pair-h2"] = 1.0
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(pair(), backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor_interval=0.2) as exp:
        exp.sleep(1.0)                                   # 4 real seconds at TDF 4
    fidelity = json.loads((tmp_path / "out/fidelity.json").read_text())
    assert fidelity["verdict"] == "degraded", fidelity
    assert fidelity["reasons"][0].startswith("vCPU of h2 busy >= 95% in ")
    assert not any("h1" in r for r in fidelity["reasons"])
    assert fidelity["intervals"] >= 10
    assert {link["node"] for link in fidelity["links"].values()} == {"h1 eth0", "h2 eth0"}
    assert all(link["sent_packets"] > 0 for link in fidelity["links"].values())
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["fidelity"]["verdict"] == "degraded"
    assert exp.fidelity is not None and exp.fidelity.line().startswith("fidelity: degraded")
    assert ("xl", "vcpu-list") in fake_xen.calls
    # The latency signal probed the pair's 10 ms round trip through the control
    # channel; the fake guests have no ping, so it says what it could not check.
    latency = fidelity["latency"]
    assert latency["path"] == "h1-h2" and latency["configured_ms"] == 10.0
    assert latency["probes"] >= 1 and latency["echoes"] == 0
    assert "ping -c 5 -i 0.2 -W 2 10.0.0.2" in latency["errors"][0]
    assert fidelity["unchecked"][0].startswith("latency: fewer than 5 echoes between h1 and h2")


def test_no_monitor_means_no_sampling(fake_xen, tmp_path):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(pair(), backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor=False) as exp:
        exp.cmd("h1", "true")
    assert not (tmp_path / "out/fidelity.json").exists()
    assert ("xl", "vcpu-list") not in fake_xen.calls


def test_the_latency_probe_can_be_turned_off_and_says_so(fake_xen, tmp_path):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(pair(), backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor_interval=0.2, latency_probe=False) as exp:
        exp.sleep(1.0)
    fidelity = json.loads((tmp_path / "out/fidelity.json").read_text())
    assert fidelity["latency"] == {}            # no probe ran (it has probes >= 1 above)
    assert fidelity["unchecked"][0] == ("latency: the latency probe is off "
                                        "(--no-latency-probe)")


def test_a_degraded_monitor_verdict_outranks_a_metric_that_looks_right(tmp_path):
    assert verdict("ok", {"expected": 10, "error_pct": 1.0},
                   fidelity={"verdict": "degraded", "reasons": ["Dom0 CPU saturated in 50% "
                                                                "of the run"]}) == \
        "degraded (Dom0 CPU saturated in 50% of the run)"
    plan = SweepPlan("s.py", [1, 10], 1)

    def run_one(run, bundle):
        bundle.mkdir(parents=True)
        (bundle / "meta.json").write_text(json.dumps({"status": "ok", "real_seconds": 1,
                                                        "sweep_id": run.sweep_id}))
        (bundle / "metrics.json").write_text(json.dumps({"x": {
            "n": 3, "samples": [1.0, 1.0, 1.0], "median": 1.0, "expected": 1.0,
            "error_pct": 0.0}}))
        degraded = run.tdf == 1
        (bundle / "fidelity.json").write_text(json.dumps({
            "verdict": "degraded" if degraded else "ok",
            "reasons": ["vCPU of h1 busy >= 95% in 80% of the run"] if degraded else []}))

    run_sweep(plan, tmp_path, run_one)
    analysis = analyze(tmp_path)
    assert [r["verdict"] for r in analysis.rows] == \
        ["degraded (vCPU of h1 busy >= 95% in 80% of the run)", "ok"]
    assert analysis.recommended == 10.0
