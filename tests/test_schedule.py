"""Link and node changes during a run (selena.schedule, exp.link, exp.at with a
change, --events): the parser and its FILE:LINE errors, the checks against a
topology, what the backend is asked, the events recorded for the bundle,
the xl backend's re-shaping of one link (TDF-scaled, kept across TDF
changes), the prompt's link command, and the CLI's --events."""

from __future__ import annotations

import io
import threading
import time

import pytest
from cli_main import run_cli as cli
from fake_runner import FakeRunner
from fake_session import running

from selena.backends.xl import DeployState, XlBackend, shaping_spec
from selena.cli.interactive import Prompt
from selena.engine import Engine, VirtualClock
from selena.errors import BackendError, ExperimentError, ScenarioError
from selena.experiment import Experiment
from selena.model import Endpoint, Link, Topology
from selena.schedule import Event, check_events, load_events, parse_change, parse_line
from selena.session import Session
from selena.topologies import linear

# -- the schedule file ---------------------------------------------------------------


def test_a_schedule_file_parses_in_time_order_with_comments_and_blank_lines(tmp_path):
    path = tmp_path / "events"
    path.write_text("# t target change\n\n40 node h2 crash\n"
                    "12.5 link h1 s1 delay=20ms   # slower\n"
                    "30 link h1 s1 down\n12.5 link h1 s1 set rate=5Mbit loss=1%\n")
    events = load_events(path)
    assert [(e.t, e.text()) for e in events] == [
        (12.5, "link h1 s1 delay=20ms"), (12.5, "link h1 s1 rate=5Mbit loss=1%"),
        (30.0, "link h1 s1 down"), (40.0, "node h2 crash")]
    assert events[0] == Event("link", ("h1", "s1"), "set", (("delay", "20ms"),), 12.5)
    assert events[0].where == f"{path}:4"


@pytest.mark.parametrize("line,message", [
    ("soon link h1 s1 down", r"^F:3: 'soon' is not a virtual time: start the line with "
                             r"seconds"),
    ("-1 link h1 s1 down", r"^F:3: virtual time -1 is negative: give zero or more seconds "
                           r"after the scenario's start$"),
    ("nan link h1 s1 down", r"^F:3: virtual time nan is not a finite number: give zero or "
                            r"more seconds after the scenario's start$"),
    ("5 link h1 s1 sideways", r"^F:3: link h1 s1: 'sideways' is not NAME=VALUE with NAME one "
                              r"of rate, delay, jitter, loss, queue \(e.g. delay=20ms\), nor "
                              r"down or up$"),
    ("5 link h1 s1 speed=1G", r"^F:3: link h1 s1: 'speed=1G' is not NAME=VALUE"),
    ("5 link h1 s1 set", r"^F:3: link h1 s1 set: give NAME=VALUE \(e.g. delay=20ms\)$"),
    # The second value silently won before.
    ("5 link h1 s1 delay=20ms rate=5Mbit delay=30ms",
     r"^F:3: link h1 s1: delay given twice \(delay=20ms, delay=30ms\): give each value once$"),
    ("5 link h1 down", r"^F:3: 'link h1 down': want `link A B set NAME=VALUE...`"),
    ("5 node h1 reboot", r"^F:3: 'node h1 reboot': want `node N crash`, `node N restart` or "
                         r"`node N cpu_share=0.25` \(or none\)$"),
    ("5 node h1 cpu_share=", r"^F:3: node h1: give cpu_share a share of the host's CPUs "
                             r"\(cpu_share=0.25\) or none$"),
    ("5 switch s1 off", r"^F:3: 'switch s1 off': want `link A B"),
    ("5", r"^F:3: empty change: want"),
])
def test_a_bad_line_is_named_by_file_and_line_with_the_fix(line, message):
    with pytest.raises(ScenarioError, match=message):
        parse_line(line, "F:3")


def test_an_unreadable_events_file_is_one_line(tmp_path):
    with pytest.raises(ScenarioError, match=r"^events file .*/missing: cannot read it "
                                            r"\(No such file or directory\)$"):
        load_events(tmp_path / "missing")


def pair_topo(tdf: float = 10) -> Topology:
    topo = Topology("pair", tdf=tdf)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"),
                  rate="10Mbit", delay="20ms", jitter="1ms")
    return topo


