"""The command line as a user meets it: Mininet habits, SELENA's listings,
and a table of common mistakes with the message each must produce (naming
the file and line, never a traceback through selena)."""

from __future__ import annotations

import io
import json
import re
import signal
from pathlib import Path

import pytest
from cli_main import run_cli

from selena.backends.xl import XlBackend
from selena.errors import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def test_validate_paper_listing(capsys):
    rc, out, err = run_cli(capsys, "validate", str(SCENARIOS / "paper_listing1.py"))
    assert rc == 0, err
    assert "valid: experiment paper-listing1, TDF 1, 2 hosts, 1 other nodes, 2 links" in out
    assert "8 scenario actions" in out


def test_validate_clean_api_file_with_an_exact_decimal_tdf(capsys):
    rc, out, _ = run_cli(capsys, "validate", str(SCENARIOS / "two_hosts.py"), "--tdf", "1.001")
    assert rc == 0 and "experiment twohosts, TDF 1.001, 2 hosts" in out


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_validate_and_plan_refuse_an_out_a_run_would_refuse_and_create_nothing(
        capsys, tmp_path, command):
    (tmp_path / "afile").write_text("")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work")
    scenario = str(SCENARIOS / "two_hosts.py")
    for out, message in [(tmp_path / "afile" / "run", "is under .*afile, a regular file"),
                         (tmp_path / "mine", "exists and holds no results bundle")]:
        rc, _, err = run_cli(capsys, command, scenario, "--out", str(out))
        assert rc == 1 and re.search(f"results directory {out} {message}", err), err
    fresh = tmp_path / "new" / "run"
    rc, _, err = run_cli(capsys, command, scenario, "--out", str(fresh))
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "mine"]


@pytest.mark.parametrize("argv,summary", [
    (["--topo", "linear,3"], "3 hosts, 3 other nodes, 5 links"),
    (["linear,3", "--link", "tc,bw=10,delay=5ms,loss=1"], "3 hosts, 3 other nodes, 5 links"),
    (["--topo", "single"], "2 hosts, 1 other nodes, 2 links"),
    (["--topo", "tree,depth=2,fanout=3"], "9 hosts, 4 other nodes, 12 links"),
    (["--topo", "minimal"], "2 hosts, 1 other nodes, 2 links"),
])
def test_mininet_habits(capsys, argv, summary):
    rc, out, err = run_cli(capsys, "validate", *argv)
    assert rc == 0, err
    assert summary in out


def _file(tmp_path: Path, body: str, name: str = "mine.py") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


HOSTS = ("from selena.model import Topology\n"
         "topology = Topology('mine')\n"
         "a = topology.add_host('a', ip='10.0.0.1/24')\n"
         "b = topology.add_host('b', ip='10.0.0.2/24')\n")

MISTAKES = [
    # (file body, extra argv, exit status, what stderr must say)
    ("newNode(0, 'H1', NodeType.LINUX_HSOT, [])\n", [], 1,
     "mine.py:1: NodeType has no member LINUX_HSOT (members: LINUX_HOST, LINUX_OVS, "
     "OF_CONTROLLER, DEBIAN_HOST); did you mean NodeType.LINUX_HOST?"),
    (HOSTS + "topolgy.add_link(a, b)\n", [], 1,
     "mine.py:5: NameError: name 'topolgy' is not defined; did you mean 'topology'?"),
    (HOSTS + "topology.add_link(a, b, delay='5mss')\n", [], 1,
     "mine.py:5: add_link: delay: time '5mss': unknown unit 'mss' (use s, ms, us, ns)"),
    (HOSTS + "topology.add_link(a, b)\n", ["--tdf", "nan"], 2,
     "argument --tdf: TDF 'nan' is not a finite number"),
    (HOSTS + "topology.add_link(a, b)\n", ["--tdf", "2.0005"], 2,
     "TDF 2.0005 has more than three decimals"),
    (HOSTS + "topology.add_link(a, b, loss=1)\n", ["--strict"], 1,
     "mine.py:5: link a:eth0--b:eth0: loss=1 is a ratio, so 100% of packets are lost; "
     "for 1 percent write loss=\"1%\" (an error with --strict)"),
    ("newNode(0, 'H1', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.2', '255.255.255.0', '')])\n"
     "newNode(1, 'H2', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.3', '255.255.255.0', '')])\n"
     "newLink((0, 0), (1, 0), 100, 1)\n"
     "setArp(0, 'eth1', '10.0.1.3', 'fe:ff:ff:00:01:99')\n", [], 1,
     "mine.py:4: static ARP entry on H1 eth1: MAC fe:ff:ff:00:01:99 for 10.0.1.3, but H2 "
     "eth1, which holds 10.0.1.3, has MAC fe:ff:ff:00:01:03"),
    ("newNode(0, 'H1', NodeType.LINUX_HOST, [])\npushCmd(0, 'ls -l')\n", [], 1,
     "mine.py:2: pushCmd(0, ...): the commands must be a list or a tuple, got 'ls -l'"),
    ("pushOFRule(3, 'br0', 'add-flow', 'actions=drop')\n", [], 1,
     "mine.py:1: node id 3 is used before newNode(3, ...)"),
    ("def helper():\n    return 1 / 0\n\nhelper()\n", [], 1,
     "mine.py:2: ZeroDivisionError: division by zero"),
    (HOSTS + "topology.add_link(a, b)\n", ["--link", "tc,delay=5"], 1,
     "--link 'tc,delay=5': delay=5 has no unit; write e.g. delay=5ms"),
    ("newNode(0, 'H1', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.2', '255.255.255.0', '')],"
     " 1, 'four')\n", [], 1,
     "mine.py:1: node H1: cpu mask 'four' is not like '4,5,6,7' or '2-3'"),
]


