"""The `selena>` prompt (selena/cli/interactive.py) on a fake running
experiment (tests/support/fake_session.py): every command, piped input,
one-line errors that never end the session, the end of input."""

from __future__ import annotations

import io
import json
import re
import time

import pytest
from fake_runner import FakeRunner
from fake_session import pingall_answer, running

from selena.backends.xl import XlBackend
from selena.cli import interactive
from selena.cli.interactive import Prompt
from selena.errors import ScenarioError
from selena.experiment import Experiment
from selena.model import Topology
from selena.session import Session
from selena.topologies import single


def answer(node: str, command: str) -> tuple[int, str]:
    looped = pingall_answer(command)
    if looped is not None:
        return 0, looped
    if command.startswith("ping"):
        return 0, "1 packets received\n"
    if command.startswith("iperf3 -c"):
        return 0, json.dumps({"end": {"sum_sent": {"bits_per_second": 9.87e6},
                                      "sum_received": {"bits_per_second": 9.41e6}}})
    if command == "false":
        return 1, ""
    return 0, f"{node}: {command}\n"


def session(topo=None, runner=None) -> Session:
    return Session(running(topo or single(2, tdf=10), answer), runner=runner)


def pipe(net: Session, text: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    Prompt(net, stdin=io.StringIO(text), stdout=out, stderr=err, tty=False).run()
    return out.getvalue(), err.getvalue()


def test_piped_lines_run_in_order_without_a_prompt_and_end_at_eof():
    net = session()
    out, err = pipe(net, "nodes\nnet\nlinks\ndump\n")
    assert err == ""
    assert "selena>" not in out
    assert out.splitlines() == [
        "available nodes are: ", "h1 h2 s1",
        "h1 h1-eth0:s1-eth0", "h2 h2-eth0:s1-eth1", "s1 s1-eth0:h1-eth0 s1-eth1:h2-eth0",
        "h1-eth0<->s1-eth0 (OK OK)", "h2-eth0<->s1-eth1 (OK OK)",
        "<Host h1: h1-eth0:10.0.0.1 domid=2 template=tiny-host>",
        "<Host h2: h2-eth0:10.0.0.2 domid=3 template=tiny-host>",
        "<Switch s1: s1-eth0:None,s1-eth1:None domid=1 template=ovs-switch>"]


def test_pingall_prints_mininets_lines():
    out, _ = pipe(session(), "pingall\n")
    assert out.splitlines() == ["*** Ping: testing ping reachability", "h1 -> h2", "h2 -> h1",
                                "*** Results: 0% dropped (2/2 received)"]


def test_node_commands_substitute_names_and_print_the_output():
    net = session()
    out, err = pipe(net, "h1 echo h2 s1\nh2 false\n")
    assert out == "h1: echo 10.0.0.2 s1\n"
    assert err == "*** h2: exited 1\n"
    assert [c[1] for c in net.exp.engine.commands] == ["start echo 10.0.0.2 s1",
                                                        "start false"]


def test_iperf_with_and_without_hosts():
    net = session()
    out, _ = pipe(net, "iperf h1 h2 2\niperf\n")
    assert out.splitlines() == [
        "*** Iperf: testing TCP bandwidth between h1 and h2",
        "*** Results: ['9.41 Mbits/sec', '9.87 Mbits/sec']"] * 2
    clients = [c[1] for c in net.exp.engine.commands if c[1].startswith("iperf3 -c")]
    assert clients == ["iperf3 -c 10.0.0.2 -t 2 -J", "iperf3 -c 10.0.0.2 -t 5 -J"]


def test_iperfudp_takes_mns_bandwidth_first_then_the_hosts():
    net = session()
    out, err = pipe(net, "iperfudp 5M h2 h1 2\niperfudp 20M\niperfudp\niperfudp 0 h1 h2\n"
                         "iperfudp 5M h1\n")
    assert out.splitlines() == [
        "*** Iperf: testing UDP bandwidth between h2 and h1",
        "*** Results: ['5M', '9.41 Mbits/sec', '9.87 Mbits/sec']",
        "*** Iperf: testing UDP bandwidth between h1 and h2",
        "*** Results: ['20M', '9.41 Mbits/sec', '9.87 Mbits/sec']"]
    assert err.splitlines() == [
        "*** iperfudp: want `iperfudp BW [CLIENT SERVER [SECONDS]]`, BW as 10M (bit/s)",
        "*** iperfudp: UDP bandwidth '0': want a rate above zero such as 10M (bit/s)",
        "*** iperfudp: want `iperfudp BW [CLIENT SERVER [SECONDS]]`"]
    clients = [c[1] for c in net.exp.engine.commands if c[1].startswith("iperf3 -c")]
    assert clients == ["iperf3 -c 10.0.0.1 -t 2 -J -u -b 5000000",
                       "iperf3 -c 10.0.0.2 -t 5 -J -u -b 20000000"]


def test_pingpair_intfs_and_ports_as_mn():
    net = session(single(3, tdf=10))
    out, err = pipe(net, "pingpair\nintfs\nports\nwait\n")
    assert err == ""
    assert out.splitlines() == [
        "*** Ping: testing ping reachability", "h1 -> h2", "h2 -> h1",
        "*** Results: 0% dropped (2/2 received)",
        "h1: h1-eth0", "h2: h2-eth0", "h3: h3-eth0", "s1: s1-eth0 s1-eth1 s1-eth2",
        # OpenFlow port = interface index + 1 (selena.openflow)
        "s1 s1-eth0:1 s1-eth1:2 s1-eth2:3",
        "*** every node is up: the run waited for each guest before the prompt"]
    loops = [c[0] for c in net.exp.engine.commands if c[1].startswith("start for ip")]
    assert sorted(loops) == ["h1", "h2"]


def test_pingallfull_and_pingpairfull_give_each_round_trip():
    def full(node, command):
        if command.startswith("for ip in ") and "out=$(ping" in command:
            ips = command[len("for ip in "):].split(";", 1)[0].split()
            return 0, "".join(f"{ip} 1 {20 + int(ip[-1]) / 10:.3f}\n" for ip in ips)
        return 0, ""
    net = Session(running(single(3, tdf=10), full))
    out, err = pipe(net, "pingallfull 2\npingpairfull\npingallfull soon\n")
    assert out.splitlines() == [
        "*** Ping: testing ping reachability",
        "h1 -> h2 h3", "h2 -> h1 h3", "h3 -> h1 h2",
        "*** Results: ",
        " h1->h2: 1/1, rtt min/avg/max/mdev 20.200/20.200/20.200/0.000 ms",
        " h1->h3: 1/1, rtt min/avg/max/mdev 20.300/20.300/20.300/0.000 ms",
        " h2->h1: 1/1, rtt min/avg/max/mdev 20.100/20.100/20.100/0.000 ms",
        " h2->h3: 1/1, rtt min/avg/max/mdev 20.300/20.300/20.300/0.000 ms",
        " h3->h1: 1/1, rtt min/avg/max/mdev 20.100/20.100/20.100/0.000 ms",
        " h3->h2: 1/1, rtt min/avg/max/mdev 20.200/20.200/20.200/0.000 ms",
        "*** Ping: testing ping reachability",
        "h1 -> h2", "h2 -> h1",
        "*** Results: ",
        " h1->h2: 1/1, rtt min/avg/max/mdev 20.200/20.200/20.200/0.000 ms",
        " h2->h1: 1/1, rtt min/avg/max/mdev 20.100/20.100/20.100/0.000 ms"]
    assert err == "*** pingallfull: 'soon' is not a number of seconds\n"
    assert "-W 2 $ip" in net.exp.engine.commands[0][1]


def test_dpctl_runs_ovs_ofctl_on_every_switchs_bridge_unsubstituted():
    net = session(single(2, tdf=10))
    out, err = pipe(net, "dpctl dump-flows h1\ndpctl\n")
    assert [c[:2] for c in net.exp.engine.commands] == [
        ("s1", "start ovs-ofctl dump-flows h1 br0")]
    assert out.splitlines() == ["*** s1 " + "-" * 72, "s1: ovs-ofctl dump-flows h1 br0"]
    assert err == "*** dpctl: want `dpctl COMMAND [ARG...]`, e.g. dpctl dump-flows\n"


def test_time_gives_a_commands_virtual_and_real_time():
    net = session()
    out, err = pipe(net, "time h1 true\ntime\n")
    lines = out.splitlines()
    assert lines[0] == "h1: true"
    assert re.fullmatch(r"\*\*\* Elapsed time: \d+\.\d{6} virtual secs \(\d+\.\d{6} real at "
                        r"TDF 10\)", lines[1]), lines
    assert err == "*** time: want `time COMMAND`, a prompt command\n"


def test_source_runs_a_files_commands_and_exit_in_it_ends_the_session(tmp_path):
    script = tmp_path / "cmds"
    script.write_text("# a comment\nh1 echo one\n\nnodez\nh2 echo two\n")
    looping = tmp_path / "loop"
    looping.write_text(f"h1 echo looped\nsource {looping}\n")
    ending = tmp_path / "end"
    ending.write_text("h1 echo last\nexit\nh1 echo never\n")
    net = session()
    out, err = pipe(net, f"source {script}\nsource {tmp_path}/none\nsource {tmp_path}\n"
                         f"source {looping}\nsource {ending}\nh2 echo after\n")
    assert out.splitlines() == ["h1: echo one", "h2: echo two", "h1: echo looped",
                                "h1: echo last"]
    assert err.splitlines() == [
        "*** unknown command 'nodez': try help",
        f"*** source: cannot read {tmp_path}/none: No such file or directory",
        f"*** source: cannot read {tmp_path}: Is a directory",
        f"*** source: {looping} is being read already (it sources itself)"]


def test_mns_commands_without_meaning_here_say_what_to_do_instead():
    net = session()
    out, err = pipe(net, "xterm h1\nnoecho h1 cat\ndetach h1\npx 1 + 1\n")
    assert out == "2\n"
    assert err.splitlines() == [
        "*** xterm is mn's, not selena's: no terminals: nodes are Xen guests; type `NODE "
        "COMMAND` here, run `selena exec EXPERIMENT NODE COMMAND` from another shell, or "
        "attach to a guest's console with `xl console selena-EXPERIMENT-NODE` in Dom0",
        "*** noecho is mn's, not selena's: guest commands run without a terminal: no "
        "interactive programs",
        "*** detach is mn's, not selena's: the topology is fixed for a run: `link A B down` "
        "takes a link down"]
    assert net.exp.engine.commands == []


def test_a_prompt_script_is_checked_line_by_line_before_anything_runs():
    nodes = {"h1", "h2", "s1"}
    interactive.check_script("# setup\npingall\n\nh1 ip addr\n  link h1 s1 down\n", "--pre f",
                             nodes)
    with pytest.raises(ScenarioError, match=r"^--pre f:2: 'pingal' is neither a prompt "
                                            r"command nor a node \(commands: cp, dpctl, dump, "):
        interactive.check_script("pingall\npingal\n", "--pre f", nodes)
    with pytest.raises(ScenarioError, match=r"^--post g:1: xterm is mn's, not selena's: "):
        interactive.check_script("xterm h1\n", "--post g", nodes)


def test_link_down_shows_in_links_and_goes_to_the_backend():
    net = session()
    out, err = pipe(net, "link h1 s1 down\nlinks\nlink s1 h1 up\nlinks\n")
    assert err == ""
    assert out.splitlines() == ["h1-eth0<->s1-eth0 (DOWN DOWN)", "h2-eth0<->s1-eth1 (OK OK)",
                                "h1-eth0<->s1-eth0 (OK OK)", "h2-eth0<->s1-eth1 (OK OK)"]
    assert [a[-1] for a in net.exp.backend.asked] == [False, True]


def test_node_crash_and_restart_go_to_the_experiment_with_one_line_errors():
    net = session()
    out, err = pipe(net, "node h1 crash\nnode h2 restart\nnode h9 crash\nnode h1 reboot\n"
                         "node h1\nnodes\n")
    assert out.splitlines() == ["h1 crashed", "available nodes are: ", "h1 h2 s1"]
    assert err.splitlines() == [
        "*** node h2 restart: the recording backend cannot restart a node (the xl backend can)",
        "*** no node named 'h9' in experiment single (have h1, h2, s1)",
        "*** node: 'node h1 reboot': want `node N crash`, `node N restart` or `node N "
        "cpu_share=0.25` (or none)",
        "*** node: want `node NODE crash`, `node NODE restart` or `node NODE cpu_share=0.25` "
        "(none lifts it)"]
    assert net.exp.backend.asked == [("crash", "h1")]
    assert [(e["target"], e["change"]) for e in net.exp.events] == [("node h1", "crash")]


def test_node_cpu_share_caps_and_lifts_through_the_experiment():
    net = session()
    out, err = pipe(net, "node h2 cpu_share=0.25\nnode h2 cpu_share=none\nnode h2 cpu_share=3\n")
    assert out.splitlines() == ["h2 cpu_share 0.25", "h2 cpu_share none"]
    assert err.splitlines() == [
        "*** node h2: cpu_share 3 is not a share of the host's CPUs: give more than 0 and at "
        "most 1 (0.25: a quarter of them), or none to lift it"]
    assert [a for a in net.exp.backend.asked if a[0] == "set_cpu_share"] == [
        ("set_cpu_share", "h2", 0.25), ("set_cpu_share", "h2", None)]
    assert [e["change"] for e in net.exp.events] == ["cpu_share=0.25", "cpu_share=none"]


def test_tdf_pause_and_resume():
    net = session()
    out, err = pipe(net, "tdf\ntdf 20\npause\nh1 true\nresume\ntdf 2.5\n")
    lines = out.splitlines()
    assert lines[:2] == ["TDF 10", "TDF 20"]
    assert lines[2].startswith("paused at virtual time ")
    assert lines[3].startswith("resumed at virtual time ")
    assert lines[4] == "TDF 2.5"
    assert err == "*** h1: the experiment is paused (resume first)\n"
    assert [a[0] for a in net.exp.backend.asked] == ["set_tdf", "freeze", "thaw", "set_tdf"]


def test_cp_puts_a_file_into_a_node_and_gets_one_out(monkeypatch):
    """The copy itself is selena.transfer's (tests/test_transfer.py); here
    the prompt's words reach exp.put and exp.get, and what they say."""
    from selena.transfer import Transfer

    net = session()
    asked: list[tuple] = []

    def put(node, src, dest):
        asked.append(("put", node, src, dest))
        return Transfer(node, "put", dest + "app.py", src, 120, "0" * 64)

    def get(node, src, dest):
        asked.append(("get", node, src, dest))
        return Transfer(node, "get", src, dest, 7, "0" * 64)

    monkeypatch.setattr(net.exp, "put", put)
    monkeypatch.setattr(net.exp, "get", get)
    out, err = pipe(net, "cp app.py h1:/root/\ncp 'h2:/tmp/my log' out.txt\ncp a b\n"
                         "cp h1:/a h2:/b\ncp 'unclosed\n")
    assert out.splitlines() == ["app.py -> h1:/root/app.py: 120 bytes",
                                "h2:/tmp/my log -> out.txt: 7 bytes"]
    assert asked == [("put", "h1", "app.py", "/root/"), ("get", "h2", "/tmp/my log", "out.txt")]
    want = "*** cp: want `cp SRC NODE:/PATH` (into a node) or `cp NODE:/PATH DEST` (out of one)"
    assert err.splitlines() == [want, want, "*** cp: No closing quotation"]
    # Paused, a copy would wait for the resume: refused, as a node command is.
    asked.clear()
    out, err = pipe(net, "pause\ncp app.py h1:/root/\ncp h9:/x y\nresume\n")
    assert err.splitlines() == ["*** cp to h1: the experiment is paused (resume first)",
                                "*** no node named 'h9' in experiment single (have h1, h2, s1)"] \
        and asked == []


def test_sh_runs_in_dom0_through_the_runner():
    runner = FakeRunner()
    runner.respond(["sh", "-c", "xl list"], 0, "Name ID\n")
    runner.respond(["sh", "-c", "exit 3"], 3, "", "bad\n")
    out, err = pipe(session(runner=runner), "sh xl list\nsh exit 3\n")
    assert out == "Name ID\n"
    assert err == "bad\n*** sh: exit status 3\n"
    assert runner.calls == [("sh", "-c", "xl list"), ("sh", "-c", "exit 3")]


def test_py_sees_the_experiment_the_session_and_the_nodes():
    out, err = pipe(session(), "py h1.IP()\npy net.topology.name\npy session.nodes\n"
                               "py x = 1\npy None\n")
    assert err == ""
    assert out.splitlines() == ["'10.0.0.1'", "'single'", "['h1', 'h2', 's1']"]


def test_errors_are_one_line_and_the_session_goes_on():
    net = session()
    script = ("frobnicate\nh9 true\nlink h1 h2 down\nlink h1\niperf h1\ntdf fast\n"
              "pingall soon\npingall inf\niperf h1 h2 -1\npy 1/0\npy (\nsh\nh1\npy exit()\n"
              "nodes\n")
    out, err = pipe(net, script)
    assert err.splitlines() == [
        "*** unknown command 'frobnicate': try help",
        "*** unknown command 'h9': try help",
        "*** no link between h1 and h2 in single (h1 is linked to s1)",
        "*** link: want `link NODE1 NODE2 up|down` or `link NODE1 NODE2 NAME=VALUE...` "
        "(rate, delay, jitter, loss, queue)",
        "*** iperf: want `iperf CLIENT SERVER [SECONDS]`",
        "*** tdf: TDF 'fast' is not a number",
        "*** pingall: 'soon' is not a number of seconds",
        # inf was math.ceil's OverflowError, from the session
        "*** pingall: 'inf': want a finite number of seconds above zero",
        "*** iperf: '-1': want a finite number of seconds above zero",
        "*** ZeroDivisionError: division by zero",
        "*** SyntaxError: '(' was never closed (<py>, line 1)",
        "*** sh: want `sh COMMAND`",
        "*** h1: want `h1 COMMAND`",
        "*** to end the session, type exit (or Ctrl-D)"]
    assert "Traceback" not in err
    assert out.splitlines()[-1] == "h1 h2 s1"       # the last line still ran


def test_exit_ends_the_session_before_the_end_of_input():
    out, _ = pipe(session(), "nodes\nexit\nnodes\n")
    assert out.count("available nodes") == 1
    out, _ = pipe(session(), "quit\nnodes\n")
    assert out == ""


def test_help_lists_every_command():
    out, _ = pipe(session(), "help\n")
    for word in ("nodes", "net", "links", "dump", "pingall", "iperf", "link A B up|down",
                 "tdf N", "pause", "resume", "sh COMMAND", "py EXPR", "exit"):
        assert word in out
    # Every command the prompt has, each at the start of a line or after a `|`.
    listed = set(re.findall(r"^  (\w+)|\| (\w+)", out, re.M))
    listed_words = {w for pair in listed for w in pair if w}
    commands = {name[3:] for name in dir(Prompt) if name.startswith("do_")} - {"EOF"}
    assert commands - listed_words == set()


def test_completion_of_commands_and_node_names():
    prompt = Prompt(session(), stdin=io.StringIO(""), stdout=io.StringIO(), tty=False)
    assert prompt.completenames("h") == ["h1", "h2", "help"]
    assert prompt.completenames("p") == ["pause", "pingall", "pingallfull", "pingpair",
                                         "pingpairfull", "ports", "px", "py"]
    assert prompt.completedefault("s", "h1 ping s", 8, 9) == ["s1"]
    assert prompt.complete_link("", "link h1 ", 8, 8) == ["h1", "h2", "s1"]
    assert prompt.complete_link("d", "link h1 s1 d", 11, 12) == ["down"]


class _Interrupting(io.StringIO):
    """Input whose second line is a Ctrl-C."""

    def __init__(self, text: str):
        super().__init__(text)
        self.lines = 0

    def readline(self, *args):
        self.lines += 1
        if self.lines == 2:
            raise KeyboardInterrupt
        return super().readline(*args)


def test_ctrl_c_cancels_the_line_not_the_session():
    out = io.StringIO()
    Prompt(session(), stdin=_Interrupting("nodes\nnodes\n"), stdout=out,
           stderr=io.StringIO(), tty=False).run()
    assert out.getvalue().count("available nodes") == 2
    assert "\nInterrupt\n" in out.getvalue()


def test_a_terminal_gets_a_prompt_and_readline_history(tmp_path, monkeypatch):
    monkeypatch.setattr(interactive, "HISTORY", tmp_path / "history")
    saved = []

    class FakeReadline:
        def set_history_length(self, n):
            pass

        def read_history_file(self, path):
            raise FileNotFoundError(path)

        def write_history_file(self, path):
            saved.append(path)

    monkeypatch.setitem(__import__("sys").modules, "readline", FakeReadline())
    prompt = Prompt(session(), stdin=io.StringIO("nodes\n"), stdout=io.StringIO(), tty=True)
    assert prompt.prompt == "selena> " and prompt.use_rawinput
    prompt.use_rawinput = False     # input() would read the real terminal
    prompt.run()
    assert saved == [tmp_path / "history"]
    assert "selena> " in prompt.stdout.getvalue()


@pytest.mark.parametrize("line", ["help", "nodes"])
def test_nothing_is_written_to_the_history_file_when_piped(tmp_path, monkeypatch, line):
    monkeypatch.setattr(interactive, "HISTORY", tmp_path / "history")
    pipe(session(), line + "\n")
    assert not (tmp_path / "history").exists()


class Timed(io.StringIO):
    """A terminal that notes when each piece was written."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.writes.append((time.monotonic(), text))
        return super().write(text)


def test_a_node_commands_output_is_shown_as_it_comes_through_the_real_channel(
        fake_xen, tmp_path):
    """As mn's prompt shows a ping's replies one by one: the first line is on
    the terminal while the command still runs (the fake Dom0's xenstored
    and the real agent: output chunks reach Dom0 as they are written); a
    character split between two writes comes out whole; a last line
    without a newline gets one."""
    topo = Topology("stream", tdf=2)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    out, err = Timed(), io.StringIO()
    with Experiment(topo, backend=backend, templates=None, monitor=False,
                    ready_timeout=20) as exp:
        line = ("h1 sh -c 'echo first; sleep 1.5; printf \"\\342\\202\"; sleep 0.3; "
                "printf \"\\254 last\"; echo oops >&2'\n")
        Prompt(Session(exp), stdin=io.StringIO(line), stdout=out, stderr=err,
               tty=False).run()
    assert out.getvalue() == "first\n€ last\n" and err.getvalue() == "oops\n"
    at = {text: t for t, text in out.writes}
    assert at["\n"] - at["first\n"] >= 1.2, out.writes       # shown before the end


def test_ctrl_c_on_a_node_command_shows_its_last_words_then_ends_it(fake_xen, tmp_path,
                                                                      monkeypatch):
    """As in mn, Ctrl-C on `h1 ping h2` sends SIGINT and the ping's
    statistics are still shown: the command gets a few seconds to end."""
    topo = Topology("lastwords", tdf=2)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    heard: list[bytes] = []
    with Experiment(topo, backend=backend, templates=None, monitor=False,
                    ready_timeout=20) as exp:
        net = Session(exp)
        real_wait = exp.wait

        def ctrl_c_after_a_second(handle, check=False):
            time.sleep(1.0)
            raise KeyboardInterrupt
        monkeypatch.setattr(exp, "wait", ctrl_c_after_a_second)
        with pytest.raises(KeyboardInterrupt):
            net.cmd("h1", "trap 'echo statistics; exit 0' INT; echo started; sleep 30 & wait",
                    on_output=lambda stream, data: heard.append(data))
        monkeypatch.setattr(exp, "wait", real_wait)
    assert b"".join(heard) == b"started\nstatistics\n"