@pytest.mark.parametrize("text,message", [
    ("1 link h1 h9 down", r"^F:1: no node named 'h9' in experiment pair \(have h1, h2\)$"),
    ("1 link h1 h1 down", r"^F:1: no link between h1 and h1 in pair \(h1 is linked to h2\)$"),
    ("1 link h1 h2 delay=fast", r"^F:1: link h1:eth0--h2:eth0: delay: time 'fast'"),
    ("1 link h1 h2 rate=10", r"^F:1: link h1:eth0--h2:eth0: rate 10 bit/s out of range"),
    ("1 link h1 h2 loss=150%", r"^F:1: link h1:eth0--h2:eth0: loss 150% out of range"),
    ("1 link h1 h2 delay=0.5ms", r"^F:1: link h1:eth0--h2:eth0: jitter 0.001 s must be between "
                                 r"0 and the delay$"),
    ("1 link h1 h2 queue=many", r"^F:1: link h1:eth0--h2:eth0: queue 'many' is not a number "
                                r"of packets \(e.g. queue=100\)$"),
    ("1 node h3 crash", r"^F:1: no node named 'h3'"),
    ("1 node h3 restart", r"^F:1: no node named 'h3'"),
    ("1 node h3 cpu_share=0.5", r"^F:1: no node named 'h3'"),
    ("1 node h1 cpu_share=2", r"^F:1: node h1: cpu_share 2 is not a share of the host's CPUs: "
                              r"give more than 0 and at most 1 \(0.25: a quarter of them\), or "
                              r"none to lift it$"),
    ("1 node h1 cpu_share=half", r"^F:1: node h1: cpu_share half is not a share"),
])
def test_events_are_checked_against_the_topology_before_a_run(text, message):
    with pytest.raises(ScenarioError, match=message):
        check_events([parse_line(text, "F:1")], pair_topo())


def test_good_events_pass_the_check_and_change_nothing():
    topo = pair_topo()
    check_events([parse_line("1 link h2 h1 delay=60ms jitter=0 rate=none", "F:1"),
                  parse_line("2 link h1 h2 down", "F:2"), parse_line("3 node h1 crash"),
                  parse_line("4 node h2 restart"), parse_line("5 node h2 cpu_share=0.25"),
                  parse_line("6 node h2 cpu_share=none")], topo)
    assert parse_line("5 node h2 cpu_share=0.25") == Event("node", ("h2",), "set",
                                                           (("cpu_share", "0.25"),), 5.0)
    assert parse_line("5 node h2 cpu_share=0.25").text() == "node h2 cpu_share=0.25"
    topo.nodes["h1"].cpu_time = "real"
    with pytest.raises(ScenarioError, match=r"^F:9: node h1 has cpu_time='real', a cap of its "
                                            r"own; a cpu_share would replace it"):
        check_events([parse_line("9 node h1 cpu_share=0.5", "F:9")], topo)
    assert (topo.links[0].delay_s, topo.links[0].rate_bps) == (0.02, 10e6)


def scheduling(exp):
    """A real engine's scheduler (at, sleep_until) and crash on the fake experiment."""
    exp.engine = Engine(None, exp.deployment.domids, VirtualClock(1.0),
                        crash=lambda node: exp.backend.crash(exp.deployment, node))
    return exp


def test_each_event_is_checked_against_the_link_as_the_events_before_leave_it():
    topo = pair_topo()          # 20 ms delay, 1 ms jitter
    later = [parse_line("20 link h1 h2 delay=0.5ms", "F:2"),
             parse_line("10 link h1 h2 jitter=0", "F:1")]
    check_events(later, topo)   # the jitter is gone by the time the delay drops
    with pytest.raises(ScenarioError, match=r"^F:2: .*jitter 0.001 s must be between"):
        check_events([parse_line("20 link h1 h2 delay=0.5ms", "F:2"),
                      parse_line("30 link h1 h2 jitter=0", "F:3")], topo)
    assert topo.links[0].jitter_s == 0.001


# -- exp.link on a running experiment (tests/support/fake_session.py) ---------------

