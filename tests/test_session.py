"""selena.session: Mininet's pingall lines and summary, node-name
substitution, iperf and links, on a fake running experiment."""

import json
import math
import subprocess
from collections.abc import Set as AbstractSet

import pytest
from fake_runner import FakeRunner
from fake_session import pingall_answer, running

from selena import session as session_module
from selena.backends.xl import DeployState, XlBackend
from selena.errors import BackendError, ExperimentError, ScenarioError
from selena.model import Endpoint, Link
from selena.session import PingAll, Session, rate_text
from selena.topologies import linear, single


def test_pingall_results_line_is_mininets():
    result = PingAll([("h1", "h2", True), ("h2", "h1", True)])
    assert (result.sent, result.received, result.dropped_percent) == (2, 2, 0.0)
    assert result.results_line() == "*** Results: 0% dropped (2/2 received)"
    assert result.lines() == ["h1 -> h2", "h2 -> h1"]


def test_pingall_truncates_the_percentage_and_marks_misses():
    result = PingAll([("h1", "h2", True), ("h1", "h3", False), ("h2", "h1", True),
                      ("h2", "h3", False), ("h3", "h1", False), ("h3", "h2", True)])
    assert result.results_line() == "*** Results: 50% dropped (3/6 received)"
    assert result.lines() == ["h1 -> h2 X", "h2 -> h1 X", "h3 -> X h2"]
    third = PingAll([("h1", "h2", False), ("h2", "h1", True), ("h1", "h3", True)])
    assert third.results_line() == "*** Results: 33% dropped (2/3 received)"


def test_pingall_without_hosts_warns_as_mininet():
    assert PingAll([]).results_line() == "*** Warning: No packets sent"


def test_rate_text_uses_iperfs_units():
    assert rate_text(9.41e6) == "9.41 Mbits/sec"
    assert rate_text(1.5e9) == "1.50 Gbits/sec"
    assert rate_text(640e3) == "640.00 Kbits/sec"
    assert rate_text(12) == "12 bits/sec"


# -- Session on a running experiment (tests/support/fake_session.py) -----------------



def answering(down: AbstractSet[str] = frozenset()):
    """Pings to addresses in `down` go unanswered; iperf3 answers a report."""
    def answer(node: str, command: str) -> tuple[int, str]:
        looped = pingall_answer(command, down)
        if looped is not None:
            return 0, looped
        if command.startswith("ping"):
            return (1, "") if command.split()[-1] in down else (0, "1 packets received")
        if command.startswith("iperf3 -c"):
            return 0, json.dumps({"end": {"sum_sent": {"bits_per_second": 9.87e6},
                                          "sum_received": {"bits_per_second": 9.41e6}}})
        return 0, f"{node} ran {command}\n"
    return answer


def test_substitute_replaces_node_names_by_their_first_address_only():
    net = Session(running(single(3)))
    assert net.substitute("ping -c 1 h2") == "ping -c 1 10.0.0.2"
    # A switch has no address, a word containing a name is not a name.
    assert net.substitute("echo s1 h2x xh1 h3") == "echo s1 h2x xh1 10.0.0.3"
    assert net.substitute("  h1\th2 ") == "  10.0.0.1\t10.0.0.2 "


def test_cmd_runs_the_substituted_command_in_the_node():
    exp = running(single(2), answering())
    result = Session(exp).cmd("h1", "ping -c 1 h2", timeout=5)
    assert result.ok
    assert exp.engine.commands == [("h1", "start ping -c 1 10.0.0.2", 5)]


def test_unknown_nodes_are_one_line_errors_naming_the_nodes_there_are():
    net = Session(running(single(2)))
    with pytest.raises(ScenarioError, match=r"no node named 'h9' in experiment single "
                                            r"\(have h1, h2, s1\)"):
        net.cmd("h9", "true")
    with pytest.raises(ScenarioError, match="no node named 'x'"):
        net.link("h1", "x", up=False)


def test_pingall_pings_every_ordered_host_pair_once_one_command_per_host_side_by_side():
    exp = running(single(3), answering(down={"10.0.0.3"}))
    result = Session(exp).pingall()
    loop = ("start for ip in {}; do if ping -c 1 -W 1 $ip >/dev/null 2>&1; "
            'then echo "$ip 1"; else echo "$ip 0"; fi; done')
    # All three started before any is waited for; each pings the two others,
    # starting with the host after it; the lines are in Mininet's order.
    assert exp.engine.commands == [
        ("h1", loop.format("10.0.0.2 10.0.0.3"), 60.0),
        ("h2", loop.format("10.0.0.3 10.0.0.1"), 60.0),
        ("h3", loop.format("10.0.0.1 10.0.0.2"), 60.0)]
    assert result.lines() == ["h1 -> h2 X", "h2 -> h1 X", "h3 -> h1 h2"]
    assert result.results_line() == "*** Results: 33% dropped (4/6 received)"
    Session(exp).pingall(timeout=2.5)
    assert "ping -c 1 -W 3 $ip" in exp.engine.commands[-1][1]


