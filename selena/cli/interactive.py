"""The `selena>` prompt of `selena run`, like Mininet's `mn` CLI: parses a
line, calls selena.session.Session, prints. Every error is one line and the
session goes on; only `exit`, `quit` or the end of input (Ctrl-D) end it,
and then `selena run` ends the run as any other (bundle, teardown).

On a terminal: a prompt, readline history in ~/.selena_history and
completion of commands and node names; Ctrl-C cancels the line or the
command running, as in mn. Piped input (scripts, tests): lines read one by
one, no prompt, the end of input ends the session.
"""

from __future__ import annotations

import cmd
import math
import shlex
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import IO, Any

from selena import units
from selena.attach import guest_side
from selena.errors import ScenarioError, SelenaError, UnitError
from selena.experiment import SignalInterrupt
from selena.model.cpus import checked_share
from selena.relay import TextPieces
from selena.session import PING_HEADER, Session, udp_rate

HISTORY = Path("~/.selena_history")
HISTORY_LINES = 1000

HELP = """\
Commands (node names in a command stand for their first IP address, as in mn):
  nodes                   the nodes
  net                     each node's interfaces and what they connect to
  links                   every link and its state (OK or DOWN)
  dump                    each node's addresses, Xen domain id and template
  intfs | ports           each node's interfaces | each switch's OpenFlow port numbers
  pingall [SECONDS]       every host pings every other once (mn's pingall)
  pingpair                the first two hosts ping each other
  pingallfull | pingpairfull   the same, with each round trip (virtual ms)
  iperf [CLIENT SERVER [SECONDS]]   TCP throughput with iperf3 (tools-host guests)
  iperfudp BW [CLIENT SERVER [SECONDS]]   UDP at BW (10M: bit/s), received and sent
  NODE COMMAND...         run a shell command in a node: h1 ping -c 1 h2
  link A B up|down        bring the link(s) between nodes A and B up or down
  link A B NAME=VALUE...  their rate, delay, jitter, loss or queue: delay=20ms
  node N crash|restart    destroy node N's guest, or boot it again as deployed
  node N cpu_share=S      cap node N at share S of the host's CPUs (none: lift)
  tdf N                   change the time dilation factor of the running experiment
  pause | resume          freeze and restart every guest's virtual time
  dpctl ARGS...           ovs-ofctl ARGS on every switch's bridge: dpctl dump-flows
  time COMMAND...         a prompt command, then its virtual and real time
  source FILE             the prompt commands in FILE, one per line
  wait                    mn's wait for switches: every guest is up before the prompt
  cp SRC NODE:/PATH | cp NODE:/PATH DEST   a file into or out of a node
  sh COMMAND...           a shell command in Dom0
  py EXPR | px EXPR       a Python expression or statement (exp, net, session, nodes)
  help                    this text
  exit | quit | Ctrl-D    end the session: the run ends (results, teardown)"""


# mn's CLI commands that have no meaning here, and what to do instead.
TERMINALS = ("no terminals: nodes are Xen guests; type `NODE COMMAND` here, run `selena exec "
             "EXPERIMENT NODE COMMAND` from another shell, or attach to a guest's console "
             "with `xl console selena-EXPERIMENT-NODE` in Dom0")
MN_ONLY_COMMANDS = {
    "xterm": TERMINALS, "gterm": TERMINALS, "x": TERMINALS,
    "noecho": "guest commands run without a terminal: no interactive programs",
    "switch": "switches are guests for the whole run: `link SWITCH NODE down` takes a "
              "link down",
    "attach": "the topology is fixed for a run: `link A B up` brings a link back",
    "detach": "the topology is fixed for a run: `link A B down` takes a link down",
}


