"""The experiment lifecycle end to end on the host: validation, the xl
backend's commands (against a fake Dom0), the real guest agents over a fake
xenstored, the scenario API, the results bundle and teardown, also when the
body raises or is interrupted. The lab runs the same lifecycle on real Xen."""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref

import pytest
from fake_xen import virtual_ns

import selena.experiment
from selena.backends.xl import XlBackend
from selena.control.channel import Controller
from selena.engine import listening_probe
from selena.errors import (
    BackendError,
    CommandError,
    ExperimentError,
    GuestLost,
    HostNotReady,
    ResultsError,
    ScenarioError,
    TopologyError,
    ValidationError,
)
from selena.experiment import Experiment, SignalInterrupt
from selena.fidelity import ECHO_TIMEOUT_S
from selena.model import Topology
from selena.results import BundleWriter

TDF = 4.0


def pair(name: str = "pair", tdf: float = TDF) -> Topology:
    topo = Topology(name, tdf=tdf)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit", delay="5ms")
    return topo


class SaidExperiment(Experiment):
    """An Experiment keeping the progress lines it said."""

    said: list[str]


def make(fake_xen, tmp_path, topo: Topology | None = None, **kw) -> SaidExperiment:
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    said: list[str] = []
    kw.setdefault("out", tmp_path / "out")
    exp = SaidExperiment(topo or pair(), backend=backend, templates=None,
                         progress=said.append, ready_timeout=20, **kw)
    exp.said = said
    return exp


def calls(fake_xen) -> list[str]:
    return [" ".join(c) for c in fake_xen.calls]


def test_deploy_run_bundle_and_teardown(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path)
    with exp:
        assert set(fake_xen.domains) == {"selena-pair-h1", "selena-pair-h2"}
        assert {d.tdf for d in fake_xen.domains.values()} == {"4"}
        assert all(not d.paused for d in fake_xen.domains.values())
        result = exp["h1"].cmd("echo hello; echo oops >&2")
        assert result.ok and result.stdout == b"hello\n" and result.stderr == b"oops\n"
        exp.record("rtt_ms", [10.2, 10.4, 10.1], expected=10.0, unit="ms")
        assert exp["h2"].IP() == "10.0.0.2"
    made = calls(fake_xen)
    # created paused, TDF set, shaped (scaled by the TDF), unpaused together, destroyed
    creates = [c for c in made if c.startswith("xl create -p")]
    assert len(creates) == 2
    unpause = next(i for i, c in enumerate(made) if c.startswith("selena-tdf unpause"))
    assert sorted(made[unpause].split()[2:]) == ["1", "2"]
    assert max(made.index(c) for c in creates) < unpause
    assert any("netem delay 20000us" in c for c in made)            # 5 ms x TDF 4
    assert any("htb rate 2500000bit" in c for c in made)            # 10 Mbit/s / TDF 4
    assert "xl destroy 1" in made and "xl destroy 2" in made
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert not list((tmp_path / "state").glob("*.json"))
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["status"] == "ok" and meta["tdf"] == TDF and "error" not in meta
    assert meta["xen_version"] == "4.17.5-fake" and meta["host_cpus"] == 2
    assert meta["tdf_timeline"][0]["tdf"] == TDF
    assert meta["commands"][-1]["command"] == "echo hello; echo oops >&2"
    metrics = json.loads((tmp_path / "out/metrics.json").read_text())
    assert metrics["rtt_ms"]["median"] == pytest.approx(10.2)
    assert metrics["rtt_ms"]["error_pct"] == pytest.approx(2.0)
    assert (tmp_path / "out/nodes/h1/1.stdout").read_bytes() == b"hello\n"


def test_body_raising_keeps_the_commands_so_far_and_the_error(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path)
    with pytest.raises(ZeroDivisionError), exp:
        exp.cmd("h1", "echo before")
        exp.start("h2", "sleep 600")            # left running by the failing body
        1 / 0  # noqa: B018 - the user's bug
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["status"] == "failed"
    assert meta["error"]["type"] == "ZeroDivisionError"
    assert meta["error"]["where"].endswith("test_experiment.py:" + str(
        _line_of("1 / 0  # noqa: B018")))
    states = {c["command"]: c["state"] for c in meta["commands"]}
    assert states == {"echo before": "exited", "sleep 600": "killed"}
    assert fake_xen.domains == {} and fake_xen.bridges == {}


def test_ctrl_c_in_the_body_is_recorded_and_torn_down(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path)
    with pytest.raises(KeyboardInterrupt), exp:
        exp.cmd("h1", "true")
        raise KeyboardInterrupt
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["error"]["type"] == "KeyboardInterrupt"
    assert fake_xen.domains == {}


def test_invalid_topology_creates_nothing(fake_xen, tmp_path):
    topo = pair()
    topo.nodes["h2"].interfaces[0].ip = "10.9.9.9/24"      # another subnet
    exp = make(fake_xen, tmp_path, topo)
    with pytest.raises(TopologyError, match="ends are in different subnets"), exp:
        pass
    assert not any(c.startswith(("xl create", "ovs-vsctl add-br")) for c in calls(fake_xen))
    assert not (tmp_path / "out").exists()