def test_set_changes_exactly_that_link_through_the_backend_and_records_the_event():
    exp = running(linear(2, tdf=10))
    exp.link("s1", "h1").set(delay="20ms", rate="5Mbit")
    assert exp.backend.asked == [("shape_link", "linear", "link h1:eth0--s1:eth0",
                                  5e6, 0.02, 0.0, 0.0, None)]
    link = exp.links_between("h1", "s1")[0]
    assert (link.delay_s, link.rate_bps) == (0.02, 5e6)          # the model follows
    assert exp.links_between("h2", "s2")[0].delay_s == 0          # no other link
    [event] = exp.events
    assert event["target"] == "link s1 h1" and event["change"] == "delay=20ms rate=5Mbit"
    assert event["tdf"] == 10
    assert 0 <= event["virtual_s"] <= exp.now()
    assert 0 <= event["real_s"] and event["took_real_s"] >= 0
    assert "scheduled_s" not in event


@pytest.mark.parametrize("values, written", [
    ({"rate": 5e6, "delay": 0.02}, "rate=5Mbit delay=20ms"),
    ({"rate": 1.5e9, "delay": 1e-3, "jitter": 250e-6, "loss": 0.015},
     "rate=1.5Gbit delay=1ms jitter=250us loss=1.5%"),
    ({"rate": 64000, "delay": 1.5, "queue": 100}, "rate=64kbit delay=1.5s queue=100"),
    ({"rate": None, "loss": 0, "delay": 0}, "rate=none loss=0% delay=0ms"),
    ({"delay": "7ms", "rate": "10M"}, "delay=7ms rate=10M"),               # as written
])
def test_an_api_change_is_recorded_as_a_schedule_line_means_the_same(values, written):
    """Numbers from the API (Mininet's bw=5 is 5e6 bit/s) are recorded with
    their units, as a schedule file would write them, and that text, read
    back as a change, sets the same link values."""
    exp = running(linear(2, tdf=10))
    exp.link("s1", "h1").set(**values)
    [event] = exp.events
    assert event["change"] == written
    applied = exp.links_between("h1", "s1")[0]
    again = running(linear(2, tdf=10))
    again.link("s1", "h1").set(**dict(parse_change(["link", "s1", "h1", *written.split()]).values))
    reread = again.links_between("h1", "s1")[0]
    for name in ("rate_bps", "delay_s", "jitter_s", "loss", "queue_packets"):
        assert getattr(reread, name) == pytest.approx(getattr(applied, name)), name

def test_a_bad_value_changes_nothing_and_names_the_link():
    exp = running(linear(2))
    with pytest.raises(ScenarioError, match=r"^link h1:eth0--s1:eth0: delay 20 s out of "
                                            r"range \(0 to 10 s\)$"):
        exp.link("h1", "s1").set(delay=20)
    with pytest.raises(ScenarioError, match=r"^link h1 s1 set: unknown value 'bw'; give one "
                                            r"or more of rate, delay"):
        exp.link("h1", "s1").set(bw=10)
    with pytest.raises(ScenarioError, match=r"^link h1:eth0--s1:eth0: loss must be a string "
                                            r"or a number"):
        exp.link("h1", "s1").set(loss=True)
    with pytest.raises(ScenarioError, match=r"^no link between h1 and h2 in linear"):
        exp.link("h1", "h2")
    assert exp.backend.asked == [] and exp.events == []


def test_guest_side_shaping_cannot_change_during_a_run():
    exp = running(linear(2))
    exp.placement = exp.placement.__class__("guest")
    with pytest.raises(ExperimentError, match=r"shaping='guest'\) cannot change during a run"):
        exp.link("h1", "s1").set(delay="1ms")


def test_down_up_and_crash_are_recorded_too_and_a_backend_that_cannot_restart_says_so():
    exp = scheduling(running(linear(2)))
    exp.link("h1", "s1").down()
    exp.link("h1", "s1").up()
    exp.node("h2").crash()
    assert [a[0] for a in exp.backend.asked] == ["set_link", "set_link", "crash"]
    assert [(e["target"], e["change"]) for e in exp.events] == [
        ("link h1 s1", "down"), ("link h1 s1", "up"), ("node h2", "crash")]
    with pytest.raises(ExperimentError, match=r"^node h1 restart: the \w+ backend cannot "
                                              r"restart a node \(the xl backend can\)$"):
        exp.node("h1").restart()
    assert len(exp.backend.asked) == 3 and len(exp.events) == 3