def test_pingall_runs_at_most_a_bounded_number_of_hosts_loops_at_once(monkeypatch):
    """Ten hosts, three at a time: the fourth host's loop starts only once
    the first one's has been waited for, and every pair is still reported
    in Mininet's order."""
    monkeypatch.setattr(session_module, "PINGALL_SIDE_BY_SIDE", 3)
    exp = running(single(10), answering())
    events: list[str] = []
    start, wait = exp.engine.start, exp.engine.wait
    monkeypatch.setattr(exp.engine, "start", lambda node, command, **kw:
                        events.append(f"start {node}") or start(node, command, **kw))
    monkeypatch.setattr(exp.engine, "wait", lambda handle, **kw:
                        events.append(f"wait {handle.node}") or wait(handle, **kw))
    result = Session(exp).pingall()
    assert events[:6] == ["start h1", "start h2", "start h3", "wait h1", "start h4", "wait h2"]
    assert events.count("start h10") == 1 and events[-1] == "wait h10"
    running_at_once = max(sum(1 if e.startswith("start") else -1 for e in events[:i + 1])
                          for i in range(len(events)))
    assert running_at_once == 3
    assert result.results_line() == "*** Results: 0% dropped (90/90 received)"
    assert result.lines()[4] == "h5 -> h1 h2 h3 h4 h6 h7 h8 h9 h10"


def test_pingall_among_some_hosts_pings_only_between_them():
    exp = running(single(3), answering())
    result = Session(exp).pingall(hosts={"h1", "h3"})
    assert [(node, command.split(";")[0]) for node, command, _ in exp.engine.commands] == [
        ("h1", "start for ip in 10.0.0.3"), ("h3", "start for ip in 10.0.0.1")]
    assert result.lines() == ["h1 -> h3", "h3 -> h1"]


# A stand-in ping per output format: busybox's (tiny-host) and iputils' (the
# Debian templates); 10.0.0.3 never answers.
BUSYBOX_PING = """#!/bin/sh
for a; do ip=$a; done
[ "$ip" = 10.0.0.3 ] && exit 1
echo "PING $ip ($ip): 56 data bytes"
echo "64 bytes from $ip: seq=0 ttl=64 time=20.512 ms"
echo "1 packets transmitted, 1 packets received, 0% packet loss"
echo "round-trip min/avg/max = 20.512/20.512/20.512 ms"
"""
IPUTILS_PING = """#!/bin/sh
for a; do ip=$a; done
[ "$ip" = 10.0.0.3 ] && exit 1
echo "rtt min/avg/max/mdev = 40.250/40.250/40.250/0.000 ms"
"""


@pytest.mark.parametrize("ping,rtt", [(BUSYBOX_PING, "20.512"), (IPUTILS_PING, "40.250")])
def test_pingall_full_runs_its_loop_in_a_shell_and_reads_each_round_trip(tmp_path, ping, rtt):
    """The loop pingall(full=True) sends, run by sh with a stand-in ping:
    each answer's round trip (the guest's, so virtual ms), Mininet's
    pingAllFull lines, 0.000 for the ping not answered."""
    (tmp_path / "ping").write_text(ping)
    (tmp_path / "ping").chmod(0o755)

    def shell(node, command):
        done = subprocess.run(["sh", "-c", command], capture_output=True, text=True,
                              env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, check=False)
        return done.returncode, done.stdout
    result = Session(running(single(3), shell)).pingall(full=True)
    assert result.lines() == ["h1 -> h2 X", "h2 -> h1 X", "h3 -> h1 h2"]
    assert result.full_lines() == [
        "*** Results: ",
        f" h1->h2: 1/1, rtt min/avg/max/mdev {rtt}/{rtt}/{rtt}/0.000 ms",
        " h1->h3: 1/0, rtt min/avg/max/mdev 0.000/0.000/0.000/0.000 ms",
        f" h2->h1: 1/1, rtt min/avg/max/mdev {rtt}/{rtt}/{rtt}/0.000 ms",
        " h2->h3: 1/0, rtt min/avg/max/mdev 0.000/0.000/0.000/0.000 ms",
        f" h3->h1: 1/1, rtt min/avg/max/mdev {rtt}/{rtt}/{rtt}/0.000 ms",
        f" h3->h2: 1/1, rtt min/avg/max/mdev {rtt}/{rtt}/{rtt}/0.000 ms"]
    assert result.rtt_ms[("h3", "h2")] == float(rtt)