def test_pvh_nodes_on_a_xen_without_hvm_are_refused_before_anything_is_made(fake_xen,
                                                                          tmp_path):
    topo = Topology("pvhless", tdf=TDF)
    h1 = topo.add_host("h1", ip="10.0.0.1/24", virt="pvh")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2)
    fake_xen.virt_caps = "pv"
    exp = make(fake_xen, tmp_path, topo)
    with pytest.raises(HostNotReady) as exc, exp:
        pass
    assert exc.value.check == "guest-types" and "the plan has pvh nodes" in str(exc.value)
    assert not any(c.startswith(("xl create", "ovs-vsctl add-br")) for c in calls(fake_xen))
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    # The same plan where Xen offers HVM deploys.
    fake_xen.virt_caps = "pv hvm hap shadow"
    with make(fake_xen, tmp_path, topo):
        assert set(fake_xen.domains) == {"selena-pvhless-h1", "selena-pvhless-h2"}


def test_a_failed_setup_after_deploy_is_rolled_back(fake_xen, tmp_path):
    fake_xen.fail[("selena-tdf", "unpause")] = (1, "unpause refused")
    exp = make(fake_xen, tmp_path)
    with pytest.raises(Exception, match="unpause refused"), exp:
        pass
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    fake_xen.fail.clear()
    # an agent that never comes up: named, and everything removed
    exp = make(fake_xen, tmp_path, pair("late"))
    exp.ready_timeout = 1
    fake_xen.fail[("selena-tdf", "unpause")] = (0, "")    # unpaused, but no agent starts
    with pytest.raises(GuestLost, match="agent was not ready"), exp:
        pass
    assert fake_xen.domains == {}


def test_script_style_without_with(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path, out=None)
    with pytest.raises(ExperimentError, match="not running"):
        exp.cmd("h1", "true")
    exp.deploy()
    try:
        assert exp["h1"].cmd(["sh", "-c", "echo $((6 * 7))"]).stdout == b"42\n"
        with pytest.raises(ScenarioError, match="no node named 'h9'"):
            exp["h9"]
        with pytest.raises(ExperimentError, match="already deployed"):
            exp.deploy()
    finally:
        assert exp.close() is None          # no out: no bundle
    assert fake_xen.domains == {}


def test_virtual_time_scheduling_and_default_timeout(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path, command_timeout=0.25)
    with exp:
        # at() counts from the experiment's start (its clock's origin, set
        # during entry), not from the call: 0.25 virtual s is 1 real s at TDF 4.
        late = exp.at(0.25, exp.cmd, "h1", "echo late", timeout=5)
        assert late.result(timeout=20).stdout == b"late\n"
        assert time.monotonic() - exp.engine.clock.started >= 1.0
        killed = exp.cmd("h2", "sleep 30")          # the default timeout, in virtual time
        assert killed.state == "killed" and killed.reason == "timeout"
        with pytest.raises(ScenarioError, match="h2: `exit 3` exited 3"):
            exp.wait(exp.start("h2", "exit 3"), check=True)
        assert exp.wait(exp.start("h1", "true"), check=True).ok
        assert exp.cmd("h2", "sleep 0.3", timeout=0).ok       # 0: no limit
        with pytest.raises(ScenarioError, match="negative"):
            exp.cmd("h1", "true", timeout=-1)
        results = exp.parallel(lambda: exp.cmd("h1", "sleep 1; echo x", timeout=5),
                               lambda: exp.cmd("h2", "sleep 1; echo y", timeout=5))
        assert [r.stdout for r in results] == [b"x\n", b"y\n"]