def test_at_with_a_change_applies_it_at_that_virtual_time_and_records_when_it_was_due():
    exp = scheduling(running(linear(2)))
    try:
        # Due in 0.5 s, not less: `make check` runs tests on both cores, and
        # at 0.05 s the change was once applied before the next line ran.
        future = exp.at(0.5, "link h1 s1 delay=7ms")
        assert exp.backend.asked == []
        future.result(timeout=5)
        assert exp.backend.asked[0][:5] == ("shape_link", "linear", "link h1:eth0--s1:eth0",
                                            None, 0.007)
        [event] = exp.events
        assert event["scheduled_s"] == 0.5 and event["virtual_s"] >= 0.5
        exp.at(0.03, exp.link("h2", "s2").set, loss="2%").result(timeout=5)
        exp.at(0.01, exp.link("h2", "s2").down).result(timeout=5)
        assert [e.get("scheduled_s") for e in exp.events] == [0.5, 0.03, 0.01]
        exp.link("h2", "s2").up()                   # not from `at`: no due time
        assert "scheduled_s" not in exp.events[-1]
        with pytest.raises(ScenarioError, match=r"^exp.at: link h1 s1: 'delay' is not"):
            exp.at(1, "link h1 s1 delay")
        with pytest.raises(ScenarioError, match=r"no link between h1 and h2"):
            exp.at(1, "link h1 h2 down")
    finally:
        exp.engine.stop()


def test_a_schedule_runs_in_order_from_one_thread_and_a_bad_event_schedules_none(tmp_path):
    exp = scheduling(running(linear(2)))
    try:
        path = tmp_path / "events"
        path.write_text("0.06 link h1 s1 up\n0.02 link h1 s1 down\n0.04 link h2 s2 loss=1%\n")
        before = threading.active_count()
        exp.schedule(load_events(path)).result(timeout=5)
        assert threading.active_count() <= before + 1
        assert [a[0] for a in exp.backend.asked] == ["set_link", "shape_link", "set_link"]
        assert [e["scheduled_s"] for e in exp.events] == [0.02, 0.04, 0.06]
        assert all(e["virtual_s"] >= e["scheduled_s"] for e in exp.events)
        path.write_text("0.01 link h1 s1 down\n0.02 node h9 crash\n")
        with pytest.raises(ScenarioError, match=r"events:2: no node named 'h9'"):
            exp.schedule(load_events(path))
        time.sleep(0.05)
        assert len(exp.backend.asked) == 3
    finally:
        exp.engine.stop()


# -- the prompt and the session go through exp.link ---------------------------------

