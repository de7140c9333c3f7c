"""The scenario engine and results bundle against real agents on the host
(through the test xenstored), with a virtual clock we control."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from fake_xenstored import FakeXenstored

from selena.compat import PushCmd, PushOFRule, SetArp
from selena.control.channel import Controller
from selena.control.keys import control_keys
from selena.control.xenstore import XenstoreConnection
from selena.engine import Experiment, arp_interface_index, run_actions
from selena.errors import ScenarioError
from selena.model import Topology
from selena.results import write_bundle

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def exp(tmp_path):
    subprocess.run(["make", "-s", "-C", str(ROOT / "guest-agent")], check=True)
    store = FakeXenstored(str(tmp_path))
    dom0 = XenstoreConnection(store.listen(0), timeout=5)
    domids = {"a": 3, "b": 4}
    procs = []
    for domid in domids.values():
        store.add_domain(domid)
        for key in control_keys(domid, "t"):
            dom0.write(key.path, key.value)
            dom0.set_perms(key.path, list(key.perms))
        procs.append(subprocess.Popen([str(ROOT / "guest-agent/build/selena-agent"),
                                       "--device", store.listen(domid)]))
    ctl = Controller(dom0, tdf=4.0)
    for name, domid in domids.items():
        ctl.add_guest(name, domid)
    ctl.wait_ready(10)
    experiment = Experiment(ctl, 4.0, domids, crash=lambda n: store.remove_domain(domids[n]))
    yield experiment
    experiment.finish()
    ctl.close()
    for p in procs:
        p.kill()
        p.wait()
    dom0.close()
    store.close()


def test_at_runs_at_the_virtual_time_scaled_by_tdf(exp):
    start = time.monotonic()
    future = exp.at(0.25, exp.cmd, "a", "echo late")      # 0.25 virtual s = 1 real s at TDF 4
    result = future.result(timeout=20)
    assert result.stdout == b"late\n"
    assert time.monotonic() - start >= 1.0
    assert exp.records[-1].at_virtual >= 0.25


def test_parallel_and_check(exp):
    start = time.monotonic()
    results = exp.parallel(lambda: exp.cmd("a", "sleep 1; echo x"),
                           lambda: exp.cmd("b", "sleep 1; echo y"))
    assert [r.stdout for r in results] == [b"x\n", b"y\n"]
    assert time.monotonic() - start < 1.9          # concurrently, not one after the other
    with pytest.raises(ScenarioError, match="exited 4"):
        exp.cmd("a", "exit 4", check=True)
    with pytest.raises(ScenarioError, match="no node named 'zz'"):
        exp.cmd("zz", "true")


def test_selena_listing2_actions_in_order_with_background_commands(exp):
    run_actions(exp, [SetArp("a", "eth1", "10.0.0.2", "02:00:00:00:00:02"),
                      PushCmd("a", ("echo one", "sleep 30 &", "echo two")),
                      PushOFRule("b", "br0", "add-flow", "in_port=1,action=output:2")])
    by_command = {r.result.command: r.result for r in exp.records}
    assert by_command["echo one"].stdout == b"one\n"
    assert by_command["echo two"].ok
    assert by_command["sleep 30 "].state == "killed"     # background, stopped at the end
    assert by_command["ovs-ofctl add-flow br0 in_port=1,action=output:2"].state in \
        ("failed", "exited")                            # no OVS on the test host


def test_crash_reports_lost_and_bundle_records_everything(exp, tmp_path):
    doomed = exp.start("b", "sleep 60")
    exp.cmd("a", "seq 1 20000")
    exp.crash("b")
    assert exp.wait(doomed).state == "lost"
    topo = Topology("t", tdf=4.0)
    topo.add_host("a")
    topo.add_host("b")
    out = write_bundle(tmp_path / "bundle", topo=topo, records=exp.records,
                       environment={"xen_version": "test"}, started=1.0, finished=2.0)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["tdf"] == 4.0 and meta["xen_version"] == "test"
    assert len(meta["xen_patch_series_sha256"]) == 64
    assert len(meta["topology_sha256"]) == 64
    assert [c["state"] for c in meta["commands"]] == ["exited", "lost"]
    assert (out / "nodes/a/1.stdout").read_text().split() == [str(i) for i in range(1, 20001)]
    info = json.loads((out / "nodes/b/1.json").read_text())
    assert info["state"] == "lost" and info["command"] == "sleep 60"


def test_arp_interface_names():
    assert arp_interface_index("eth2", [0, 2]) == 2
    assert arp_interface_index("eth1", [0]) == 0          # paper listings count from 1
    with pytest.raises(ScenarioError, match="eth7"):
        arp_interface_index("eth7", [0, 1])
