"""The Mininet baseline: the translation of a topology (pure, no Mininet
needed), the namespace command channel (with a stand-in for mnexec), and the
lifecycle driving a real-time backend."""

import json
import os
import time

import pytest

from selena.backends.base import Deployment
from selena.backends.mininet import MininetBackend, NamespaceChannel
from selena.baseline import translate
from selena.control.channel import DEFAULT_OUTPUT_CAP
from selena.control.protocol import CommandSpec
from selena.errors import BackendError
from selena.experiment import Experiment
from selena.model import Topology
from selena.plan import make_plan

# Stands in for `mnexec -a PID`: drops the pid, runs the command here.
NO_NAMESPACE = ("sh", "-c", 'shift; exec "$@"', "mnexec")


def star():
    topo = Topology("star", tdf=10)
    s1 = topo.add_switch("s1")
    h1 = topo.add_host("h1", ip="10.0.0.1/24", ip6="fd00::1/64", gateway="10.0.0.254")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, s1, rate="10Mbit", delay="5ms", loss="1%", queue=50)
    topo.add_link(h2, s1, delay="1ms", jitter="100us")
    topo.add_static_arp(h1, 0, "10.0.0.2", topo.mac_of(h2, h2.interface(0)))
    return topo


def test_links_switches_and_addresses_translate_one_to_one():
    topo = star()
    net = translate(topo, make_plan(topo))
    assert net.hosts == ["h1", "h2"] and net.switches == [("s1", False)]
    first, second = net.links
    assert (first.node1, first.intf1, first.node2, first.intf2) == ("h1", "eth0", "s1", "s1-eth1")
    assert second.intf2 == "s1-eth2"
    # Switch ports get MACs of their own (Mininet's veth pair wants both or none).
    assert (first.mac2, second.mac2) == ("02:4d:4e:00:01:01", "02:4d:4e:00:01:02")
    # one-way delay on each end's egress, as selena; loss in percent
    assert first.tc == {"bw": 10.0, "delay": "5000us", "loss": 1.0, "max_queue_size": 50}
    assert second.tc == {"delay": "1000us", "jitter": "100us"}
    assert first.mac1 == make_plan(topo).guest("h1").vifs[0].mac
    h1 = net.setup["h1"]
    assert "ip addr add 10.0.0.1/24 dev eth0 && ip link set eth0 up" in h1
    assert "sysctl -qw net.ipv6.conf.eth0.accept_dad=0" in h1
    assert "ip route replace default via 10.0.0.254" in h1
    mac2 = topo.mac_of(topo.nodes["h2"], topo.nodes["h2"].interface(0))
    assert f"ip neigh replace 10.0.0.2 lladdr {mac2} dev eth0 nud permanent" in h1


def test_what_mininet_cannot_do_is_refused_naming_each_node():
    topo = star()
    c0 = topo.add_controller("c0", ip="10.0.1.1/24")
    topo.nodes["h2"].cpus = "1"
    topo.add_switch("ofs", controller=c0)
    with pytest.raises(BackendError) as err:
        translate(topo, make_plan(topo))
    text = str(err.value)
    assert "node c0: a controller node has no Mininet baseline" in text
    assert "node ofs: an OpenFlow switch with a controller" in text
    assert "node h2: vcpus/cpus pinning" in text


def test_the_rendered_baseline_shows_every_mininet_call():
    topo = star()
    text = MininetBackend().render(make_plan(topo))
    assert "net.addSwitch('s1', cls=OVSBridge, stp=False)" in text
    assert ("net.addLink('h1', 's1', cls=TCLink, intfName1='eth0', intfName2='s1-eth1', "
            "bw=10.0, delay='5000us', loss=1.0, max_queue_size=50)") in text


def test_static_flows_are_renumbered_to_mininets_ports_on_a_secure_switch():
    topo = Topology("flows", tdf=1)
    s1 = topo.add_switch("s1")
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, s1)                    # s1 eth0: selena port 1
    s1.add_interface(5)                      # selena port 6, wired second
    topo.add_link(h2, (s1, 5))
    s1.flows = ["in_port=1,ip,nw_dst=10.0.0.2,actions=output:6",
                "priority=10,arp,arp_tpa=10.0.0.1,actions=output:1"]
    net = translate(topo, make_plan(topo))
    # Mininet numbers s1's ports by link order: 1 and 2
    assert net.flows["s1"] == ["in_port=1,ip,nw_dst=10.0.0.2,actions=output:2",
                               "priority=10,arp,arp_tpa=10.0.0.1,actions=output:1"]
    text = MininetBackend().render(make_plan(topo))
    assert "net.addSwitch('s1', cls=OVSSwitch, failMode='secure')" in text
    s1.flows = ["actions=output:9", "actions=enqueue:1:0"]
    with pytest.raises(BackendError) as err:
        translate(topo, make_plan(topo))
    assert "node s1: flow 'actions=output:9' names port 9, which is not wired" in str(err.value)
    assert "'actions=enqueue:1:0' names ports in a way" in str(err.value)


def channel():
    ch = NamespaceChannel(NO_NAMESPACE)
    ch.add_guest("h1", os.getpid())
    return ch


def test_commands_run_with_exit_codes_output_and_timing():
    ch = channel()
    result = ch.run("h1", CommandSpec(shell="echo out; echo err >&2; exit 3"), timeout=30)
    assert (result.state, result.exit_code) == ("exited", 3)
    assert (result.stdout, result.stderr) == (b"out\n", b"err\n")
    assert result.dur_ns > 0 and result.end_ns >= result.start_ns
    with pytest.raises(Exception, match="no host named 'h9'"):
        ch.submit("h9", CommandSpec(argv=("true",)))


