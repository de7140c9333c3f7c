"""scenarios/qjump_mflops.py (QJump Figures 2-3) and scenarios/deploy_scale.py
(the 52-node cold boot) without a lab: topologies, what run() records from
the guests' answers, bad parameters refused naming them."""

from types import SimpleNamespace

import pytest
from scenario_module import load_scenario

mflops = load_scenario("qjump_mflops")
deploy = load_scenario("deploy_scale")


class FakeExperiment:
    """Each node's loop takes `seconds[node]` virtual seconds at TDF 1; the
    TDF divides it (a dilated, uncapped guest)."""

    def __init__(self, params, seconds=None, stdout=b""):
        self.params, self.seconds, self.stdout = params, seconds or {}, stdout
        self.tdf, self.tdfs, self.metrics, self.ran = None, [], {}, []

    def set_tdf(self, tdf):
        self.tdf = tdf
        self.tdfs.append(tdf)

    def parallel(self, *calls):
        return [call() for call in calls]

    def cmd(self, node, command, **_):
        self.ran.append((self.tdf, node, command))
        dur = self.seconds.get(node, 1.0) / (self.tdf or 1)
        return SimpleNamespace(ok=True, dur_ns=int(dur * 1e9), stdout=self.stdout,
                               summary=lambda: "ok")

    def record(self, name, value, *, expected=None, unit=""):
        self.metrics[name] = (value, expected, unit)


def test_mflops_builds_the_most_vms_capped_or_not():
    topology = mflops.build(cpu="real", vms="1,2,4", tdfs="10,20")
    hosts = sorted(n for n, node in topology.nodes.items() if node.cpu_time == "real")
    assert hosts == ["h1", "h2", "h3", "h4"] and topology.tdf == 10
    assert all(n.cpu_time == "dilated" for n in mflops.build().nodes.values()
               if n.name.startswith("h"))


def test_mflops_sums_the_vms_per_tdf_and_changes_the_tdf_between():
    exp = FakeExperiment({"vms": "1,2", "tdfs": "1,10", "iterations": 1000, "repeats": 2},
                         seconds={"h1": 0.5, "h2": 1.0})
    mflops.run(exp)
    assert exp.tdfs == [10]                     # deployed at the first
    assert exp.metrics["work_per_s_tdf1_vms1"] == ([2000.0, 2000.0], None, "iterations/s")
    assert exp.metrics["work_per_s_tdf1_vms2"][0] == [3000.0, 3000.0]   # 2000 + 1000
    assert exp.metrics["work_per_s_tdf10_vms2"][0] == [30000.0, 30000.0]
    assert {n for _, n, _ in exp.ran} == {"h1", "h2"}


@pytest.mark.parametrize("params, complaint", [
    ({"cpu": "capped"}, "cpu='capped'"), ({"vms": "1,two"}, "vms='1,two'"),
    ({"tdfs": "0"}, "tdfs='0'")])
def test_mflops_refuses_bad_parameters_naming_them(params, complaint):
    with pytest.raises(ValueError, match=complaint):
        mflops.build(**params)


def test_deploy_builds_n_tiny_hosts_on_one_hub():
    topology = deploy.build(hosts=52)
    assert len([n for n in topology.nodes if n.startswith("h")]) == 52
    assert topology.tdf == 1
    with pytest.raises(ValueError, match="hosts=0"):
        deploy.build(hosts=0)


def test_deploy_records_every_guest_that_answered_and_dom0_memory(monkeypatch, tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        1572864 kB\nMemFree:  100 kB\n"
                       "MemAvailable:     1048576 kB\n")
    real_path = deploy.Path
    monkeypatch.setattr(deploy, "Path", lambda p: meminfo if p == "/proc/meminfo"
                        else real_path(p))
    exp = FakeExperiment({"hosts": 3}, stdout=b"12.50 3.00\n")
    deploy.run(exp)
    assert exp.metrics["guests_up"] == (3, 3.0, "guests")
    assert exp.metrics["guest_uptime_s"][0] == [12.5, 12.5, 12.5]
    assert exp.metrics["dom0_total_mb"][0] == 1536.0
    assert exp.metrics["dom0_used_mb"][0] == 512.0


spacing = load_scenario("spacing_ccdf")


def test_spacing_runs_about_the_same_real_time_at_every_tdf():
    assert spacing.seconds(35, 1) == 35 and spacing.seconds(35, 10) == 4
    assert spacing.seconds(35, 50) == 2            # at least 2 virtual seconds
    (link,) = spacing.build(rate_mbit=160).links
    assert link.rate_bps == 160e6 and link.delay_s == 0.001
    with pytest.raises(ValueError, match="real_s=5"):
        spacing.build(real_s=5)