def pipe(net: Session, text: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    Prompt(net, stdin=io.StringIO(text), stdout=out, stderr=err, tty=False).run()
    return out.getvalue(), err.getvalue()


def test_the_prompts_link_command_sets_values_and_takes_links_down_through_exp_link():
    exp = running(linear(2))
    net = Session(exp)
    calls = []
    real = exp.link

    def link(a, b):
        calls.append((a, b))
        return real(a, b)
    exp.link = link
    out, err = pipe(net, "link h1 s1 delay=20ms loss=1%\nlink h1 s1 down\n"
                         "link h1 s1 set rate=fast\n")
    assert calls == [("h1", "s1"), ("h1", "s1"), ("h1", "s1")]
    assert [a[0] for a in exp.backend.asked] == ["shape_link", "set_link"]
    assert exp.backend.asked[0][4:7] == (0.02, 0.0, 0.01)
    assert err == "*** link h1:eth0--s1:eth0: rate 'fast' is not a number with a unit\n"
    assert [e["change"] for e in exp.events] == ["delay=20ms loss=1%", "down"]


# -- the xl backend: one link re-shaped, kept across TDF changes --------------------

def xl_with(tmp_path, link: Link, tdf: float = 10.0):
    runner = FakeRunner()
    backend = XlBackend(runner, tmp_path / "state")
    backend._save(DeployState(
        "pair", tdf, domains={"selena-pair-h1": 1, "selena-pair-h2": 2},
        nodes={"h1": "selena-pair-h1", "h2": "selena-pair-h2"},
        shaping={"sv1.0": shaping_spec(link), "sv2.0": shaping_spec(link),
                 "sv3.0": shaping_spec(link)},
        vif_nodes={"sv1.0": "h1 eth0", "sv2.0": "h2 eth0", "sv3.0": "h3 eth0"}))
    return backend, runner


def ends(**values) -> Link:
    return Link(Endpoint("h1", 0), Endpoint("h2", 0), **values)


def tc(runner) -> list[str]:
    return [" ".join(c) for c in runner.calls if c[0] == "tc"]


def test_xl_reshapes_both_vifs_of_the_link_at_the_current_tdf_and_keeps_the_values(tmp_path):
    backend, runner = xl_with(tmp_path, ends(rate_bps=2e6, delay_s=0.005))
    backend.shape_link("pair", ends(rate_bps=4e6, delay_s=0.02))
    assert tc(runner) == [
        "tc class replace dev sv1.0 parent 1: classid 1:1 htb rate 400000bit ceil 400000bit "
        "burst 1600b cburst 1600b",
        "tc qdisc replace dev sv1.0 parent 1:1 handle 10: netem delay 200000us",
        "tc class replace dev sv2.0 parent 1: classid 1:1 htb rate 400000bit ceil 400000bit "
        "burst 1600b cburst 1600b",
        "tc qdisc replace dev sv2.0 parent 1:1 handle 10: netem delay 200000us"]
    state = backend.state("pair")
    assert state.shaping["sv1.0"]["delay_s"] == 0.02 == state.shaping["sv2.0"]["delay_s"]
    assert state.shaping["sv3.0"]["delay_s"] == 0.005          # not that link's
    runner.calls.clear()
    backend.set_tdf("pair", 20)
    netem = {c.split()[4]: c.split("delay ")[1] for c in tc(runner) if "netem" in c}
    # 20 ms stays 20 ms of virtual time: 400 ms of real delay at TDF 20.
    assert netem == {"sv1.0": "400000us", "sv2.0": "400000us", "sv3.0": "100000us"}
    rates = {c.split()[4]: c.split(" rate ")[1].split()[0] for c in tc(runner) if " rate " in c}
    assert rates == {"sv1.0": "200000bit", "sv2.0": "200000bit", "sv3.0": "100000bit"}


def test_xl_replaces_the_root_qdisc_when_the_shape_of_the_shaping_changes(tmp_path):
    backend, runner = xl_with(tmp_path, ends(rate_bps=2e6, delay_s=0.005))
    backend.shape_link("pair", ends(delay_s=0.005))         # the rate lifted
    assert tc(runner)[:2] == ["tc qdisc del dev sv1.0 root",
                              "tc qdisc replace dev sv1.0 root handle 1: netem delay 50000us"]
    runner.calls.clear()
    backend.shape_link("pair", ends())                      # nothing left to shape
    assert tc(runner) == ["tc qdisc del dev sv1.0 root", "tc qdisc del dev sv2.0 root"]
    assert set(backend.state("pair").shaping) == {"sv3.0"}
    runner.calls.clear()
    backend.shape_link("pair", ends(rate_bps=1e6))          # shaped again from nothing
    assert tc(runner)[:2] == [
        "tc qdisc replace dev sv1.0 root handle 1: htb default 1",
        "tc class replace dev sv1.0 parent 1: classid 1:1 htb rate 100000bit ceil 100000bit "
        "burst 1600b cburst 1600b"]


def test_xl_puts_the_first_vif_back_when_the_second_fails(tmp_path):
    backend, runner = xl_with(tmp_path, ends(delay_s=0.005))
    runner.respond(["tc", "qdisc", "replace", "dev", "sv2.0"], 2, "", "RTNETLINK: No such "
                                                                      "device\n")
    with pytest.raises(BackendError, match=r"^re-shaping sv2.0 at TDF 10 failed"):
        backend.shape_link("pair", ends(delay_s=0.03))
    assert [c for c in tc(runner) if "sv1.0" in c] == [
        "tc qdisc replace dev sv1.0 root handle 1: netem delay 300000us",
        "tc qdisc replace dev sv1.0 root handle 1: netem delay 50000us"]
    assert backend.state("pair").shaping["sv1.0"]["delay_s"] == 0.005


def test_xl_a_prio_link_keeps_its_priority_queue_across_tdf_changes(tmp_path):
    backend, runner = xl_with(tmp_path, ends(rate_bps=2e6, delay_s=0.005, prio=True))
    backend.set_tdf("pair", 20)
    assert not any("handle 10: netem" in c for c in tc(runner))
    assert any("parent 10:1 handle 21: netem delay 100000us" in c for c in tc(runner))


def test_xl_a_link_whose_vifs_are_unknown_is_refused(tmp_path):
    backend, _ = xl_with(tmp_path, ends())
    with pytest.raises(BackendError, match=r"link h1:eth1--h2:eth0 of pair: its vifs are not"):
        backend.shape_link("pair", Link(Endpoint("h1", 1), Endpoint("h2", 0)))


# -- selena validate / plan / run --events -------------------------------------------


def test_validate_and_plan_check_the_events_file(capsys, tmp_path):
    good = tmp_path / "good.events"
    good.write_text("12.5 link h1 s1 delay=20ms\n30 link h1 s1 down\n40 node h2 crash\n")
    rc, out, err = cli(capsys, "validate", "--topo", "single,2", "--events", str(good))
    assert rc == 0, err
    assert "3 scheduled events" in out
    rc, out, err = cli(capsys, "plan", "--topo", "single,2", "--events", str(good))
    assert rc == 0, err
    assert "# at virtual 12.5 s: link h1 s1 delay=20ms\n" in out
    bad = tmp_path / "bad.events"
    bad.write_text("# fine\n12.5 link h1 s1 delay=20ms\n30 link h1 h2 down\n")
    for verb in ("validate", "plan", "run"):
        rc, out, err = cli(capsys, verb, "--topo", "single,2", "--events", str(bad))
        assert rc != 0
        assert err.strip().endswith(f"{bad}:3: no link between h1 and h2 in single (h1 is "
                                    "linked to s1)"), err
    rc, _, err = cli(capsys, "deploy", "--topo", "single,2", "--events", str(good))
    assert rc != 0 and "deploy runs no scenario; use selena run --events FILE" in err


@pytest.mark.parametrize("line,options,message", [
    ("40 node h2 restart", ["--backend", "mininet"],
     "node h2 restart: the mininet backend cannot restart a node (the xl backend can)"),
    ("40 node h2 crash", ["--backend", "mininet"],
     "node h2 crash: the mininet backend cannot crash a node"),
    ("40 node h2 cpu_share=0.1", ["--backend", "mininet"],
     "node h2 cpu_share: the mininet backend cannot cap a node's CPU (the xl backend can)"),
    ("12.5 link h1 s1 delay=20ms", ["--shaping", "guest"],
     "link h1 s1 set: links shaped inside the guests (shaping='guest') cannot change during "
     "a run; use Dom0 shaping (the default) to change them"),
    ("40 node h2 restart", ["--capture", "h2,s1"],
     "node h2 restart: the capture of link h2,s1 is taken on h2's vif, which a restart "
     "replaces; capture it as s1,h2 (from the other end) instead"),
])
def test_a_change_this_experiment_could_never_make_is_refused_before_the_run(
        capsys, tmp_path, line, options, message):
    """Each was refused only when due, half-way through the run."""
    events = tmp_path / "e.events"
    events.write_text(f"# ok\n1 link h1 s1 down\n{line}\n")
    for verb in ("validate", "plan", "run"):
        rc, _, err = cli(capsys, verb, "--topo", "single,2", "--events", str(events), *options)
        assert rc != 0 and err.strip().endswith(f"{events}:3: {message}"), (verb, err)
    events.write_text(f"{line}\n")
    rc, _, err = cli(capsys, "validate", "--topo", "single,2", "--events", str(events))
    assert rc == 0, err


def test_a_cpu_share_set_during_the_run_caps_the_guest_follows_the_tdf_and_is_recorded(
        fake_xen, tmp_path):
    """Mininet's setCPUFrac on a running host: a cap from the change on,
    rescaled at every TDF change, lifted by none; refused in one line,
    nothing changed, where it cannot be."""
    import json

    topo = pair_topo(tdf=4)
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(topo, backend=backend, templates=None, progress=lambda msg: None,
                    ready_timeout=20, out=tmp_path / "out") as exp:
        h2 = fake_xen.domains["selena-pair-h2"]
        assert h2.cap == 0
        exp.node("h2").set_cpu_share(0.5)              # one of the fake's 2 CPUs
        assert h2.cap == 25                             # 100 / TDF 4
        exp.set_tdf(2)
        assert h2.cap == 50
        exp.node("h2").restart()                        # booted again with its cap
        h2 = fake_xen.domains["selena-pair-h2"]
        assert h2.cap == 50
        with pytest.raises(ScenarioError, match=r"^node h2: cpu_share 1.5 is not a share"):
            exp.node("h2").set_cpu_share(1.5)
        with pytest.raises(BackendError, match=r"^node h2: cpu_share=0.001 of 2 CPUs at TDF 2 "
                                               r"needs a cap of 0.10% of a CPU"):
            exp.node("h2").set_cpu_share(0.001)
        assert h2.cap == 50 and exp.plan().guest("h2").cpu_share == 0.5
        exp.at(exp.now() + 0.01, "node h2 cpu_share=none").result(timeout=30)
        assert h2.cap == 0 and exp.plan().guest("h2").cpu_share is None
        assert exp.topology.nodes["h2"].cpu_share is None     # the deploy's, for meta.json
        exp.set_tdf(4)
        assert h2.cap == 0                              # lifted stays lifted
        exp.topology.nodes["h1"].cpu_time = "real"
        with pytest.raises(ExperimentError, match=r"^node h1 has cpu_time='real'"):
            exp.node("h1").set_cpu_share(0.5)
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [(e["target"], e["change"], e["tdf"]) for e in meta["events"]] == [
        ("node h2", "cpu_share=0.5", 4.0), ("node h2", "restart", 2.0),
        ("node h2", "cpu_share=none", 2.0)]
    assert meta["cpu_time"]["h2"] == {"mode": "dilated", "vcpus": 1, "cap_percent_at_start": 0}


def test_a_cpu_share_the_adaptive_tdf_would_outgrow_is_refused_when_set():
    """With tdf=auto up to 60, a share Xen can cap only up to TDF 20 would
    fail the controller's raise half-way through the run."""
    from selena.adaptive import Policy
    from selena.hostinfo import HostInfo

    exp = running(linear(2, tdf=2))
    exp.adaptive = Policy(1, 60)
    exp.host = HostInfo("recording", cpus=2)
    with pytest.raises(ExperimentError, match=r"^node h1: cpu_share=0.1 of 2 CPUs can be capped "
                                              r"up to TDF 20 only, and the adaptive TDF goes "
                                              r"up to 60: give a larger share$"):
        exp.node("h1").set_cpu_share(0.1)
    exp.node("h1").set_cpu_share(0.5)           # up to TDF 100: fine
    assert [a for a in exp.backend.asked if a[0] == "set_cpu_share"] == [
        ("set_cpu_share", "h1", 0.5)]


def test_parse_change_is_what_the_prompt_and_at_take():
    assert parse_change("link a b up".split()) == Event("link", ("a", "b"), "up")
    assert parse_change("link a b set delay=1ms".split()).text() == "link a b delay=1ms"


# -- end to end on the fake Dom0 (toolchain: the real guest agents) -----------------

def test_a_changed_link_is_rescaled_at_a_tdf_change_and_the_bundle_lists_the_events(
        fake_xen, tmp_path):
    import json

    topo = pair_topo(tdf=4)
    topo.links[0].jitter_s = 0.0
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(topo, backend=backend, templates=None, progress=lambda msg: None,
                    ready_timeout=20, out=tmp_path / "out") as exp:
        fake_xen.calls.clear()
        exp.link("h1", "h2").set(delay="30ms")
        netem = [" ".join(c) for c in fake_xen.calls if "netem" in c]
        assert len(netem) == 2 and all("delay 120000us" in c for c in netem)   # 30 ms x 4
        exp.set_tdf(8)
        netem = [" ".join(c) for c in fake_xen.calls if "netem" in c][2:]
        assert len(netem) == 2 and all("delay 240000us" in c for c in netem)   # 30 ms x 8
        exp.at(exp.now() + 0.01, "link h1 h2 down").result(timeout=30)
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    events = meta["events"]
    assert [(e["target"], e["change"], e["tdf"]) for e in events] == [
        ("link h1 h2", "delay=30ms", 4.0), ("link h1 h2", "down", 8.0)]
    assert events[0]["virtual_s"] < events[1]["virtual_s"] and \
        events[0]["real_s"] < events[1]["real_s"]
    # The TDF change lies between the two: the timeline and the events agree.
    change = meta["tdf_timeline"][1]
    assert events[0]["real_s"] < change["real_s"] < events[1]["real_s"]