class Prompt(cmd.Cmd):
    """One interactive session on a running experiment."""

    def __init__(self, session: Session, stdin: IO[str] | None = None,
                 stdout: IO[str] | None = None, stderr: IO[str] | None = None,
                 tty: bool | None = None):
        stdin = stdin if stdin is not None else sys.stdin
        super().__init__(stdin=stdin, stdout=stdout if stdout is not None else sys.stdout)
        self.err = stderr if stderr is not None else sys.stderr
        self.session = session
        self.tty = stdin.isatty() if tty is None else tty
        # On a terminal input() gives readline's editing, history and completion.
        self.use_rawinput = self.tty
        self.prompt = "selena> " if self.tty else ""
        self.identchars += "-."     # node names like h1-a, and `py` words
        self._sourcing: list[Path] = []     # the files `source` is reading, innermost last

    # -- the loop ------------------------------------------------------------------

    def run(self) -> None:
        """Read and run lines until exit or end of input. Ctrl-C cancels the
        line being typed or the command running, not the session."""
        history = _History() if self.tty else None
        try:
            while True:
                try:
                    self.cmdloop()
                    return
                except SignalInterrupt:
                    raise           # SIGTERM, SIGHUP: the run ends (and is torn down)
                except KeyboardInterrupt:
                    self.say("\nInterrupt")     # mn's word for it
        finally:
            if history is not None:
                history.save()

    def onecmd(self, line: str) -> bool:
        try:
            return super().onecmd(line)
        except SelenaError as exc:
            self.error(str(exc))
        except KeyboardInterrupt:
            raise
        except SystemExit:          # `py exit()`: the session ends by exit or Ctrl-D only
            self.error("to end the session, type exit (or Ctrl-D)")
        except Exception as exc:  # noqa: BLE001 - one line, the session goes on
            self.error(f"{type(exc).__name__}: {exc}")
        return False

    def emptyline(self) -> bool:
        return False            # not cmd.Cmd's repeat of the last command

    def say(self, text: str) -> None:
        self.stdout.write(text + "\n")
        self.stdout.flush()

    def error(self, text: str) -> None:
        self.stdout.flush()
        self.err.write(f"*** {text}\n")
        self.err.flush()

    def default(self, line: str) -> bool:  # type: ignore[override]  # onecmd returns it
        word, _, rest = line.strip().partition(" ")
        if word in self.session.exp.topology.nodes:
            return self._node_command(word, rest.strip())
        if word in MN_ONLY_COMMANDS:
            self.error(f"{word} is mn's, not selena's: {MN_ONLY_COMMANDS[word]}")
            return False
        self.error(f"unknown command {word!r}: try help")
        return False

    # -- commands ------------------------------------------------------------------

    def do_EOF(self, arg: str) -> bool:  # noqa: N802 - cmd.Cmd's name for the end of input
        if self.tty:
            self.say("")
        return True

    def do_exit(self, arg: str) -> bool:
        return True

    do_quit = do_exit

    def do_help(self, arg: str) -> bool:
        self.say(HELP)
        return False

    def do_nodes(self, arg: str) -> bool:
        self.say("available nodes are: \n" + " ".join(self.session.nodes))
        return False

    def do_net(self, arg: str) -> bool:
        return self._say_all(self.session.net_lines())

    def do_links(self, arg: str) -> bool:
        return self._say_all(self.session.link_lines())

    def do_dump(self, arg: str) -> bool:
        return self._say_all(self.session.dump_lines())

    def do_pingall(self, arg: str) -> bool:
        return self._ping("pingall", arg, pair=False, full=False)

    def do_pingpair(self, arg: str) -> bool:
        return self._ping("pingpair", arg, pair=True, full=False)

    def do_pingallfull(self, arg: str) -> bool:
        return self._ping("pingallfull", arg, pair=False, full=True)

    def do_pingpairfull(self, arg: str) -> bool:
        return self._ping("pingpairfull", arg, pair=True, full=True)

    def _say_all(self, lines: list[str]) -> bool:
        """Print each line; the session goes on (a command's return)."""
        for line in lines:
            self.say(line)
        return False

    def _ping(self, command: str, arg: str, pair: bool, full: bool) -> bool:
        """pingall, pingpair, pingallfull, pingpairfull: mn's lines, and with
        `full` each pair's round trip (the guests' virtual ms) instead of the
        sum."""
        timeout = _seconds(arg, command, default=1.0)
        hosts = [h.name for h in self.session.exp.hosts][:2] if pair else None
        if hosts is not None and len(hosts) < 2:
            raise SelenaError(f"{command}: the experiment has fewer than two hosts")
        self.say(PING_HEADER)
        result = self.session.pingall(timeout=timeout, hosts=hosts, full=full)
        for line in result.lines():
            self.say(line)
        for line in result.full_lines() if full else [result.results_line()]:
            self.say(line)
        return False

    def do_intfs(self, arg: str) -> bool:
        return self._say_all(self.session.intfs_lines())

    def do_ports(self, arg: str) -> bool:
        return self._say_all(self.session.ports_lines())

    def do_dpctl(self, arg: str) -> bool:
        if not arg.strip():
            raise SelenaError("dpctl: want `dpctl COMMAND [ARG...]`, e.g. dpctl dump-flows")
        for switch, result in self.session.dpctl(arg):
            self.say(f"*** {switch} " + "-" * 72)
            self._print(result.stdout, result.stderr)
            if not result.ok:
                self.error(f"{switch}: {result.summary()}")
        return False

    def do_time(self, arg: str) -> bool:
        if not arg.strip():
            raise SelenaError("time: want `time COMMAND`, a prompt command")
        virtual, real = self.session.exp.now(), time.monotonic()
        try:
            return self.onecmd(arg)
        finally:
            self.say(f"*** Elapsed time: {self.session.exp.now() - virtual:.6f} virtual secs "
                     f"({time.monotonic() - real:.6f} real at TDF "
                     f"{units.tdf_text(self.session.exp.tdf)})")

    def do_source(self, arg: str) -> bool:
        name = arg.strip()
        if not name:
            raise SelenaError("source: want `source FILE`")
        path = Path(name).expanduser()
        if path.resolve() in self._sourcing:
            raise SelenaError(f"source: {name} is being read already (it sources itself)")
        try:
            lines = path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise SelenaError(f"source: cannot read {name}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
        self._sourcing.append(path.resolve())
        try:
            for line in lines:
                if line.strip() and not line.lstrip().startswith("#") and self.onecmd(line):
                    return True         # exit in the file ends the session, as typed
        finally:
            self._sourcing.pop()
        return False

    def do_wait(self, arg: str) -> bool:
        self.say("*** every node is up: the run waited for each guest before the prompt")
        return False

    def do_iperf(self, arg: str) -> bool:
        client, server, seconds = self._iperf_hosts(arg.split(), "iperf",
                                                    "iperf CLIENT SERVER [SECONDS]")
        self.say(f"*** Iperf: testing TCP bandwidth between {client} and {server}")
        result = self.session.iperf(client, server, seconds=seconds)
        self.say(f"*** Results: {list(result)!r}")
        return False

    def do_iperfudp(self, arg: str) -> bool:
        usage = "iperfudp BW [CLIENT SERVER [SECONDS]]"
        words = arg.split()
        if not words:
            raise SelenaError(f"iperfudp: want `{usage}`, BW as 10M (bit/s)")
        udp_rate(words[0], "iperfudp")
        client, server, seconds = self._iperf_hosts(words[1:], "iperfudp", usage)
        self.say(f"*** Iperf: testing UDP bandwidth between {client} and {server}")
        result = self.session.iperf_udp(client, server, words[0], seconds=seconds)
        self.say(f"*** Results: {list(result)!r}")
        return False

    def _iperf_hosts(self, words: list[str], command: str,
                     usage: str) -> tuple[str, str, float]:
        """CLIENT SERVER [SECONDS], or none: mn's first and last host."""
        hosts = [h.name for h in self.session.exp.hosts]
        if not words:
            if len(hosts) < 2:
                raise SelenaError(f"{command}: the experiment has fewer than two hosts")
            words = [hosts[0], hosts[-1]]
        if len(words) not in (2, 3):
            raise SelenaError(f"{command}: want `{usage}`")
        seconds = _seconds(words[2] if len(words) == 3 else "", command, default=5.0)
        for name in words[:2]:
            self.session.node(name)
        return words[0], words[1], seconds

    def do_link(self, arg: str) -> bool:
        from selena.schedule import parse_change

        words = arg.split()
        if len(words) < 3:
            raise SelenaError("link: want `link NODE1 NODE2 up|down` or `link NODE1 NODE2 "
                              "NAME=VALUE...` (rate, delay, jitter, loss, queue)")
        event = parse_change(["link", *words], "link")
        if event.change == "set":
            self.session.set_link(words[0], words[1], **dict(event.values))
        else:
            self.session.link(words[0], words[1], up=event.change == "up")
        return False

    def do_node(self, arg: str) -> bool:
        from selena.schedule import parse_change

        words = arg.split()
        if len(words) != 2:
            raise SelenaError("node: want `node NODE crash`, `node NODE restart` or `node "
                              "NODE cpu_share=0.25` (none lifts it)")
        event = parse_change(["node", *words], "node")
        self.session.node(words[0])          # an unknown name: one line naming the nodes
        if event.change == "set":
            try:
                share = checked_share(dict(event.values)["cpu_share"])
            except ValueError as exc:
                raise SelenaError(f"node {words[0]}: {exc}") from None
            self.session.set_cpu_share(words[0], share)
            self.say(f"{words[0]} cpu_share {'none' if share is None else f'{share:g}'}")
            return False
        domid = self.session.node_change(words[0], event.change)
        self.say(f"{words[0]} crashed" if domid is None
                 else f"{words[0]} restarted (domain {domid})")
        return False

    def do_tdf(self, arg: str) -> bool:
        if not arg.strip():
            self.say(f"TDF {units.tdf_text(self.session.exp.tdf)}")
            return False
        try:
            value = units.tdf(arg.strip())
        except UnitError as exc:
            raise SelenaError(f"tdf: {exc}") from None
        now = self.session.tdf(value)
        self.say(f"TDF {units.tdf_text(now)}")
        return False

    def do_pause(self, arg: str) -> bool:
        at = self.session.pause()
        self.say(f"paused at virtual time {at:.3f} s (resume to go on)")
        return False

    def do_resume(self, arg: str) -> bool:
        at = self.session.resume()
        self.say(f"resumed at virtual time {at:.3f} s")
        return False

    def do_cp(self, arg: str) -> bool:
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            raise SelenaError(f"cp: {exc}") from None
        sides = [guest_side(word) for word in words]
        if len(words) != 2 or sides.count(None) != 1:
            raise SelenaError("cp: want `cp SRC NODE:/PATH` (into a node) or `cp NODE:/PATH "
                              "DEST` (out of one)")
        into, out_of = sides[1], sides[0]
        if into is not None:
            done = self.session.put(into[0], words[0], into[1])
            self.say(f"{words[0]} -> {done.node}:{done.guest_path}: {done.size} bytes")
        else:
            assert out_of is not None
            done = self.session.get(out_of[0], out_of[1], words[1])
            self.say(f"{done.node}:{done.guest_path} -> {done.local_path}: {done.size} bytes")
        return False

    def do_sh(self, arg: str) -> bool:
        if not arg.strip():
            raise SelenaError("sh: want `sh COMMAND`")
        result = self.session.sh(arg)
        self._print(result.stdout, result.stderr)
        if result.returncode:
            self.error(f"sh: exit status {result.returncode}")
        return False

    def do_py(self, arg: str) -> bool:
        if not arg.strip():
            raise SelenaError("py: want `py EXPRESSION`")
        scope = self.session.namespace()
        try:
            code = compile(arg, "<py>", "eval")
        except SyntaxError:
            exec(compile(arg, "<py>", "exec"), scope)  # noqa: S102 - the user's own Python
            return False
        value = eval(code, scope)  # noqa: S307 - the user's own Python
        if value is not None:
            self.say(repr(value))
        return False

    do_px = do_py

    def _node_command(self, node: str, command: str) -> bool:
        if not command:
            raise SelenaError(f"{node}: want `{node} COMMAND`")
        # The output as it comes, as mn's prompt shows a node's (a ping's
        # replies one by one), each stream ended by a newline.
        last = [b"\n", b"\n"]
        streams = (self.stdout, self.err)
        texts = TextPieces()

        def show(stream: int, data: bytes) -> None:
            self.stdout.flush()
            streams[stream].write(texts.text(stream, data))
            streams[stream].flush()
            last[stream] = data[-1:]
        result = self.session.cmd(node, command, on_output=show)
        for stream, end in zip(streams, last, strict=True):
            if end != b"\n":
                stream.write("\n")
                stream.flush()
        if not result.ok:
            self.error(f"{node}: {result.summary()}")
        return False

    def _print(self, out: bytes | str, err: bytes | str) -> None:
        for data, stream in ((out, self.stdout), (err, self.err)):
            text = data.decode(errors="replace") if isinstance(data, bytes) else data
            if text:
                self.stdout.flush()
                stream.write(text if text.endswith("\n") else text + "\n")
                stream.flush()

    # -- completion ----------------------------------------------------------------

    def completenames(self, text: str, *ignored: Any) -> list[str]:
        commands = super().completenames(text, *ignored)
        nodes = [n for n in self.session.nodes if n.startswith(text)]
        return sorted({c for c in commands if c != "EOF"} | set(nodes))

    def completedefault(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        return [n for n in self.session.nodes if n.startswith(text)]

    def complete_link(self, text: str, line: str, begidx: int, endidx: int) -> list[str]:
        if len(shlex.split(line[:begidx])) >= 3:
            return [w for w in ("up", "down") if w.startswith(text)]
        return self.completedefault(text, line, begidx, endidx)


def _seconds(text: str, what: str, default: float) -> float:
    if not text.strip():
        return default
    try:
        value = float(text)
    except ValueError:
        raise SelenaError(f"{what}: {text.strip()!r} is not a number of seconds") from None
    if not 0 < value < math.inf:        # inf too: pingall's -W and iperf's -t never end
        raise SelenaError(f"{what}: {text.strip()!r}: want a finite number of seconds above "
                          "zero")
    return value


class _History:
    """readline history in ~/.selena_history, on a terminal only."""

    def __init__(self) -> None:
        self.path = HISTORY.expanduser()
        try:
            import readline
        except ImportError:         # a Python without readline: no history, still a prompt
            self.readline = None
            return
        self.readline = readline
        readline.set_history_length(HISTORY_LINES)
        try:
            readline.read_history_file(self.path)
        except OSError:
            pass

    def save(self) -> None:
        if self.readline is None:
            return
        try:
            self.readline.write_history_file(self.path)
        except OSError:
            pass            # a read-only home: the session still ended well


def check_script(text: str, where: str, nodes: Collection[str]) -> None:
    """Refuse, in one line naming the line, a prompt script (--pre, --post)
    whose line starts with neither a prompt command nor a node, before
    anything runs: its lines would each be an error in a run."""
    commands = {name[3:] for name in dir(Prompt) if name.startswith("do_")} - {"EOF"}
    for number, line in enumerate(text.splitlines(), 1):
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        if not word or word.startswith("#") or word in commands or word in nodes:
            continue
        if word in MN_ONLY_COMMANDS:
            raise ScenarioError(f"{where}:{number}: {word} is mn's, not selena's: "
                                f"{MN_ONLY_COMMANDS[word]}")
        raise ScenarioError(f"{where}:{number}: {word!r} is neither a prompt command nor a "
                            f"node (commands: {', '.join(sorted(commands))})")


def interact(session: Session, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
             stderr: IO[str] | None = None) -> None:
    """Run the `selena>` prompt on `session` until exit or end of input."""
    Prompt(session, stdin=stdin, stdout=stdout, stderr=stderr).run()


__all__ = ["HELP", "Prompt", "interact"]