def test_pingall_full_takes_an_answer_without_a_round_trip_as_answered_without_one():
    """A ping that exits 0 and prints no min/avg/max line (another ping's
    output): answered, round trip 0.000, not a crash."""
    exp = running(single(2), lambda node, command: (0, "10.0.0.2 1 \n10.0.0.1 1 nan\n"))
    result = Session(exp).pingall(full=True)
    assert result.received == 2 and result.rtt_ms == {}
    assert result.full_lines()[1] == " h1->h2: 1/1, rtt min/avg/max/mdev 0.000/0.000/0.000/0.000 ms"


def test_pingall_counts_a_host_whose_command_printed_nothing_as_answering_none():
    exp = running(single(2), lambda node, command: (0, "") if node == "h1"
                  else (0, pingall_answer(command) or ""))
    assert Session(exp).pingall().lines() == ["h1 -> X", "h2 -> h1"]


def test_iperf_returns_mininets_server_and_client_rates():
    exp = running(single(2), answering())
    assert Session(exp).iperf("h1", "h2", seconds=3) == ("9.41 Mbits/sec", "9.87 Mbits/sec")
    commands = [c[:2] for c in exp.engine.commands]
    assert commands == [("h1", "command -v iperf3"), ("h2", "command -v iperf3"),
                        ("h2", "start iperf3 -s -1 -J"),
                        ("h1", "iperf3 -c 10.0.0.2 -t 3 -J")]


def test_iperf_udp_sends_at_the_bandwidth_asked_and_returns_it_first_as_mininet():
    exp = running(single(2), answering())
    net = Session(exp)
    assert net.iperf_udp("h1", "h2", "10M", seconds=2) == ("10M", "9.41 Mbits/sec",
                                                           "9.87 Mbits/sec")
    assert net.iperf_udp("h2", "h1", 2.5e6) == ("2500000.0", "9.41 Mbits/sec",
                                                "9.87 Mbits/sec")
    clients = [c[1] for c in exp.engine.commands if c[1].startswith("iperf3 -c")]
    assert clients == ["iperf3 -c 10.0.0.2 -t 2 -J -u -b 10000000",
                       "iperf3 -c 10.0.0.1 -t 5 -J -u -b 2500000"]


@pytest.mark.parametrize("bandwidth", ["0", 0, "-5M", "fast", math.inf, True, None, "1e999M"])
def test_a_udp_bandwidth_that_is_not_a_rate_above_zero_is_one_line_and_runs_nothing(bandwidth):
    """iperf3 reads -b 0 as no limit at all: a flood, not a test."""
    exp = running(single(2), answering())
    with pytest.raises(ScenarioError, match=r"^iperf: UDP bandwidth .*: want a rate above "
                                            r"zero such as 10M \(bit/s\)$"):
        Session(exp).iperf_udp("h1", "h2", bandwidth)
    assert exp.engine.commands == []


def test_iperf_without_iperf3_in_the_guest_says_so_in_one_line():
    def answer(node, command):
        return (127, "") if node == "h2" and command == "command -v iperf3" else (0, "")
    net = Session(running(single(2), answer))
    with pytest.raises(ScenarioError, match=r"^iperf: h2 has no iperf3 \(template tiny-host; "
                                            r"the tools-host template has it\)$"):
        net.iperf("h1", "h2")
    with pytest.raises(ScenarioError, match="two different hosts"):
        net.iperf("h1", "h1")


@pytest.mark.parametrize("call,message", [
    (lambda net: net.pingall(timeout=math.inf), r"^pingall: timeout inf: want a finite number "
                                                r"of seconds, 0 or more$"),
    (lambda net: net.pingall(timeout=math.nan), r"^pingall: timeout nan: "),
    (lambda net: net.pingall(timeout="1"), r"^pingall: timeout '1': "),
    (lambda net: net.iperf("h1", "h2", seconds=math.inf), r"^iperf: inf seconds: want a finite "
                                                          r"number above zero$"),
    (lambda net: net.iperf("h1", "h2", seconds=0), r"^iperf: 0 seconds: "),
])
def test_a_bad_time_is_one_line_and_runs_nothing(call, message):
    """pingall(timeout=inf) was math.ceil's OverflowError; iperf(seconds=inf)
    an iperf3 -t inf."""
    exp = running(single(2), answering())
    with pytest.raises(ScenarioError, match=message):
        call(Session(exp))
    assert exp.engine.commands == []