@pytest.mark.parametrize("body,argv,status,message", MISTAKES)
def test_user_mistakes_get_a_clear_message_and_no_traceback(tmp_path, capsys, monkeypatch,
                                                            body, argv, status, message):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, "validate", _file(tmp_path, body), *argv)
    assert rc == status
    assert message in err, err
    assert "Traceback" not in err and "selena/" not in err


def test_a_big_mistake_prints_a_screenful(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = ("from selena.topologies import star\n"
            "topology = star(2000, delay='20s')\n")
    rc, _, err = run_cli(capsys, "validate", _file(tmp_path, body))
    assert rc == 1
    lines = err.splitlines()
    assert len(lines) < 10, err
    assert any(line.startswith("  2000 x delay out of range, e.g. ") for line in lines)


def test_a_traceback_through_the_users_own_functions_shows_only_their_frames(
        tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = ("def inner():\n    raise ValueError('bad idea')\n\n"
            "def outer():\n    inner()\n\nouter()\n")
    rc, _, err = run_cli(capsys, "validate", _file(tmp_path, body))
    assert rc == 1
    assert "mine.py:2: ValueError: bad idea" in err
    assert "in your scenario" in err and 'mine.py", line 5, in outer' in err
    assert "selena/" not in err


def test_warnings_are_printed_but_pass_without_strict(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "validate",
                           _file(tmp_path, HOSTS + "topology.add_link(a, b, delay=2)\n"))
    assert rc == 0 and "1 warning(s)" in out
    assert "warning: mine.py:5: link a:eth0--b:eth0: delay 2 s one-way is unusually long" in err


def test_plan_prints_configs_and_commands_and_runs_none(capsys):
    rc, out, err = run_cli(capsys, "plan", str(SCENARIOS / "two_hosts.py"))
    assert rc == 0, err
    assert out.startswith("# selena plan: experiment twohosts, TDF 10, 2 guests, 1 bridges")
    assert 'name = "selena-twohosts-h1"' in out
    assert "xl create -p -q /run/selena/twohosts/h1.cfg" in out
    assert 'selena-tdf set "$D1" "$D2" 10' in out
    assert "netem delay 50000us" in out and "rate 10000000bit" in out
    assert not Path("/run/selena/twohosts").exists()


def test_plan_of_a_switch_shows_the_agent_scripts(capsys):
    rc, out, _ = run_cli(capsys, "plan", "--topo", "single,2")
    assert rc == 0
    assert "# switch s1, through its agent:" in out
    assert "#   ovs-vsctl --may-exist add-br br0" in out


def test_bad_specs_and_files_are_named(capsys):
    assert run_cli(capsys, "validate", "ring,3")[2].count("unknown topology 'ring'") == 1
    assert "bad value for bw: 'fast'" in run_cli(capsys, "validate", "linear,3", "--link",
                                                 "tc,bw=fast")[2]
    assert "no such scenario file: missing.py" in run_cli(capsys, "validate", "missing.py")[2]
    assert "give a scenario file or --topo" in run_cli(capsys, "validate")[2]
    assert "not both" in run_cli(capsys, "validate", "x.py", "--topo", "single")[2]


# -- selena run against a fake Dom0 ---------------------------------------------------

@pytest.fixture
def fake_backend(fake_xen, tmp_path, monkeypatch):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    monkeypatch.setattr("selena.experiment.get_backend", lambda name, **kw: backend)
    monkeypatch.setattr("selena.experiment.installed_templates", lambda: None)
    return backend


def test_run_records_a_failing_run_function_and_tears_down(fake_xen, fake_backend, tmp_path,
                                                           capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = (HOSTS + "topology.add_link(a, b)\n\n"
            "def run(exp):\n"
            "    exp.cmd('a', 'echo one')\n"
            "    exp.record('answer', 42, expected=42)\n"
            "    assert exp.cmd('b', 'exit 3').ok, 'b failed'\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, body), "--out", "bundle")
    assert rc == 1
    assert "mine.py:10: AssertionError: b failed" in err and "selena/" not in err
    assert "answer: 42; expected 42, error +0.0%" in out
    meta = json.loads((tmp_path / "bundle/meta.json").read_text())
    assert meta["status"] == "failed" and meta["error"]["message"] == "AssertionError: b failed"
    assert [c["exit_code"] for c in meta["commands"]] == [0, 3]
    assert fake_xen.domains == {}


def test_run_listing2_actions_in_order_print_their_output(fake_xen, fake_backend, tmp_path, capsys,
                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    body = (HOSTS + "topology.add_link(a, b)\n"
            "from selena.compat import pushCmd\n")
    # Listing-2 actions need node ids: a SELENA-style file
    body = ("newNode(0, 'H1', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.2', "
            "'255.255.255.0', '')])\n"
            "newNode(1, 'H2', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.3', "
            "'255.255.255.0', '')])\n"
            "newLink((0, 0), (1, 0), 100, 1)\n"
            "pushCmd(1, ['sleep 30 &'])\n"
            "pushCmd(0, ['echo one', 'echo two'])\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, body), "--out", "bundle")
    assert rc == 0, err
    meta = json.loads((tmp_path / "bundle/meta.json").read_text())
    assert [(c["command"], c["state"]) for c in meta["commands"]] == [
        ("echo one", "exited"), ("echo two", "exited"), ("sleep 30 ", "killed")]
    assert meta["status"] == "ok"
    assert "H1$ echo two\n  two\n" in out         # what Listing-2 commands printed


def test_run_follow_prints_every_commands_output_as_it_comes_with_its_node(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    """selena run --follow: each line after its node's name as it comes
    (here a line printed while the command still ran, before a later
    command's), stderr's marked; a --pre prompt command's output once."""
    monkeypatch.chdir(tmp_path)
    body = (PAIR + "\ndef run(exp):\n"
            "    exp.start('b', 'sleep 0.5; echo from b; echo oops >&2')\n"
            "    exp.cmd('a', 'echo first; sleep 1.5; printf \"no newline\"')\n")
    (tmp_path / "pre").write_text("a echo from the prompt\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, body), "--out", "bundle", "--follow",
                           "--pre", "pre")
    assert rc == 0, err
    shown = [line for line in out.splitlines() if line[:4] in ("a | ", "b | ", "b ! ")]
    assert shown == ["a | first", "b | from b", "b ! oops", "a | no newline"], out
    assert out.splitlines().count("from the prompt") == 1, out     # the prompt's own


def test_followed_lines_join_pieces_keep_commands_apart_and_escape_controls():
    from selena.cli.experiment import FollowedLines

    out = io.StringIO()
    lines = FollowedLines(out)
    lines("h1", "c1", 0, b"par")
    lines("h2", "c2", 0, b"other\nhalf")
    lines("h1", "c1", 0, b"tial\r\nnext\x1b[31m\n")
    lines("h1", "c1", 0, b"")                   # c1's stdout ended
    lines("h2", "c2", 1, b"err\n")
    lines("h2", "c2", 0, b"")                   # c2's: its last line, unended
    assert out.getvalue().splitlines() == [
        "h2 | other", "h1 | partial", "h1 | next\\x1b[31m", "h2 ! err", "h2 | half"]

# -- issue 28: ownership front ends, a bad --out, SIGTERM -----------------------------

PAIR = HOSTS + "topology.add_link(a, b)\n"


def test_deploy_and_run_replace_and_an_existing_experiment_is_one_line(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario = _file(tmp_path, PAIR)
    assert run_cli(capsys, "deploy", scenario, "--wait", "0")[0] == 0
    rc, _, err = run_cli(capsys, "deploy", scenario, "--wait", "0")
    assert rc == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "selena: error: experiment mine is already deployed on this host: "
        "`selena destroy mine`, or deploy with --replace / replace=True")
    rc, _, err = run_cli(capsys, "run", scenario, "--out", "bundle")
    assert rc == 1 and "experiment mine is already deployed" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "bundle").exists()
    assert run_cli(capsys, "deploy", scenario, "--wait", "0", "--replace")[0] == 0
    rc, _, err = run_cli(capsys, "run", scenario, "--out", "bundle", "--replace")
    assert rc == 0, err
    assert fake_xen.domains == {}


def test_status_names_each_experiments_nodes_domains_and_the_run_holding_it(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    """status gave counts only; which domain is which node, and whether a
    live run holds the experiment (destroy and clean ask --force then),
    were in the state file."""
    import fcntl

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: fake_backend)
    assert run_cli(capsys, "deploy", _file(tmp_path, PAIR), "--wait", "0")[0] == 0
    state = fake_backend.state("mine")
    domid = {node: state.domains[name] for node, name in state.nodes.items()}
    rc, out, _ = run_cli(capsys, "status")
    assert rc == 0
    assert out.splitlines() == [
        "mine: TDF 1, 2 guests, 1 bridges; no run holds it",
        f"  a (domain {domid['a']}), b (domain {domid['b']})"]
    # Another process's run holds the lock (an flock on <state>/mine.run, its pid inside).
    with open(tmp_path / "state" / "mine.run", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("4242")
        lock.flush()
        another_process = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                                       host_root=fake_xen.host_root)
        monkeypatch.setattr("selena.cli.experiment.get_backend",
                            lambda name, **kw: another_process)
        out = run_cli(capsys, "status")[1]
    assert out.splitlines()[0] == "mine: TDF 1, 2 guests, 1 bridges; its run is pid 4242"
    # Paused: the hypervisor's word (selena-tdf status), and exec refuses at once.
    assert run_cli(capsys, "pause", "mine")[0] == 0
    assert run_cli(capsys, "status")[1].splitlines()[0] == (
        "mine: TDF 1, 2 guests, 1 bridges; no run holds it; paused (`selena resume mine`)")
    rc, _, err = run_cli(capsys, "exec", "mine", "a", "true")
    assert rc == 1 and err.strip() == ("selena: error: experiment mine is paused: its guests "
                                       "run nothing until `selena resume mine`"), err
    assert run_cli(capsys, "resume", "mine")[0] == 0
    assert run_cli(capsys, "exec", "mine", "a", "true")[0] == 0
    assert run_cli(capsys, "destroy", "mine")[0] == 0
    assert run_cli(capsys, "status")[1] == "no experiments deployed\n"


def test_exec_runs_a_command_on_a_deployed_node_with_its_output_and_exit_status(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    """What `selena deploy` left running had no way in but a console."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: fake_backend)
    assert run_cli(capsys, "deploy", _file(tmp_path, PAIR), "--wait", "0")[0] == 0
    rc, out, err = run_cli(capsys, "exec", "mine", "b", "echo", "from b;", "echo oops >&2;",
                           "exit 3")
    assert (rc, out, err) == (3, "from b\n", "oops\n")
    assert run_cli(capsys, "exec", "mine", "a", "--", "echo", "-n", "a")[:2] == (0, "a")
    # A killed command: 128 + its signal, and the agent's reason in one line.
    rc, _, err = run_cli(capsys, "exec", "--timeout", "0.2", "mine", "a", "sleep 30")
    assert rc == 128 + 9 and err.strip().splitlines()[-1].startswith("a: killed"), err
    assert "timeout" in err
    # Bad input: one line naming it and the fix; nothing deployed is touched.
    domains = dict(fake_xen.domains)
    for argv, message in [
            (("exec", "mine", "c", "true"),
             "experiment mine has no node 'c'; its nodes: a, b"),
            (("exec", "nosuch", "a", "true"), "no experiment named 'nosuch' is deployed"),
            (("exec", "mine", "a"), "selena exec mine a: give the command to run")]:
        rc, _, err = run_cli(capsys, *argv)
        assert rc != 0 and message in err and len(err.strip().splitlines()) == 1, err
    assert fake_xen.domains == domains
    assert run_cli(capsys, "destroy", "mine")[0] == 0


def test_cp_copies_a_file_into_a_deployed_node_and_back_out(fake_xen, fake_backend, tmp_path,
                                                            capsys, monkeypatch):
    """A script of the researcher's own into a guest of what `selena deploy`
    left running, and its output back out (the fake Dom0's guests run on
    this host, so the guest paths are under tmp_path)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: fake_backend)
    assert run_cli(capsys, "deploy", _file(tmp_path, PAIR), "--wait", "0")[0] == 0
    (tmp_path / "app.sh").write_text("#!/bin/sh\necho app says $1\n")
    guest = tmp_path / "guest"
    rc, out, err = run_cli(capsys, "cp", "mine", "app.sh", f"a:{guest}/opt/", "--mode", "750")
    assert rc == 0, err
    assert out.startswith(f"app.sh -> a:{guest}/opt/app.sh: 27 bytes, sha256 "), out
    assert (guest / "opt/app.sh").stat().st_mode & 0o777 == 0o750
    assert run_cli(capsys, "exec", "mine", "a", f"{guest}/opt/app.sh hi > {guest}/said")[0] == 0
    rc, out, err = run_cli(capsys, "cp", "mine", f"b:{guest}/said", "results/said.txt")
    assert rc == 0 and out.startswith(f"b:{guest}/said -> results/said.txt: 12 bytes"), err
    assert (tmp_path / "results/said.txt").read_text() == "app says hi\n"
    for argv, message in [
            (("cp", "mine", "app.sh", "here"), "write exactly one side as NODE:/PATH"),
            (("cp", "mine", "a:/x", "b:/y"), "write exactly one side as NODE:/PATH"),
            (("cp", "mine", "app.sh", "c:/tmp/x"), "experiment mine has no node 'c'"),
            (("cp", "mine", "nothere", "a:/tmp/x"), "put nothere: no such file"),
            (("cp", "mine", f"a:{guest}/none", "x"), f"get a:{guest}/none -> x: reading it "
                                                     "exited 1: cat:")]:
        rc, _, err = run_cli(capsys, *argv)
        assert rc != 0 and message in err and len(err.strip().splitlines()) == 1, err
    rc, _, err = run_cli(capsys, "cp", "mine", "app.sh", "a:/tmp/x", "--mode", "999")
    assert rc == 2 and "'999' is not a permission mode in octal (e.g. 755)" in err, err
    assert run_cli(capsys, "destroy", "mine")[0] == 0


def test_exec_output_is_written_byte_for_byte(fake_xen, fake_backend, tmp_path, monkeypatch,
                                              capfdbinary):
    from selena.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: fake_backend)
    assert main(["deploy", _file(tmp_path, PAIR), "--wait", "0"]) == 0
    capfdbinary.readouterr()
    assert main(["exec", "mine", "a", "printf '\\001x\\377'"]) == 0
    assert capfdbinary.readouterr().out == b"\x01x\xff"
    assert main(["destroy", "mine"]) == 0


def test_exec_shows_the_output_as_it_comes(fake_xen, fake_backend, tmp_path, capsys,
                                           monkeypatch):
    """As `docker exec` does: a line the command wrote is out before the
    command ends, not with its result."""
    import time

    from selena.attach import exec_command

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: fake_backend)
    assert run_cli(capsys, "deploy", _file(tmp_path, PAIR), "--wait", "0")[0] == 0
    heard: list[tuple[float, int, bytes]] = []
    result = exec_command(fake_backend, "mine", "a", "echo first; sleep 1.5; echo late >&2",
                          on_output=lambda stream, data: heard.append(
                              (time.monotonic(), stream, data)))
    ended = time.monotonic()
    assert [(stream, data) for _, stream, data in heard] == [(0, b"first\n"), (1, b"late\n")]
    assert ended - heard[0][0] >= 1.2, heard
    assert (result.stdout, result.stderr) == (b"first\n", b"late\n")
    assert run_cli(capsys, "destroy", "mine")[0] == 0

def test_exec_interrupted_ends_its_command_in_the_guest(fake_xen, fake_backend, tmp_path,
                                                        capsys, monkeypatch):
    """Ctrl-C at `selena exec` must not leave the command running in the guest."""
    from selena.attach import exec_command
    from selena.control.channel import Controller

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: fake_backend)
    assert run_cli(capsys, "deploy", _file(tmp_path, PAIR), "--wait", "0")[0] == 0
    waited = Controller.wait
    results = []

    def interrupted_once(self, handle, timeout=None):
        if not results:
            results.append(None)
            raise KeyboardInterrupt
        results.append(waited(self, handle, timeout))
        return results[-1]

    monkeypatch.setattr(Controller, "wait", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        exec_command(fake_backend, "mine", "a", "sleep 30")
    assert [(r.state, r.signal) for r in results[1:]] == [("killed", 15)]
    assert run_cli(capsys, "destroy", "mine")[0] == 0


def test_exec_runs_beside_the_run_that_owns_the_experiment(fake_xen, fake_backend, tmp_path):
    """Its channel's commands are no concern of the run's channel, and
    the other way round."""
    from selena.attach import exec_command
    from selena.experiment import Experiment
    from selena.model import Topology

    topology = Topology("mine")
    a = topology.add_host("a", ip="10.0.0.1/24")
    b = topology.add_host("b", ip="10.0.0.2/24")
    topology.add_link(a, b)
    with Experiment(topology, backend=fake_backend, templates=None,
                    out=tmp_path / "bundle") as exp:
        running = exp.start("a", "sleep 0.5; echo the run")
        beside = exec_command(fake_backend, "mine", "a", "echo beside")
        assert (beside.state, beside.stdout) == ("exited", b"beside\n")
        assert exp.wait(running).stdout == b"the run\n"
    assert fake_xen.domains == {}


class OwnershipBackend:
    """What clean and destroy are asked, and the progress lines they give."""

    def __init__(self):
        self.asked: list[tuple] = []

    def clean(self, force=False, progress=None):
        self.asked.append(("clean", force))
        if not force and progress:
            progress("skipped experiment busy: its selena run (pid 4242) is alive; "
                     "--force removes it")
        return ["selena-busy-h1", "selena-busy-br0"] if force else []

    def destroy(self, experiment, pool=False, force=False):
        self.asked.append(("destroy", experiment, pool, force))


def test_clean_and_destroy_force(capsys, monkeypatch):
    backend = OwnershipBackend()
    monkeypatch.setattr("selena.cli.experiment.get_backend", lambda name, **kw: backend)
    rc, out, err = run_cli(capsys, "clean")
    assert rc == 0 and "removed: nothing" in out
    assert "skipped experiment busy: its selena run (pid 4242) is alive" in err
    rc, out, _ = run_cli(capsys, "clean", "--force")
    assert rc == 0 and "removed: selena-busy-h1, selena-busy-br0" in out
    assert run_cli(capsys, "destroy", "busy", "--force")[0] == 0
    assert run_cli(capsys, "destroy", "busy")[0] == 0
    assert backend.asked == [("clean", False), ("clean", True), ("destroy", "busy", False, True),
                             ("destroy", "busy", False, False)]


def test_run_with_an_out_under_a_file_is_refused_before_deploying(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").write_text("a file, not a directory")
    rc, _, err = run_cli(capsys, "run", _file(tmp_path, PAIR), "--out", "results/run1")
    assert rc == 1 and "Traceback" not in err
    assert ("selena: error: results directory results/run1 is under "
            f"{tmp_path / 'results'}, a regular file; choose another --out") in err
    assert not any(c[:2] == ("xl", "create") for c in fake_xen.calls)


@pytest.fixture
def sentinel_sigterm():
    """A Python SIGTERM handler while the test runs: code that does not
    handle SIGTERM then fails the test instead of killing pytest."""
    def refuse(signum, frame):
        raise RuntimeError("SIGTERM reached the sentinel handler")

    previous = signal.signal(signal.SIGTERM, refuse)
    yield refuse
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_during_run_tears_down_and_records_it(fake_xen, fake_backend, tmp_path, capsys,
                                                      monkeypatch, sentinel_sigterm):
    monkeypatch.chdir(tmp_path)
    body = (PAIR + "import os, signal\n\n"
            "def run(exp):\n"
            "    exp.cmd('a', 'echo one')\n"
            "    exp.start('b', 'sleep 600')\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    exp.sleep(600)\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, body), "--out", "bundle")
    assert rc == 128 + signal.SIGTERM, err
    assert "selena: interrupted by SIGTERM" in err and "Traceback" not in err
    meta = json.loads((tmp_path / "bundle/meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["error"]["signal"] == "SIGTERM"
    assert [c["state"] for c in meta["commands"]] == ["exited", "killed"]
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert signal.getsignal(signal.SIGTERM) is sentinel_sigterm


# -- issue 30: the selena> prompt of `selena run` --------------------------------------

def _stdin(tmp_path: Path, monkeypatch, text: str) -> None:
    """A real file as stdin (pytest's own has no file descriptor: no prompt)."""
    path = tmp_path / "stdin.txt"
    path.write_text(text)
    handle = path.open()
    monkeypatch.setattr("sys.stdin", handle)


def _fake_ping(tmp_path: Path, monkeypatch) -> None:
    """The fake guests run commands on this host: a ping that always answers."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ping").write_text("#!/bin/sh\necho \"pinged $*\"\n")
    (bin_dir / "ping").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")


def test_run_of_a_topology_with_nothing_to_run_opens_the_prompt_on_piped_stdin(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fake_ping(tmp_path, monkeypatch)
    _stdin(tmp_path, monkeypatch, "nodes\npingall\na echo b\nlink a b down\nlinks\n"
                                  "link a b up\nbogus\npy exp.tdf\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, PAIR), "--out", "bundle")
    assert rc == 0, err
    assert "available nodes are: \na b\n" in out
    assert "*** Results: 0% dropped (2/2 received)" in out
    assert "\n10.0.0.2\n" in out                     # `a echo b`: b's address
    assert "a-eth0<->b-eth0 (DOWN DOWN)" in out
    assert "*** unknown command 'bogus': try help" in err and "Traceback" not in err
    assert "\n1.0\n" in out
    # Down and up in the link's Dom0 bridge: both ports stop receiving and
    # forwarding, then both start again; no vif itself is taken down.
    port_flags = [c[3:] for c in fake_xen.calls if c[:2] == ("ovs-ofctl", "mod-port")]
    downs = [f for f in port_flags if f[1].startswith("no-")]
    ups = [f for f in port_flags if f[1] in ("receive", "forward")]
    assert len(downs) == 4 and sorted(downs) == sorted((v, "no-" + f) for v, f in ups)
    assert not [c for c in fake_xen.calls if c[:3] == ("ip", "link", "set") and c[-1] == "down"]
    # End of input ended the run as any other: bundle, then teardown.
    meta = json.loads((tmp_path / "bundle/meta.json").read_text())
    assert meta["status"] == "ok"
    assert [c["command"].split(";")[0] for c in meta["commands"]] == [
        "for ip in 10.0.0.2", "for ip in 10.0.0.1", "echo 10.0.0.2"]
    assert fake_xen.domains == {} and fake_xen.bridges == {}


def test_run_opens_no_prompt_with_a_test_and_with_cli_after_the_scenario(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _fake_ping(tmp_path, monkeypatch)
    _stdin(tmp_path, monkeypatch, "a echo from-the-prompt\nexit\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, PAIR), "--test", "pingall",
                           "--out", "bundle")
    assert rc == 0, err
    # mn's lines, its header first (as the prompt's pingall prints them).
    assert "*** Ping: testing ping reachability\na -> b\nb -> a\n" \
        "*** Results: 0% dropped (2/2 received)\n" in out, out
    assert "from-the-prompt" not in out
    body = PAIR + "\ndef run(exp):\n    exp.cmd('a', 'echo from-the-scenario')\n"
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, body), "--cli", "--out", "bundle2")
    assert rc == 0, err
    commands = [c["command"] for c in
                json.loads((tmp_path / "bundle2/meta.json").read_text())["commands"]]
    assert commands == ["echo from-the-scenario", "echo from-the-prompt"]
    assert fake_xen.domains == {}


def test_run_takes_mns_test_all_cli_build_and_several_tests_in_order(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    """mn --test all (pingall, then iperf), cli (the prompt), build and none
    (nothing), and several --test in the order given: all but pingall and
    the rest were refused by --test's choices."""
    monkeypatch.chdir(tmp_path)
    _fake_ping(tmp_path, monkeypatch)
    (tmp_path / "bin" / "iperf3").write_text(FAKE_IPERF3)
    (tmp_path / "bin" / "iperf3").chmod(0o755)
    _stdin(tmp_path, monkeypatch, "a echo from-the-prompt\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, PAIR), "--test", "pingpair",
                           "--test", "all", "--test", "cli", "--out", "bundle")
    assert rc == 0, err
    assert "--test all: a and b use the tools-host template (iperf3)" in err
    assert out.index("*** Results: 0% dropped (2/2 received)") < \
        out.index("*** Results: 0% dropped (2/2 received)", out.index("Results") + 1) < \
        out.index("*** Results: ['9.41 Mbits/sec', '9.87 Mbits/sec']")
    commands = [c["command"].split(";")[0] for c in
                json.loads((tmp_path / "bundle/meta.json").read_text())["commands"]]
    assert commands[-1] == "echo from-the-prompt"            # --test cli: the prompt
    assert commands[:4] == ["for ip in 10.0.0.2", "for ip in 10.0.0.1",    # pingpair
                            "for ip in 10.0.0.2", "for ip in 10.0.0.1"]    # all: pingall
    metrics = json.loads((tmp_path / "bundle/metrics.json").read_text())
    assert {"pingpair_received_pct", "pingall_received_pct", "iperf_received_mbit"} <= \
        set(metrics)
    for quiet in ("build", "none"):
        rc, out, err = run_cli(capsys, "run", _file(tmp_path, PAIR), "--test", quiet,
                               "--out", quiet)
        assert rc == 0, err
        assert json.loads((tmp_path / quiet / "meta.json").read_text())["commands"] == []
    assert fake_xen.domains == {}


def test_run_takes_mns_pre_and_post_prompt_scripts_in_mns_order(
        fake_xen, fake_backend, tmp_path, capsys, monkeypatch):
    """mn --pre FILE and --post FILE: prompt commands before --test and
    after the scenario and the prompt; a line of neither command nor node
    is refused before anything is deployed, as is a file that is not there."""
    monkeypatch.chdir(tmp_path)
    _fake_ping(tmp_path, monkeypatch)
    _stdin(tmp_path, monkeypatch, "a echo from-the-prompt\n")
    (tmp_path / "pre").write_text("# before\na echo from-pre\nbogus-free line? no\n")
    (tmp_path / "post").write_text("b echo from-post\n")
    body = PAIR + "\ndef run(exp):\n    exp.cmd('a', 'echo from-the-scenario')\n"
    scenario = _file(tmp_path, body)
    rc, out, err = run_cli(capsys, "run", scenario, "--pre", "pre", "--cli", "--out", "bad")
    assert rc != 0
    assert "--pre pre:3: 'bogus-free' is neither a prompt command nor a node (commands: " \
        in err and "Traceback" not in err
    rc, out, err = run_cli(capsys, "validate", scenario, "--post", "nowhere")
    assert rc != 0 and "cannot read nowhere: No such file or directory" in err
    assert fake_xen.calls == [] and not (tmp_path / "bad").exists()
    (tmp_path / "pre").write_text("# before\na echo from-pre\nnodes\n")
    rc, out, err = run_cli(capsys, "run", scenario, "--pre", "pre", "--post", "post",
                           "--test", "pingpair", "--cli", "--out", "bundle")
    assert rc == 0, err
    assert "available nodes are: \na b\n" in out
    commands = [c["command"].split(";")[0] for c in
                json.loads((tmp_path / "bundle/meta.json").read_text())["commands"]]
    assert commands == ["echo from-pre", "for ip in 10.0.0.2", "for ip in 10.0.0.1",
                        "echo from-the-scenario", "echo from-the-prompt", "echo from-post"]
    assert fake_xen.domains == {}


FAKE_IPERF3 = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/iperf3.args"
case "$*" in
  *-c*) echo '{"end": {"sum_received": {"bits_per_second": 9410000},'
        echo '         "sum_sent": {"bits_per_second": 9870000}}}' ;;
  *) echo '{}' ;;
esac
"""


def test_run_takes_mns_pingpair_iperf_and_iperfudp_tests(fake_xen, fake_backend, tmp_path, capsys,
                                                monkeypatch):
    """mn's walkthrough runs `mn --test pingpair` and `mn --test iperf`:
    refused by --test's choices (pingall, none). iperf's two hosts need
    iperf3: on the default tiny-host they get tools-host, said in a line."""
    monkeypatch.chdir(tmp_path)
    _fake_ping(tmp_path, monkeypatch)
    (tmp_path / "bin" / "iperf3").write_text(FAKE_IPERF3)
    (tmp_path / "bin" / "iperf3").chmod(0o755)
    three = (HOSTS + "c = topology.add_host('c', ip='10.0.0.3/24')\n"
             "topology.add_link(a, b)\ntopology.add_link(b, c)\n")
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, three), "--test", "pingpair",
                           "--out", "pair")
    assert rc == 0, err
    assert [line.strip() for line in out.splitlines() if " -> " in line] == ["a -> b", "b -> a"]
    assert "*** Results: 0% dropped (2/2 received)" in out
    metrics = json.loads((tmp_path / "pair/metrics.json").read_text())
    assert metrics["pingpair_received_pct"]["median"] == 100.0
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, three), "--test", "iperf",
                           "--out", "iperf")
    assert rc == 0, err
    assert "--test iperf: a and c use the tools-host template (iperf3)" in err
    assert "*** Iperf: testing TCP bandwidth between a and c" in out
    assert "*** Results: ['9.41 Mbits/sec', '9.87 Mbits/sec']" in out
    metrics = json.loads((tmp_path / "iperf/metrics.json").read_text())
    assert metrics["iperf_received_mbit"]["median"] == pytest.approx(9.41)
    assert fake_xen.domains == {}
    # What the run deployed, as plan shows it: a and c on tools-host (64 MB), b as it was.
    rc, out, err = run_cli(capsys, "plan", _file(tmp_path, three), "--test", "iperf")
    assert rc == 0, err
    guests = re.findall(r'name = "selena-mine-(\w)".*?kernel = "[^"]*/templates/([\w-]+)/'
                        r'vmlinuz".*?memory = (\d+)', out, re.S)
    assert sorted(guests) == [("a", "tools-host", "64"), ("b", "tiny-host", "32"),
                              ("c", "tools-host", "64")]
    # mn --test iperfudp: UDP at Mininet's 10M, the bandwidth first in the results.
    (tmp_path / "bin" / "iperf3.args").unlink()
    rc, out, err = run_cli(capsys, "run", _file(tmp_path, three), "--test", "iperfudp",
                           "--out", "udp")
    assert rc == 0, err
    assert "--test iperfudp: a and c use the tools-host template (iperf3)" in err
    assert "*** Iperf: testing UDP bandwidth between a and c" in out
    assert "*** Results: ['10M', '9.41 Mbits/sec', '9.87 Mbits/sec']" in out
    # (The server and the client run side by side: either may come first.)
    assert sorted((tmp_path / "bin" / "iperf3.args").read_text().splitlines()) == [
        "-c 10.0.0.3 -t 5 -J -u -b 10000000", "-s -1 -J"]
    metrics = json.loads((tmp_path / "udp/metrics.json").read_text())
    assert metrics["iperfudp_received_mbit"]["median"] == pytest.approx(9.41)
    assert fake_xen.domains == {}


@pytest.mark.parametrize("verb", ["run", "advise"])
def test_topo_help_states_the_switch_port_limit(capsys, verb):
    rc, out, _ = run_cli(capsys, verb, "--help")
    assert rc == 0
    assert "A switch takes at most 40 ports (a Xen guest's limit" in " ".join(out.split())


def test_topo_over_the_port_limit_is_one_line_naming_it(capsys):
    rc, _, err = run_cli(capsys, "validate", "--topo", "star,5000")
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 2, lines          # the count, then the one problem
    # named by the spec the user wrote (not by selena's own script's line)
    assert lines[1].strip() == (
        "--topo star,5000: node s1: 5000 interfaces on links; a Xen guest with 1 vCPU "
        "takes at most 40 (Xenstore's 1000 entries and 64 grant frames per domain): "
        "use several switches, e.g. a tree (--topo tree,DEPTH,FANOUT)")


def test_plan_shows_a_split_bridge_setup_as_its_commands_in_order(capsys):
    rc, out, err = run_cli(capsys, "plan", "--topo", "single,40")
    assert rc == 0, err
    block = out[out.index("# switch s1, through its agent, 2 commands in order:"):]
    first, second = block.split("#   # next command\n")
    assert first.count("#   port ") == 40 and "add-br br0" in first
    assert second.splitlines()[:2] == ["#   set -e", "#   ip link set br0 up"]


def test_host_template_puts_every_default_host_of_a_topo_on_it(capsys):
    """`selena run --topo single,2` hosts are tiny-host, without iperf3 for
    the prompt's iperf, and no option chose another: --host-template does."""
    rc, out, err = run_cli(capsys, "plan", "--topo", "single,2", "--host-template", "tools-host")
    assert rc == 0, err
    guests = re.findall(r'name = "selena-single-(\w+)".*?/templates/([\w-]+)/vmlinuz', out, re.S)
    assert sorted(guests) == [("h1", "tools-host"), ("h2", "tools-host"), ("s1", "ovs-switch")]
    rc, _, err = run_cli(capsys, "validate", "--topo", "single,2", "--host-template", "Tools")
    assert rc == 2 and err.splitlines()[-1].endswith(
        "argument --host-template: 'Tools' is not a template name (lower-case letters, digits, "
        "'.', '_', '-'; e.g. tools-host)")


def test_mns_host_option_caps_every_host_without_a_cap_of_its_own(capsys, tmp_path):
    """`mn --topo single,2 --host cfs,cpu=0.25` was "unrecognized arguments":
    every host gets that share of the host's CPUs; a host with its own cap
    keeps it, and a bad spec is one line before anything is loaded."""
    rc, out, err = run_cli(capsys, "plan", "--topo", "single,2", "--host", "cfs,cpu=0.25")
    assert rc == 0, err
    # A cap for each host where the host's CPUs are known, else a line saying
    # why none is printed (off a Dom0); nothing for the switch.
    var = {name: v for v, name in re.findall(r"(D\d)=\$\(xl domid selena-single-(\w+)\)", out)}
    capped = {name for name in var
              if f'xl sched-credit2 -d "${var[name]}"' in out
              or f"node {name}: no CPU cap: cpu_share=0.25 is a share" in out}
    assert capped == {"h1", "h2"}, out
    scenario = tmp_path / "own.py"
    scenario.write_text(
        "from selena.model import Topology\n"
        "def build():\n"
        "    t = Topology('own')\n"
        "    h1 = t.add_host('h1', ip='10.0.0.1/24', cpu_time='real')\n"
        "    h2 = t.add_host('h2', ip='10.0.0.2/24', cpu_share=0.5)\n"
        "    h3 = t.add_host('h3', ip='10.0.0.3/24')\n"
        "    s1 = t.add_switch('s1')\n"
        "    for h in (h1, h2, h3):\n"
        "        t.add_link(h, s1)\n"
        "    return t\n")
    from selena.cli import build_parser
    from selena.cli.args import scenario_of

    args = build_parser().parse_args(["validate", str(scenario), "--host", "cfs,cpu=0.1"])
    nodes = scenario_of(args).topology.nodes
    assert [(nodes[h].cpu_time, nodes[h].cpu_share) for h in ("h1", "h2", "h3")] == \
        [("real", None), ("dilated", 0.5), ("dilated", 0.1)]
    assert nodes["s1"].cpu_share is None
    rc, _, err = run_cli(capsys, "validate", "--topo", "single,2", "--host", "rt,cpu=0.5")
    assert rc == 1 and err.strip().endswith(
        "--host 'rt,cpu=0.5': rt (the real-time scheduler) has no Xen counterpart here; use "
        "cfs (a credit2 cap, quota-like as cfs's)"), err


@pytest.mark.parametrize("spec,message", [
    ("cfs,cpu=2", "cpu=2 is not a share of the host's CPUs: give a number above 0 and at "
                  "most 1, or -1 for none"),
    ("cfs,cpu=nan", "cpu=nan is not a share"),
    ("cfs,cpu=half", "cpu=half is not a share"),
    ("cfs,cores=1", "'cores=1' is not cpu=SHARE"),
    # Mininet's parser would keep the last of two; one of them is a slip.
    ("cfs,cpu=0.5,cpu=0.1", "give cpu= once (--host cfs,cpu=SHARE)"),
    ("proc,cpu=0.5", "Mininet's proc hosts ignore cpu=; give cfs,cpu=0.5 to cap them"),
    ("cpu=0.5", "start with a host class, one of proc, cfs, rt (e.g. --host cfs,cpu=0.25)"),
])
def test_bad_host_specs_are_named(spec, message):
    from selena.specs import parse_host_spec

    with pytest.raises(ScenarioError) as info:
        parse_host_spec(spec)
    assert str(info.value).startswith(f"--host {spec!r}: ")
    assert message in str(info.value)


def test_host_specs_without_a_share_cap_nothing():
    from selena.specs import parse_host_spec

    assert [parse_host_spec(s) for s in ("proc", "cfs", "cfs,cpu=-1", "cfs,cpu=0.5")] == \
        [None, None, None, 0.5]


def test_mns_mac_and_arp_options_reach_the_plan(capsys):
    """`mn --mac --arp` were "unrecognized arguments"."""
    rc, out, err = run_cli(capsys, "plan", "--topo", "single,2", "--mac", "--arp")
    assert rc == 0, err
    assert "mac=00:00:00:00:00:01," in out and "mac=00:00:00:00:00:02," in out
    assert "arp 10.0.0.2 00:00:00:00:00:02" in out and "arp 10.0.0.1 00:00:00:00:00:01" in out
    rc, out, _ = run_cli(capsys, "plan", "--topo", "single,2")
    assert "mac=00:00:00:00:00:01," not in out and "arp 10.0.0.2" not in out


@pytest.mark.parametrize("argv,option", [
    (["run", "--topo", "single,3", "--mac", "--switch", "ovsk"], "--switch"),
    (["validate", "--topo", "single,3", "--controller=remote,ip=10.0.0.9"], "--controller"),
    (["run", "--topo", "linear,2", "-x"], "-x"),
    (["sweep", "s.py", "--tdf", "1,2", "--out", "o", "--nat"], "--nat"),
    (["-c"], "-c"),
    (["--clean"], "--clean"),
    (["run", "-c"], "-c"),
    (["run", "--topo", "single,2", "-v", "output"], "-v"),
    (["plan", "--topo", "single,2", "--verbosity=debug"], "--verbosity"),
    (["run", "--topo", "linear,2", "--wait"], "--wait"),
    (["run", "--topo", "linear,2", "--twait", "30"], "--twait"),
    (["validate", "--topo", "single,3", "--listenport", "6654"], "--listenport"),
    # run takes mn's --host; sweep does not: the scenario's cpu_share does it there.
    (["sweep", "s.py", "--tdf", "1,2", "--out", "o", "--host", "cfs,cpu=.5"], "--host"),
])
def test_mns_options_selena_does_not_take_are_one_line_saying_what_it_does(argv, option,
                                                                           capsys):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith(f"selena: error: {option} is mn's, not selena's: ") and \
        err.count("\n") == 1, err


def test_mns_option_names_elsewhere_are_left_to_their_verbs(capsys):
    rc, _, err = run_cli(capsys, "validate", "--topo", "single,2", "--param", "switch=1")
    assert "mn's" not in err
    # selena's own -v before the verb, deploy's (and validate's) --wait SECONDS.
    rc, _, err = run_cli(capsys, "-v", "validate", "--topo", "single,2", "--wait", "30")
    assert rc == 0 and "mn's" not in err, err