def test_output_past_the_cap_is_dropped_and_counted():
    ch = NamespaceChannel(NO_NAMESPACE, output_cap=1000)
    ch.add_guest("h1", os.getpid())
    result = ch.run("h1", CommandSpec(shell="head -c 300000 /dev/zero; echo err >&2"),
                    timeout=30)
    assert result.ok and result.stdout == bytes(1000) and result.stderr == b"err\n"
    assert (result.stdout_dropped, result.stderr_dropped) == (299_000, 0)
    assert "output truncated (299000 stdout and 0 stderr bytes" in result.summary()


def test_timeout_and_kill_end_the_whole_process_group():
    ch = channel()
    began = time.monotonic()
    result = ch.run("h1", CommandSpec(shell="sleep 30 & sleep 30; wait",
                                      timeout_ns=300_000_000), timeout=30)
    assert (result.state, result.reason, result.signal) == ("killed", "timeout", 9)
    assert time.monotonic() - began < 10
    handle = ch.submit("h1", CommandSpec(shell="echo $$ > /dev/null; sleep 30"))
    time.sleep(0.3)
    ch.kill(handle, 15)
    result = ch.wait(handle, 10)
    assert (result.state, result.reason, result.signal) == ("killed", "kill", 15)


class InProcessBackend(MininetBackend):
    """The mininet backend with its hosts stood in by this process."""

    def deploy(self, plan, progress=None, warm=False, replace=False):
        self._translate(plan)
        return Deployment(plan.experiment, 1.0, {n: os.getpid() for n in plan.topology.nodes},
                          self.name)

    def command_channel(self, tdf, output_cap=DEFAULT_OUTPUT_CAP):
        self._channel = NamespaceChannel(NO_NAMESPACE, output_cap=output_cap)
        return self._channel

    def destroy(self, experiment, pool=False, force=False):
        if self._channel is not None:
            self._channel.close()


def test_the_lifecycle_runs_a_scenario_in_real_time_and_writes_the_bundle(tmp_path):
    topo = Topology("pair", tdf=10)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    messages = []
    with Experiment(topo, backend=InProcessBackend(), out=tmp_path / "out", templates=None,
                    progress=messages.append, monitor_interval=0.2) as exp:
        assert exp["h2"].cmd("echo hello").stdout == b"hello\n"
        exp.record("x", [1.0, 2.0], expected=1.5)
        exp.sleep(0.5)
    assert "the mininet backend runs in real time: TDF 1, not 10" in messages
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert meta["tdf"] == 1 and meta["backend"] == "mininet" and meta["status"] == "ok"
    assert meta["commands"][-1]["command"] == "echo hello"
    fidelity = json.loads((tmp_path / "out/fidelity.json").read_text())
    assert fidelity["verdict"] in ("ok", "degraded")           # Dom0's CPUs were sampled


def test_selena_plan_prints_the_mininet_translation(tmp_path, capsys):
    from selena.cli import main

    scenario = tmp_path / "star.py"
    scenario.write_text("from selena.model import Topology\n"
                        "topology = Topology('star', tdf=10)\n"
                        "s1 = topology.add_switch('s1')\n"
                        "h1 = topology.add_host('h1', ip='10.0.0.1/24')\n"
                        "topology.add_link(h1, s1, rate='10Mbit')\n")
    assert main(["plan", str(scenario), "--backend", "mininet"]) == 0
    out = capsys.readouterr().out
    assert "net.addSwitch('s1', cls=OVSBridge, stp=False)" in out
    assert "through its agent" not in out
    assert main(["deploy", str(scenario), "--backend", "mininet"]) != 0
    assert "lives as long as one `selena run`" in capsys.readouterr().err


class _Intf:
    def __init__(self, name, configured):
        self.name, self.configured = name, configured

    def config(self, **params):
        self.configured.append((self.name, params))


class _MnNet:
    """What shape_link uses of a Mininet network: get, linksBetween, TCIntf.config."""

    def __init__(self):
        self.configured = []
        link = type("L", (), {})()
        link.intf1, link.intf2 = _Intf("h1-eth0", self.configured), _Intf("h2-eth0",
                                                                          self.configured)
        self.links = {frozenset({"h1", "h2"}): [link]}

    def get(self, name):
        return name

    def linksBetween(self, a, b):  # noqa: N802 - Mininet's name
        return self.links.get(frozenset({a, b}), [])


def test_a_link_change_is_mininets_tcintf_config_on_both_ends_in_real_time():
    from selena.model import Endpoint, Link

    backend = MininetBackend()
    net = backend._nets["pair"] = _MnNet()
    backend.shape_link("pair", Link(Endpoint("h1", 0), Endpoint("h2", 0), rate_bps=5e6,
                                     delay_s=0.02, loss=0.01))
    params = {"bw": 5.0, "delay": "20000us", "loss": 1.0}
    assert net.configured == [("h1-eth0", params), ("h2-eth0", params)]
    with pytest.raises(BackendError, match=r"Mininet has no link between h1 and h3"):
        backend.shape_link("pair", Link(Endpoint("h1", 0), Endpoint("h3", 0)))
    with pytest.raises(BackendError, match=r"no Mininet network other in this process"):
        backend.shape_link("other", Link(Endpoint("h1", 0), Endpoint("h2", 0)))