@pytest.mark.parametrize("udp", [None, 10e6])
def test_iperf_retries_a_refused_connection_that_iperf3_reports_with_exit_status_0(udp):
    """iperf3 3.12 with -J exits 0 on "unable to connect" (checked on this
    machine's iperf3): that report was taken for the result, and the server
    (`-s -1`) was then waited for until its timeout, 630 real s at TDF 10
    (seen in the lab when a UDP client ran before its server listened)."""
    tries = []

    def answer(node, command):
        if command.startswith("iperf3 -c"):
            tries.append(command)
            if len(tries) < 3:
                return 0, json.dumps({"start": {"connected": []}, "end": {},
                                      "error": "unable to connect to server: Connection "
                                               "refused"})
            return 0, json.dumps({"end": {"sum_sent": {"bits_per_second": 9.87e6},
                                          "sum_received": {"bits_per_second": 9.41e6}}})
        return 0, ""
    exp = running(single(2), answer)
    assert Session(exp).iperf_bps("h1", "h2", udp_bps=udp) == (9.41e6, 9.87e6)
    assert len(tries) == 3
    # Another error with exit status 0 is an error, not a result.
    tries.clear()
    exp = running(single(2), lambda node, command: (0, json.dumps(
        {"end": {}, "error": "the server is busy running a test"}))
        if command.startswith("iperf3 -c") else (0, ""))
    with pytest.raises(ScenarioError, match="iperf: h1 -> 10.0.0.2 failed: the server is busy"):
        Session(exp).iperf_bps("h1", "h2", udp_bps=udp)
    assert exp.engine.killed == ["iperf3 -s -1 -J"]


def test_iperf_retries_while_the_server_is_not_listening_then_kills_it_on_failure():
    tries = []

    def answer(node, command):
        if command.startswith("iperf3 -c"):
            tries.append(command)
            if len(tries) < 3:
                return 1, json.dumps({"error": "unable to connect to server: Connection "
                                               "refused"})
            return 1, json.dumps({"error": "the server has terminated"})
        return 0, ""
    exp = running(single(2), answer)
    with pytest.raises(ScenarioError, match="iperf: h1 -> 10.0.0.2 failed: the server has "
                                            "terminated"):
        Session(exp).iperf("h1", "h2")
    assert len(tries) == 3
    assert exp.engine.killed == ["iperf3 -s -1 -J"]


def test_static_arp_sets_every_hosts_entries_with_ip_or_busyboxs_arp():
    exp = running(single(3), answering())
    assert Session(exp).static_arp() == 6
    entry = ("{{ ip neigh replace {ip} lladdr {mac} dev eth0 nud permanent 2>/dev/null || "
             "arp -s {ip} {mac}; }}")
    commands = {node: command for node, command, _ in exp.engine.commands}
    assert commands["h1"] == "start set -e; " + "; ".join(
        entry.format(ip=f"10.0.0.{n}", mac=exp.topology.mac_of(
            exp.topology.nodes[f"h{n}"], exp.topology.nodes[f"h{n}"].interface(0)))
        for n in (2, 3))
    assert sorted(commands) == ["h1", "h2", "h3"]
    failing = running(single(2), lambda node, command: (1, "") if node == "h2" else (0, ""))
    with pytest.raises(ScenarioError, match=r"^staticArp: could not set the ARP entries of "
                                            r"h2 \(exited 1\)$"):
        Session(failing).static_arp()


def test_link_down_and_up_go_to_the_backend_for_every_link_between_the_pair():
    exp = running(linear(2))
    net = Session(exp)
    net.link("s1", "h1", up=False)
    net.link("h1", "s1", up=True)
    assert exp.backend.asked == [("set_link", "linear", "link h1:eth0--s1:eth0", False),
                                 ("set_link", "linear", "link h1:eth0--s1:eth0", True)]
    with pytest.raises(ScenarioError, match=r"^no link between h1 and h2 in linear \(h1 is "
                                            r"linked to s1\)$"):
        net.link("h1", "h2", up=False)


def test_pause_freezes_virtual_time_and_refuses_commands_until_resume():
    exp = running(single(2, tdf=10), answering())
    net = Session(exp)
    at = net.pause()
    assert exp.paused and exp.backend.asked == [("freeze", "single")]
    assert exp.now() == at
    for call in (lambda: net.cmd("h1", "true"), net.pingall, lambda: net.iperf("h1", "h2")):
        with pytest.raises(ScenarioError, match="the experiment is paused"):
            call()
    with pytest.raises(ExperimentError, match="paused: resume it before changing the TDF"):
        net.tdf(20)
    with pytest.raises(ExperimentError, match="paused already"):
        net.pause()
    assert net.resume() == at
    assert not exp.paused and exp.backend.asked[-1] == ("thaw", "single")
    assert exp.now() >= at
    # The timeline goes on from the pause, at the same TDF.
    assert [s["tdf"] for s in exp.engine.clock.timeline()] == [10, 10]
    with pytest.raises(ExperimentError, match="not paused"):
        net.resume()