def test_wait_listening_returns_once_a_server_started_late_listens(fake_xen, tmp_path):
    """A server that binds its port a while after it starts (as iperf3 can on
    a loaded host): wait_listening returns only once it listens, so the client
    started next connects the first time; nothing listening is named with the
    fix once the guest's timeout ends the wait; a port that is no port is
    refused before any command. The fake Dom0's guests share this host's
    /proc/net/tcp, as a guest reads its own."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]       # free now; the server below binds it
    server_code = ("import socket, time; time.sleep(0.5); s = socket.socket(); "
                   "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                   f"s.bind(('127.0.0.1', {port})); s.listen(); c, _ = s.accept(); "
                   "c.sendall(b'hello'); c.close()")
    client_code = (f"import socket; s = socket.create_connection(('127.0.0.1', {port})); "
                   "print(s.recv(5).decode())")
    exp = make(fake_xen, tmp_path)
    with exp:
        server = exp.start("h2", [sys.executable, "-c", server_code], timeout=30)
        exp["h2"].wait_listening(port, timeout=10)
        client = exp.cmd("h1", [sys.executable, "-c", client_code], timeout=10)
        assert client.ok and client.stdout == b"hello\n", client.stderr
        assert exp.wait(server).ok
        with pytest.raises(ScenarioError,
                           match=rf"^h1: nothing listened on TCP port {port} within 0.5 "
                                 r"virtual s; start its server before waiting, or give"):
            exp.wait_listening("h1", port, timeout=0.5)
        # The guest's clock ended it (the fake's agents keep real time).
        waited = exp.engine.records[-1].result
        assert (waited.state, waited.reason) == ("killed", "timeout"), waited
        ran = len(exp.engine.records)
        for bad in (0, 65536, "5201", True, 80.0):
            with pytest.raises(ScenarioError, match=rf"port {bad!r} is not a TCP port"):
                exp.wait_listening("h1", bad)
        with pytest.raises(ScenarioError, match="timeout -1 is negative"):
            exp.wait_listening("h1", port, timeout=-1)
        assert len(exp.engine.records) == ran


def test_the_listening_probe_sees_an_ipv6_listener_and_waits_for_one_that_is_not():
    """iperf3 listens on :: by default, so in /proc/net/tcp6 only; a socket
    connected to the port (its remote side) is no listener."""
    with socket.socket(socket.AF_INET6) as listener:
        listener.bind(("::1", 0))
        port = listener.getsockname()[1]
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(["sh", "-c", listening_probe(port)], timeout=0.5)
        listener.listen()
        with socket.create_connection(("::1", port)):
            assert subprocess.run(["sh", "-c", listening_probe(port)], timeout=5).returncode == 0
    with socket.socket(socket.AF_INET6) as other, socket.socket(socket.AF_INET6) as peer:
        other.bind(("::1", 0))
        other.listen()
        peer.connect(other.getsockname()[:2])       # its remote port is other's
        with pytest.raises(subprocess.TimeoutExpired):
            subprocess.run(["sh", "-c", listening_probe(peer.getsockname()[1])], timeout=0.5)


def test_crash_is_reported_lost(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path)
    with exp:
        doomed = exp.start("h2", "sleep 60")
        exp.cmd("h1", "seq 1 20000")
        exp.crash("h2")
        assert exp.wait(doomed).state == "lost"
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [c["state"] for c in meta["commands"]] == ["exited", "lost"]
    assert (tmp_path / "out/nodes/h1/1.stdout").read_text().split() == \
        [str(i) for i in range(1, 20001)]


def test_a_restarted_node_is_a_new_domain_at_the_current_tdf_with_its_links_as_they_are(
        fake_xen, tmp_path):
    """exp.node("h2").restart(): the old domain destroyed, a new one created
    at the TDF the run has now (8, not the topology's 4), its vif shaped with
    the delay set during the run (20 ms x 8) and its link still down, the
    vif tap restarted on the new vifs; the old guest's command ends lost,
    the new agent runs commands; the state file and the bundle follow."""
    exp = make(fake_xen, tmp_path)
    with exp:
        old = exp.domids["h2"]
        doomed = exp.start("h2", "sleep 60")
        exp.set_tdf(8)
        exp.link("h1", "h2").set(delay="20ms")
        exp.link("h1", "h2").down()
        h2_vif = fake_xen.domains["selena-pair-h2"].vifs[0]
        before = len(fake_xen.calls)
        new = exp.node("h2").restart()
        after = calls(fake_xen)[before:]
        assert new != old and exp.domids["h2"] == new
        dom = fake_xen.domains["selena-pair-h2"]
        assert (dom.domid, dom.tdf, dom.paused, dom.vifs[0]) == (new, "8", False, h2_vif)
        # Its clock started at h1's (a new domain's reads real time, ahead
        # of h1's by the real time the run gained), before it ran.
        h1 = fake_xen.domains["selena-pair-h1"]
        now = time.monotonic_ns()
        assert abs(virtual_ns(dom, now) - virtual_ns(h1, now)) < 1000
        assert after.index(f"selena-tdf align {new} {h1.domid}") < after.index(
            f"selena-tdf unpause {new}")
        assert f"xl destroy {old}" in after
        assert after.index(f"xl destroy {old}") < next(
            i for i, c in enumerate(after) if c.startswith("xl create"))
        assert f"tc qdisc replace dev {h2_vif} parent 1:1 handle 10: netem delay 160000us" \
            in after
        assert any(c.startswith("ovs-ofctl mod-port") and c.endswith(f"{h2_vif} no-forward")
                   for c in after)
        assert any("selena.backends.vif_tap" in c and h2_vif in c for c in after)
        result = exp.wait(doomed)
        assert (result.state, result.detail) == ("lost", "node h2 restarted")
        assert exp.cmd("h2", "echo back").stdout == b"back\n"
        state = json.loads((tmp_path / "state/pair.json").read_text())
        assert state["domains"]["selena-pair-h2"] == new
        exp.link("h1", "h2").up()
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [(e["target"], e["change"], e["tdf"]) for e in meta["events"]] == [
        ("link h1 h2", "delay=20ms", 8.0), ("link h1 h2", "down", 8.0),
        ("node h2", "restart", 8.0), ("link h1 h2", "up", 8.0)]
    assert [c["state"] for c in meta["commands"]] == ["lost", "exited"]
    assert fake_xen.domains == {} and not (tmp_path / "state/pair.json").exists()


def test_a_crashed_node_can_be_restarted_and_a_restart_that_cannot_be_is_one_line(
        fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path)
    with exp:
        exp.crash("h2")
        new = exp.node("h2").restart()      # what the crash left: nothing to destroy
        assert fake_xen.domains["selena-pair-h2"].domid == new
        assert exp.cmd("h2", "true").ok
        with pytest.raises(ScenarioError, match=r"^no node named 'h9'"):
            exp.node("h9")
        exp.pause()
        with pytest.raises(ExperimentError, match=r"^node h2 restart: the experiment is "
                                                  r"paused: resume it first$"):
            exp.restart("h2")
        exp.resume()
        assert exp.domids["h2"] == new
    assert fake_xen.domains == {}


def test_a_restarted_clock_takes_the_first_guest_left_and_an_old_tool_is_named(
        fake_xen, tmp_path):
    topo = Topology("trio", tdf=4)
    hosts = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in (1, 2, 3)]
    topo.add_hub("lan", *hosts)
    exp = make(fake_xen, tmp_path, topo)
    with exp:
        h1, h2 = exp.domids["h1"], exp.domids["h2"]
        exp.crash("h1")                     # gone: h2 gives the time
        new = exp.node("h3").restart()
        assert f"selena-tdf align {new} {h1}" in calls(fake_xen)
        assert any(m.startswith("selena-trio-h3's clock started at selena-trio-h2's: "
                                f"domain {new} started at domain {h2}'s") for m in exp.said)
        fake_xen.fail[("selena-tdf", "align")] = (2, "usage: selena-tdf get DOMID")
        with pytest.raises(BackendError, match=r"^selena-tdf cannot align a restarted "
                                               r"guest's clock: it is older than this selena"):
            exp.node("h3").restart()
        assert "selena-trio-h3" not in fake_xen.domains          # left down, as any failure
        fake_xen.fail.clear()
    assert fake_xen.domains == {}


def test_a_restart_that_fails_half_way_leaves_the_node_down_and_nothing_untracked(
        fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path)
    with exp:
        new = fake_xen.next_domid
        fake_xen.fail[("selena-tdf", "set", str(new))] = (1, "selena-tdf: refused")
        with pytest.raises(CommandError, match="selena-tdf: refused"):
            exp.node("h2").restart()
        assert set(fake_xen.domains) == {"selena-pair-h1"}      # the new one destroyed
        state = json.loads((tmp_path / "state/pair.json").read_text())
        assert set(state["domains"]) == {"selena-pair-h1"}
        with pytest.raises(GuestLost, match="node h2 restarted"):
            exp.cmd("h2", "true")
        assert exp.cmd("h1", "true").ok
        del fake_xen.fail[("selena-tdf", "set", str(new))]
        exp.node("h2").restart()                # and it can be tried again
        assert exp.cmd("h2", "true").ok
        # A new domain that cannot be destroyed either stays on record.
        stuck = fake_xen.next_domid
        fake_xen.fail[("selena-tdf", "set", str(stuck))] = (1, "selena-tdf: refused")
        fake_xen.fail[("xl", "destroy", str(stuck))] = (1, "libxl: error: busy")
        with pytest.raises(CommandError, match="selena-tdf: refused"):
            exp.node("h2").restart()
        state = json.loads((tmp_path / "state/pair.json").read_text())
        assert state["domains"]["selena-pair-h2"] == stuck
        fake_xen.fail.clear()
    # ... where the teardown finds it.
    assert fake_xen.domains == {} and not (tmp_path / "state/pair.json").exists()


def test_a_restart_whose_capture_it_would_break_is_refused_before_anything(
        fake_xen, tmp_path, monkeypatch):
    from fake_vif import FakeSocket, fake_receive

    from selena.backends import vif_capture

    # The capture's packet socket on h2's vif, faked.
    monkeypatch.setattr(vif_capture, "open_socket", lambda iface: FakeSocket())
    monkeypatch.setattr(vif_capture, "receive", fake_receive)
    monkeypatch.setattr(vif_capture, "dropped", lambda s: 0)
    exp = make(fake_xen, tmp_path, capture=["h2,h1"])
    with exp:
        domid = exp.domids["h2"]
        with pytest.raises(ExperimentError, match=r"^node h2 restart: the capture of link "
                                                  r"h2,h1 is taken on h2's vif, which a "
                                                  r"restart replaces; capture it as h1,h2"):
            exp.node("h2").restart()
        assert exp.domids["h2"] == domid and exp.cmd("h2", "true").ok


def _line_of(marker: str) -> int:
    from pathlib import Path

    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1)
                if marker in line and "_line_of" not in line)


def test_virtual_clock_is_continuous_across_tdf_changes():
    from selena.engine import VirtualClock

    now = [100.0]
    clock = VirtualClock(2.0, clock=lambda: now[0])
    now[0] += 10                        # 5 virtual s at TDF 2
    assert clock.now() == 5.0
    assert clock.set_tdf(20.0) == (10.0, 5.0)
    assert clock.now() == 5.0           # no jump at the change
    now[0] += 40                        # 2 virtual s at TDF 20
    assert clock.now() == 7.0
    clock.set_tdf(5.0, at=now[0] - 20)  # the change happened 20 real s ago
    assert clock.now() == pytest.approx(6.0 + 4.0)
    assert [seg["tdf"] for seg in clock.timeline()] == [2.0, 20.0, 5.0]


def test_set_tdf_mid_run_keeps_time_commands_and_heartbeat_limits(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path, pair(tdf=2))
    with exp:
        before = exp.now()
        handle = exp.start("h1", "sleep 0.2; echo done", timeout=30)
        exp.set_tdf(10)
        assert exp.now() >= before and exp.now() - before < 1.0
        assert exp.wait(handle).stdout == b"done\n"
        assert exp.controller.lost_after == 50.0            # 5 x TDF
        assert {d.tdf for d in fake_xen.domains.values()} == {"10"}
        with pytest.raises(ScenarioError, match="set_tdf: TDF 0.5 is out of range"):
            exp.set_tdf(0.5)
        exp.set_tdf("2.5")
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [seg["tdf"] for seg in meta["tdf_timeline"]] == [2.0, 10.0, 2.5]
    virtual = [seg["virtual_s"] for seg in meta["tdf_timeline"]]
    assert virtual == sorted(virtual)


def test_real_cpu_time_is_capped_in_the_run_and_recorded_in_meta(fake_xen, tmp_path):
    topo = pair()
    topo.nodes["h2"].cpu_time = "real"
    with make(fake_xen, tmp_path, topo) as exp:
        assert fake_xen.domains["selena-pair-h2"].cap == 25         # 100 / TDF 4
        exp.set_tdf(2)
        assert fake_xen.domains["selena-pair-h2"].cap == 50
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["cpu_time"] == {
        "h1": {"mode": "dilated", "vcpus": 1, "cap_percent_at_start": 0},
        "h2": {"mode": "real", "vcpus": 1, "cap_percent_at_start": 25}}


def test_a_cpu_share_is_capped_in_the_run_and_recorded_in_meta(fake_xen, tmp_path):
    """cpu_share=0.25 of the fake Dom0's 2 CPUs: half a CPU per virtual
    second, 50/TDF percent."""
    topo = pair()
    topo.nodes["h2"].cpu_share = 0.25
    with make(fake_xen, tmp_path, topo) as exp:
        assert fake_xen.domains["selena-pair-h2"].cap == 12         # 12.5: whole percent
        exp.set_tdf(2)
        assert fake_xen.domains["selena-pair-h2"].cap == 25
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["cpu_time"]["h2"] == {"mode": "dilated", "vcpus": 1, "cpu_share": 0.25,
                                      "cap_percent_at_start": 12}


def test_output_past_the_cap_is_kept_short_and_the_bundle_says_so(fake_xen, tmp_path):
    with make(fake_xen, tmp_path, output_cap=4096) as exp:
        result = exp["h1"].cmd("head -c 50000 /dev/zero")
        assert result.ok and len(result.stdout) == 4096 and result.stdout_dropped == 45904
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    entry = meta["commands"][-1]
    assert entry["dropped_bytes"] == {"stdout": 45904, "stderr": 0}
    assert (tmp_path / "out/nodes/h1/1.stdout").stat().st_size == 4096
    info = json.loads((tmp_path / "out/nodes/h1/1.json").read_text())
    assert info["stdout_dropped"] == 45904 and info["stdout_bytes"] == 4096


def test_cmd_hands_on_its_output_as_it_comes_and_the_result_still_holds_it(fake_xen,
                                                                           tmp_path):
    """exp.cmd(..., on_output=): a line reaches the caller while the command
    runs (a long iperf's intervals, say), within the output cap; the result
    and the bundle keep all of it; a started command's handle.follow() alike."""
    import time

    heard: list[tuple[float, int, bytes]] = []
    with make(fake_xen, tmp_path, output_cap=4096) as exp:
        result = exp["h1"].cmd("echo first; sleep 1.5; echo second; head -c 5000 /dev/zero",
                               on_output=lambda stream, data: heard.append(
                                   (time.monotonic(), stream, data)))
        ended = time.monotonic()
        assert ended - heard[0][0] >= 1.2 and heard[0][1:] == (0, b"first\n"), heard
        assert b"".join(data for _, _, data in heard) == result.stdout
        assert len(result.stdout) == 4096 and result.stdout_dropped > 0
        started = exp.start("h2", "echo bg; echo err >&2")
        pieces: list[tuple[int, bytes]] = []
        started.follow(lambda stream, data: pieces.append((stream, data)))
        exp.wait(started)
        assert sorted(pieces) == [(0, b""), (0, b"bg\n"), (1, b""), (1, b"err\n")]
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["commands"][0]["command"].startswith("echo first")

def test_a_failing_output_callback_is_the_callers_error_or_said_once_for_a_run(
        fake_xen, tmp_path, caplog):
    """on_output raising: exp.cmd raises it once the command has ended (the
    command is recorded); a run's show_output raising: said once in the log,
    the run goes on and its bundle keeps every output."""
    calls = []

    def broken(*args):
        calls.append(args)
        raise OSError("the terminal went away")
    with make(fake_xen, tmp_path, show_output=broken) as exp:
        with pytest.raises(OSError, match="the terminal went away"):
            exp.cmd("h1", "echo one; echo two", on_output=broken)
        assert exp.cmd("h2", "echo still runs").stdout == b"still runs\n"
    shown = [c for c in calls if len(c) == 4]
    assert len(shown) == 1 and len(calls) == 2          # each callback once, then no more
    assert caplog.text.count("showing the commands' output failed (OSError: the terminal "
                             "went away)") == 1
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [c["command"] for c in meta["commands"]] == ["echo one; echo two",
                                                         "echo still runs"]
    with pytest.raises(ValidationError, match=r"show_output=5: want a function of \(node, "
                                              r"command id, stream, bytes\), or None"):
        make(fake_xen, tmp_path, show_output=5)

def test_a_negative_output_cap_is_refused(fake_xen, tmp_path):
    with pytest.raises(ValidationError, match="output_cap=-1: want a whole number of bytes"):
        make(fake_xen, tmp_path, output_cap=-1)
    assert fake_xen.domains == {}


# -- issue 28: ownership, a truthful teardown, signals, atomic bundles ----------------

def gone(fake_xen, tmp_path) -> bool:
    """Nothing of the run is left: guests, bridges, state files."""
    return (fake_xen.domains == {} and fake_xen.bridges == {}
            and not list((tmp_path / "state").glob("*.json")))


def staging_dirs(parent) -> list:
    return sorted(p.name for p in parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def test_replace_is_passed_to_the_backend(fake_xen, tmp_path, monkeypatch):
    seen = []
    real = XlBackend.deploy

    def spy(self, plan, progress=None, warm=False, replace=False):
        seen.append(replace)
        return real(self, plan, progress=progress, warm=warm, replace=replace)

    monkeypatch.setattr(XlBackend, "deploy", spy)
    with make(fake_xen, tmp_path, out=None):
        pass
    with make(fake_xen, tmp_path, out=None, replace=True):
        pass
    assert seen == [False, True]


def test_an_out_under_a_regular_file_is_refused_before_anything_exists(fake_xen, tmp_path):
    (tmp_path / "file").write_text("not a directory")
    exp = make(fake_xen, tmp_path, out=tmp_path / "file" / "run1")
    with pytest.raises(ResultsError, match=r"file/run1 is under .*file, a regular file; "
                                           "choose another --out"), exp:
        pass
    assert not any(c.startswith(("xl create", "ovs-vsctl add-br")) for c in calls(fake_xen))
    # a directory holding something else is never replaced by a bundle
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work")
    with pytest.raises(ResultsError, match="holds no results bundle"), \
            make(fake_xen, tmp_path, out=tmp_path / "mine"):
        pass
    assert (tmp_path / "mine" / "thesis.tex").exists()
    assert not any(c.startswith(("xl create", "ovs-vsctl add-br")) for c in calls(fake_xen))


def _enospc(self):
    raise OSError(errno.ENOSPC, "No space left on device", str(self.target))


def test_a_bundle_that_cannot_be_written_still_tears_down_then_raises(fake_xen, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(BundleWriter, "_move_into_place", _enospc)
    exp = make(fake_xen, tmp_path)
    with pytest.raises(ResultsError, match="No space left on device"), exp:
        exp.cmd("h1", "echo hello")
    assert gone(fake_xen, tmp_path)
    assert exp.bundle is None and not (tmp_path / "out").exists()
    assert staging_dirs(tmp_path) == []                  # no half bundle anywhere
    # the body's own error goes on; the bundle failure is reported beside it
    exp = make(fake_xen, tmp_path)
    with pytest.raises(ZeroDivisionError), exp:
        1 / 0  # noqa: B018
    assert gone(fake_xen, tmp_path)
    assert any("results bundle was not written" in line for line in exp.said)


def test_a_failed_rerun_leaves_the_previous_bundle_whole(fake_xen, tmp_path, monkeypatch):
    with make(fake_xen, tmp_path) as exp:
        exp.cmd("h2", "echo first")
        exp.record("answer", 1)
    before = {p.relative_to(tmp_path): p.read_bytes()
              for p in (tmp_path / "out").rglob("*") if p.is_file()}
    monkeypatch.setattr(BundleWriter, "_move_into_place", _enospc)
    with pytest.raises(ResultsError), make(fake_xen, tmp_path) as exp:
        exp.cmd("h1", "echo second")
        exp.record("answer", 2)
    after = {p.relative_to(tmp_path): p.read_bytes()
             for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert after == before and staging_dirs(tmp_path) == []


def test_outputs_stream_to_a_staging_bundle_that_replaces_the_old_one_at_the_end(
        fake_xen, tmp_path):
    with make(fake_xen, tmp_path) as exp:
        exp.cmd("h2", "echo first")
    assert (tmp_path / "out/nodes/h2/1.stdout").read_bytes() == b"first\n"
    exp = make(fake_xen, tmp_path)
    with exp:
        result = exp.cmd("h1", "head -c 300000 /dev/zero")
        assert len(result.stdout) == 300000                  # the caller still gets it
        staging = exp.out_dir
        assert staging.parent == tmp_path and staging.name.startswith(".out.tmp-")
        # written as it completed; the engine keeps only the metadata
        assert (staging / "nodes/h1/1.stdout").stat().st_size == 300000
        rec = exp.engine.records[-1]
        assert rec.result.stdout == b"" and rec.stdout_bytes == 300000 and rec.n == 1
        handle = exp.start("h2", "echo second")
        exp.wait(handle)
        assert exp.engine._started == {}
        ref = weakref.ref(handle)
        del handle, result
        for _ in range(100):        # the control channel's thread lets go a moment later
            gc.collect()
            if ref() is None:
                break
            time.sleep(0.05)
        assert ref() is None                    # no handle (with its output) retained
        # the old bundle is untouched until the new one is complete
        assert json.loads((tmp_path / "out/meta.json").read_text())["commands"][0][
            "command"] == "echo first"
        (staging / "derived.csv").write_text("x\n")      # a scenario's own file
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [c["command"] for c in meta["commands"]] == ["head -c 300000 /dev/zero",
                                                        "echo second"]
    assert (tmp_path / "out/nodes/h2/1.stdout").read_bytes() == b"second\n"
    assert (tmp_path / "out/derived.csv").read_text() == "x\n"
    assert not (tmp_path / "out/nodes/h1/2.stdout").exists()
    assert staging_dirs(tmp_path) == [] and exp.out_dir == tmp_path / "out"


def test_without_out_nothing_is_written_nor_kept(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path, out=None)
    with exp:
        assert exp.out_dir is None
        assert len(exp.cmd("h1", "head -c 100000 /dev/zero").stdout) == 100000
        assert exp.engine.records[0].result.stdout == b""
        assert exp.engine.records[0].stdout_bytes == 100000
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("xs-")) == [
        "state"]


@pytest.fixture
def sentinel_handlers():
    """Python handlers for SIGTERM and SIGHUP while a test runs (so that
    code which does not handle them fails the test instead of killing it)."""
    class Sentinel(Exception):
        pass

    def raise_sentinel(signum, frame):
        raise Sentinel(signal.Signals(signum).name)

    previous = {s: signal.signal(s, raise_sentinel) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield raise_sentinel
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_are_handled_like_ctrl_c(fake_xen, tmp_path, sentinel_handlers,
                                                    sig):
    exp = make(fake_xen, tmp_path)
    with pytest.raises(KeyboardInterrupt) as caught, exp:
        assert signal.getsignal(sig) is not sentinel_handlers      # ours while deployed
        exp.cmd("h1", "echo before")
        exp.start("h2", "sleep 600")
        os.kill(os.getpid(), sig)
        time.sleep(5)                                              # never reached
    assert isinstance(caught.value, SignalInterrupt) and caught.value.name == sig.name
    assert gone(fake_xen, tmp_path)
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["error"]["signal"] == sig.name
    assert {c["command"]: c["state"] for c in meta["commands"]} == {
        "echo before": "exited", "sleep 600": "killed"}
    assert signal.getsignal(sig) is sentinel_handlers              # restored at close


def _interrupt_after(*delays: float) -> list[threading.Timer]:
    timers = [threading.Timer(d, os.kill, (os.getpid(), signal.SIGINT)) for d in delays]
    for t in timers:
        t.start()
    return timers


def test_ctrl_c_at_the_end_skips_the_waits_but_never_the_teardown(fake_xen, tmp_path,
                                                                  monkeypatch):
    exp = make(fake_xen, tmp_path, finish_limit=120)
    exp.deploy()
    called = []
    exp.at(3600, called.append, "late")                # an hour of virtual time away
    exp.start("h2", "sleep 600")
    # the kill is lost, so the end of the run would wait for the command too
    monkeypatch.setattr(exp.controller, "kill", lambda handle, signal=15: None)
    began = time.monotonic()
    timers = _interrupt_after(0.5, 2.5)     # first: skip `at`; second: skip the command
    with pytest.raises(KeyboardInterrupt):
        exp.close()
    for t in timers:
        t.join()
    assert time.monotonic() - began < 30 and called == []
    assert gone(fake_xen, tmp_path)
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["error"]["signal"] == "SIGINT"
    [command] = meta["commands"]
    assert command["state"] == "lost"
    detail = json.loads((tmp_path / "out/nodes/h2/1.json").read_text())["detail"]
    assert "interrupted" in detail
    assert any("interrupted again" in line for line in exp.said)


def test_the_end_of_a_run_waits_at_most_finish_limit(fake_xen, tmp_path):
    exp = make(fake_xen, tmp_path, finish_limit=1)
    called = []
    began = time.monotonic()
    with pytest.raises(ScenarioError, match=r"1 `at` callback\(s\) not done .* 1 real s"), exp:
        exp.at(3600, called.append, "late")
        began = time.monotonic()
    assert time.monotonic() - began < 15 and called == []
    assert gone(fake_xen, tmp_path)
    assert json.loads((tmp_path / "out/meta.json").read_text())["status"] == "failed"
    with pytest.raises(ValidationError, match="finish_limit"):
        make(fake_xen, tmp_path, finish_limit=-1)


def test_pause_and_resume_keep_guests_alive_and_virtual_time_still(fake_xen, tmp_path):
    """Frozen guests (the fake stops their agents) send no heartbeat: not a
    lost guest; the virtual clock stands still while paused, and the
    fidelity verdict judges no interval of the pause."""
    exp = make(fake_xen, tmp_path, pair(tdf=2))
    with exp:
        began = time.monotonic()
        exp.controller.lost_after = 3.0     # the agents beat every second
        handle = exp.start("h1", "sleep 0.5; echo done", timeout=30)
        at = exp.pause()
        assert exp.paused and {d.frozen for d in fake_xen.domains.values()} == {True}
        time.sleep(4.5)                     # > lost_after without a heartbeat
        assert not handle.done, handle.result   # a loss would have ended it
        assert exp.now() == at
        # What follows is not about the pause: a loaded machine (make test
        # builds the lab beside this tier) may starve the resumed agent for
        # seconds, so the limit is back to a generous one.
        exp.controller.lost_after = 30.0
        assert exp.resume() == at
        result = exp.wait(handle)
        assert (result.state, result.stdout) == ("exited", b"done\n"), result.summary()
        assert not exp.paused and {d.frozen for d in fake_xen.domains.values()} == {False}
    assert exp.fidelity is not None
    assert exp.fidelity.sampled_s < time.monotonic() - began - 3.5, exp.fidelity  # 4.5 paused
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [seg["tdf"] for seg in meta["tdf_timeline"]] == [2.0, 2.0]
    assert meta["commands"][0]["state"] == "exited"


@pytest.mark.parametrize("raised", [None, RuntimeError("the script failed")])
def test_a_run_that_ends_paused_tears_down_without_waiting(fake_xen, tmp_path, raised):
    """Virtual time stands still: no `at` callback comes due, no frozen
    command ends, the latency probe in flight answers nothing. The end of
    the run says so and tears down at once, not after the finish limit
    (60 s here), the commands' straggler waits (36 s) and the probe's 10."""
    exp = make(fake_xen, tmp_path, pair(tdf=2), finish_limit=60)
    called: list[str] = []
    began = 0.0
    with contextlib.suppress(RuntimeError), exp:
        exp.at(3600, called.append, "late")
        exp.start("h1", "sleep 600", timeout=900)
        time.sleep(0.5)     # the latency probe's pings (none here) go every 2 s
        exp.pause()
        began = time.monotonic()
        if raised is not None:
            raise raised
    assert time.monotonic() - began < 20 and called == []
    assert gone(fake_xen, tmp_path)
    assert any(line.startswith("the run ended paused") and "1 `at` callback(s) not run" in line
               for line in exp.said), exp.said
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["status"] == ("failed" if raised else "ok")
    [command] = meta["commands"]
    assert command["state"] == "lost"
    detail = json.loads((tmp_path / "out/nodes/h1/1.json").read_text())["detail"]
    assert "the run ended paused" in detail


def test_the_latency_probe_waits_out_a_pause(fake_xen, tmp_path, monkeypatch):
    """A probe in flight when the run is paused is not killed for the time
    the pause took (its guest's time stood still), and none starts while
    paused: a frozen guest would answer it only after the resume. The fake
    guests' ping (on PATH; the fake freezes agents, not their commands)
    answers 6 s after it starts; the probe may take 4 s, and the run is
    paused for 5 once the ping has started."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    started = tmp_path / "ping-started"
    ping = bin_dir / "ping"
    ping.write_text(f"#!/bin/sh\ntouch {started}\nsleep 6\nfor i in 1 2 3 4 5; do\n"
                    "  echo \"64 bytes from 10.0.0.2: icmp_seq=$i ttl=64 time=10.$i ms\"\n"
                    "done\n")
    ping.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(selena.experiment, "ECHO_GRACE_S", 4.0 - ECHO_TIMEOUT_S)
    submitted: list[float] = []
    submit = Controller.submit

    def spy(self, guest, spec):
        if spec.argv[:1] == ("ping",):
            submitted.append(time.monotonic())
        return submit(self, guest, spec)

    monkeypatch.setattr(Controller, "submit", spy)
    exp = make(fake_xen, tmp_path, pair(tdf=1))
    with exp:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(submitted) == 1 and started.exists()
        exp.pause()
        paused = time.monotonic()
        time.sleep(5.0)
        resumed = time.monotonic()
        exp.resume()
        assert exp.monitor is not None
        while not exp.monitor.echoes and time.monotonic() < deadline:
            time.sleep(0.05)
        [probe] = exp.monitor.echoes
        assert (probe.rtts_ms, probe.error) == ((10.1, 10.2, 10.3, 10.4, 10.5), ""), probe
    assert not [t for t in submitted if paused <= t <= resumed], (paused, resumed, submitted)


@pytest.mark.parametrize("option,value,message", [
    ("monitor_interval", -1, "monitor_interval -1: want a finite number of seconds above 0"),
    ("monitor_interval", float("nan"),
     "monitor_interval nan: want a finite number of seconds above 0"),
    ("ready_timeout", "10", "ready_timeout '10': want a finite number of seconds 0 or more"),
    ("ready_timeout", float("inf"), "ready_timeout inf: want a finite number of seconds 0 or "
                                    "more"),
    ("command_timeout", 0, "command_timeout 0: want a finite number of seconds above 0 "
                           "(None: no limit)"),
    ("params", 5, "params 5: want a dict of NAME: VALUE, as build() takes them"),
])
def test_a_bad_numeric_option_of_the_api_is_one_line_before_anything(
        fake_xen, tmp_path, option, value, message):
    """A NaN or negative monitor interval spun the monitor's thread (its
    wait returned at once); each is refused by name, nothing created."""
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with pytest.raises(ValidationError) as caught:
        Experiment(pair(), backend=backend, templates=None, **{option: value})
    assert str(caught.value) == message
    assert fake_xen.calls == [] and not (tmp_path / "state").exists()