def test_tdf_changes_the_running_experiment():
    exp = running(single(2, tdf=10))
    assert Session(exp).tdf("20") == 20
    assert exp.backend.asked == [("set_tdf", "single", 20.0)]
    with pytest.raises(ScenarioError, match="set_tdf"):
        Session(exp).tdf("fast")


# -- the xl backend's link down/up ---------------------------------------------------

def test_xl_set_link_stops_and_restarts_both_bridge_ports_of_the_link(tmp_path):
    runner = FakeRunner()
    backend = XlBackend(runner, tmp_path / "state")
    backend._save(DeployState("pair", 10.0, bridges={"sl-pair0": "ovs", "sl-pair1": "linux"},
                              vif_nodes={"sv1.0": "h1 eth0", "sv2.0": "h2 eth0",
                                         "sv3.0": "h3 eth0", "sv1.1": "h1 eth1",
                                         "sv3.1": "h3 eth1"},
                              vif_bridges={"sv1.0": "sl-pair0", "sv2.0": "sl-pair0",
                                           "sv1.1": "sl-pair1", "sv3.1": "sl-pair1"}))
    link = Link(Endpoint("h1", 0), Endpoint("h2", 0))
    backend.set_link("pair", link, up=False)
    backend.set_link("pair", link, up=True)
    assert [" ".join(c) for c in runner.calls] == [
        f"ovs-ofctl mod-port sl-pair0 {vif} {flag}"
        for flag_pair in (("no-receive", "no-forward"), ("receive", "forward"))
        for vif in ("sv1.0", "sv2.0") for flag in flag_pair]
    runner.calls.clear()
    backend.set_link("pair", Link(Endpoint("h1", 1), Endpoint("h3", 1)), up=False)
    assert [" ".join(c) for c in runner.calls] == [
        "bridge link set dev sv1.1 state 0", "bridge link set dev sv3.1 state 0"]
    with pytest.raises(BackendError, match=r"link h1:eth2--h2:eth0 of pair: its vifs are not "
                                           r"in the state file \(found sv2.0\)"):
        backend.set_link("pair", Link(Endpoint("h1", 2), Endpoint("h2", 0)), up=False)
    backend._save(DeployState("pair", 10.0, vif_nodes={"sv1.0": "h1 eth0", "sv2.0": "h2 eth0"}))
    with pytest.raises(BackendError, match=r"vif sv1.0 has no bridge in the state file"):
        backend.set_link("pair", link, up=False)


def test_cmd_defaults_to_the_experiments_timeout_and_ctrl_c_kills_the_command():
    exp = running(single(2), answering())
    exp.command_timeout = 600.0
    net = Session(exp)
    net.cmd("h1", "true")
    assert exp.engine.commands[-1] == ("h1", "start true", 600.0)

    def interrupted(handle, check=False):
        raise KeyboardInterrupt
    exp.engine.wait = interrupted
    with pytest.raises(KeyboardInterrupt):
        net.cmd("h1", "ping h2")
    assert exp.engine.killed == ["ping 10.0.0.2"]


def test_xl_finds_a_listing_links_vifs_by_index_although_their_guests_name_them_eth1(tmp_path):
    # A SELENA listing's interface 0 is the guest's eth1: the state file's
    # labels say eth1 (for people), the lookup goes by node and index.
    runner = FakeRunner()
    backend = XlBackend(runner, tmp_path / "state")
    backend._save(DeployState("pair", 10.0, bridges={"sl-pair0": "ovs"},
                              vif_nodes={"sv1.0": "H1 eth1", "sv2.0": "H2 eth1"},
                              vif_bridges={"sv1.0": "sl-pair0", "sv2.0": "sl-pair0"},
                              vif_ends={"sv1.0": "H1 0", "sv2.0": "H2 0"}))
    backend.set_link("pair", Link(Endpoint("H1", 0), Endpoint("H2", 0)), up=False)
    assert {c[3] for c in runner.calls} == {"sv1.0", "sv2.0"}
    assert backend.capture_source("pair", Link(Endpoint("H1", 0), Endpoint("H2", 0)),
                                  "H2").iface == "sv2.0"
