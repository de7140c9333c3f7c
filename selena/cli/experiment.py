"""`selena validate | plan | deploy | run | exec | cp | destroy | status | clean`.

Each verb parses its options, drives the experiment lifecycle
(selena.experiment.Experiment) or the backend, and prints.
"""

from __future__ import annotations

import argparse
import io
import json
import signal
import sys
import time
from pathlib import Path
from typing import IO, Any

from selena import units
from selena.adaptive import Policy
from selena.attach import copy_file, exec_command
from selena.backends import BACKENDS, DEFAULT_BACKEND, get_backend
from selena.cli import report
from selena.cli.args import (
    MN_TEST_STEPS,
    MN_TESTS,
    TOPO_LIMIT,
    PromptScript,
    capture_arg,
    custom_arg,
    deploy_only_args,
    events_of,
    param_option,
    prompt_script_arg,
    run_only_args,
    say,
    scenario_of,
    seconds_arg,
    size_arg,
    tdf_arg,
    tdf_or_auto_arg,
    template_arg,
)
from selena.cli.interactive import interact
from selena.compat import PUSH_CMD
from selena.control.channel import DEFAULT_OUTPUT_CAP
from selena.control.protocol import printable
from selena.engine import Recorded
from selena.errors import (
    CleanupError,
    Problem,
    ScenarioError,
    SelenaError,
    group_problems,
)
from selena.experiment import DEFAULT_READY_TIMEOUT_S, Experiment, SignalInterrupt
from selena.loader import Scenario, checking_only
from selena.mininet.topo import natural
from selena.model import NodeKind
from selena.schedule import Event
from selena.session import PING_HEADER, Session, rate_text, udp_rate
from selena.specs import TOPOS, topo_usage
from selena.user_errors import user_error, user_frames

# Lines of each Listing-2 command's output `selena run` prints.
ACTION_LINES = 8


def register(subparsers: argparse._SubParsersAction) -> None:
    topo_names = ", ".join(topo_usage(t) for t in TOPOS)

    def scenario_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", nargs="?",
                       help="a scenario .py file, or a Mininet-style topology spec "
                            "(same as --topo)")
        p.add_argument("--topo", metavar="NAME[,ARGS]",
                       help=f"a built-in topology, as in mn: {topo_names}; or one a "
                            f"--custom file names. {TOPO_LIMIT}")
        custom_arg(p)
        p.add_argument("--tdf", type=tdf_or_auto_arg, default=None,
                       metavar="TDF|auto[:MIN-MAX]",
                       help="override the experiment's TDF (1 to 1000, up to three decimals); "
                            "auto[:MIN-MAX] adapts it to the load while the scenario runs "
                            "(docs/fidelity.md, Adaptive TDF)")
        p.add_argument("--link", default=None, metavar="tc,bw=..,delay=..",
                       help="Mininet-style parameters for every link: bw in Mbit/s, delay "
                            "and jitter with a unit (5ms), loss in %%, max_queue_size in "
                            "packets; delay is one-way (the round trip adds it twice)")
        p.add_argument("--host", default=None, metavar="cfs,cpu=..",
                       help="as mn --host: cfs,cpu=0.25 caps every host without a cap of "
                            "its own at that share of this host's CPUs per virtual second, "
                            "at any TDF (Mininet's CPULimitedHost)")
        p.add_argument("--host-template", type=template_arg, default=None, metavar="TEMPLATE",
                       help="the template of every host still on the default (tiny-host), "
                            "e.g. tools-host for iperf3 at the prompt")
        p.add_argument("--mac", action="store_true",
                       help="as mn --mac: each host's MAC from its IPv4 address "
                            "(00:00:00:00:00:01 for 10.0.0.1) unless it has one")
        p.add_argument("--arp", action="store_true",
                       help="as mn --arp: every host has static ARP entries for every other "
                            "host")
        param_option(p, "passed to the scenario's build(**params) and exp.params (repeatable)")
        p.add_argument("--events", type=Path, default=None, metavar="FILE",
                       help="link and node changes in virtual time, one a line: "
                            "`12.5 link h1 s1 delay=20ms`, `30 link h1 s1 down`, `40 node "
                            "h2 crash` (checked by validate and plan; applied by run)")
        p.add_argument("--strict", action="store_true",
                       help="treat warnings (likely unit slips, CPU masks beyond the host) "
                            "as errors")
        p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND,
                       help="xl (Xen guests, dilated) or mininet (the real-time baseline: "
                            "the same topology and commands in Mininet on this Dom0)")

    def replace_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--replace", action="store_true",
                       help="if an experiment of the same name is deployed, remove it "
                            "first (without this the deploy refuses)")

    def deploy_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--bridge", choices=("ovs", "linux"), default="ovs")
        p.add_argument("--shaping", choices=("dom0", "guest"), default="dom0",
                       help="where links are shaped: the Dom0 side of each vif (scaled by "
                            "the TDF) or inside the guests on egress (unscaled)")
        p.add_argument("--offload", action="store_true",
                       help="keep TSO/GSO/GRO/checksum offloads on (off by default)")
        p.add_argument("--warm", action="store_true",
                       help="reuse idle guests of the same template from the warm pool")

    p = subparsers.add_parser("validate", help="check a scenario as a run would; create "
                                               "nothing")
    scenario_args(p)
    deploy_only_args(p)
    run_only_args(p)
    p.set_defaults(func=cmd_validate)

    p = subparsers.add_parser("plan", help="print every xl config and Dom0 command a "
                                           "deploy would run; run none")
    scenario_args(p)
    deploy_args(p)
    run_only_args(p)
    p.set_defaults(func=cmd_plan)

    p = subparsers.add_parser("deploy", help="create, wire, shape and start a topology")
    scenario_args(p)
    deploy_args(p)
    replace_arg(p)
    p.add_argument("--wait", type=seconds_arg, default=120.0, metavar="SECONDS",
                   help="wait this long for the guests and their agents, showing n of N "
                        "up (0: do not wait unless guests must be configured; default 120)")
    p.set_defaults(func=cmd_deploy)

    p = subparsers.add_parser("run", help="deploy a scenario, run it, collect results, "
                                          "tear down")
    scenario_args(p)
    deploy_args(p)
    replace_arg(p)
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default results/<experiment>-<time>)")
    p.add_argument("--keep", action="store_true", help="leave the experiment running")
    p.add_argument("--test", choices=MN_TESTS, action="append", default=None,
                   help="as mn --test (repeatable, run in order): pingall pings every host "
                        "from every other, pingpair the first two hosts each other, iperf "
                        "measures TCP from the first host to the last, iperfudp UDP at 10 "
                        "Mbit/s (they get the tools-host template, which has iperf3), all "
                        "pingall then iperf, cli opens the prompt; build and none run "
                        "nothing and do not open the prompt of a topology with nothing to run")
    p.add_argument("--pre", type=prompt_script_arg, metavar="FILE",
                   help="as mn --pre: selena> prompt commands (one per line, as `source` "
                        "reads them) run once the guests are up, before --test")
    p.add_argument("--post", type=prompt_script_arg, metavar="FILE",
                   help="as mn --post: prompt commands run after the scenario and the "
                        "prompt, before the run ends")
    p.add_argument("--cli", action="store_true",
                   help="open the selena> prompt (as mn's CLI) after the scenario; a "
                        "topology with nothing to run opens it without --cli")
    p.add_argument("--ready-timeout", type=seconds_arg, default=DEFAULT_READY_TIMEOUT_S,
                   metavar="SECONDS",
                   help="real seconds to wait for every guest agent (default 600)")
    p.add_argument("--command-timeout", type=seconds_arg, default=None, metavar="SECONDS",
                   help="virtual seconds after which a foreground command is killed "
                        "(default 600; 0: never)")
    p.add_argument("--no-monitor", action="store_true",
                   help="do not sample CPU and queues for the fidelity verdict")
    p.add_argument("--no-latency-probe", action="store_true",
                   help="no pings between two hosts for the fidelity verdict's latency "
                        "signal (the scenario's links carry only its own packets)")
    p.add_argument("--output-cap", type=size_arg, default=DEFAULT_OUTPUT_CAP, metavar="SIZE",
                   help="bytes of each command's stdout, and of its stderr, kept in Dom0 "
                        "and the bundle (e.g. 1M; default 16M); the rest is dropped and "
                        "counted")
    p.add_argument("--follow", action="store_true",
                   help="print every command's output as it comes, each line after its "
                        "node's name (`h1 | `; stderr's `h1 ! `)")
    capture_arg(p)
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("set-tdf", help="change the TDF of a deployed experiment (guests "
                                              "and link shaping together)")
    p.add_argument("experiment")
    p.add_argument("tdf", type=tdf_arg)
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_set_tdf)

    p = subparsers.add_parser("pause", help="freeze a deployed experiment's virtual time: "
                                            "every guest stops at the same virtual instant")
    p.add_argument("experiment")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_pause)

    p = subparsers.add_parser("resume", help="restart a paused experiment's virtual time, "
                                             "losing none")
    p.add_argument("experiment")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_resume)

    p = subparsers.add_parser("exec", help="run a command on a node of a deployed experiment "
                                           "and print its output")
    p.add_argument("experiment")
    p.add_argument("node")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="a shell command line, as ssh takes one (quote what the guest's "
                        "shell should see whole)")
    p.add_argument("--timeout", type=seconds_arg, default=0.0, metavar="S",
                   help="virtual seconds after which the guest's agent kills it (default: "
                        "none)")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_exec)

    p = subparsers.add_parser("cp", help="copy a file into or out of a node of a deployed "
                                         "experiment")
    p.add_argument("experiment")
    p.add_argument("src", help="a local file, or NODE:/PATH in the guest")
    p.add_argument("dest", help="NODE:/PATH in the guest (a directory: src's name there), "
                                "or a local path")
    p.add_argument("--mode", type=mode_arg, default=None, metavar="OCTAL",
                   help="the guest file's permissions (default: the local file's)")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_cp)

    p = subparsers.add_parser("status", help="deployed experiments")
    p.add_argument("--json", action="store_true")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_status)

    p = subparsers.add_parser("destroy", help="remove one experiment")
    p.add_argument("experiment")
    p.add_argument("--pool", action="store_true",
                   help="keep its guests, paused and unwired, for a later --warm deploy")
    p.add_argument("--force", action="store_true",
                   help="also while a `selena run` that owns it is still alive")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_destroy)

    p = subparsers.add_parser("clean", help="remove everything selena created on this host")
    p.add_argument("--force", action="store_true",
                   help="also the experiments of `selena run`s still alive (skipped, and "
                        "named, without this)")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_clean)


def _experiment(args: argparse.Namespace, **options: Any) -> Experiment:
    if getattr(args, "no_monitor", False):
        options["monitor"] = False
    if getattr(args, "no_latency_probe", False):
        options["latency_probe"] = False
    if isinstance(getattr(args, "tdf", None), Policy):
        options["tdf"] = args.tdf
    if getattr(args, "capture", None):
        # Checked against the topology now: a bad link is refused before a deploy.
        options["capture"] = list(args.capture)
    scenario = scenario_of(args)
    for test in getattr(args, "test", None) or []:
        if {"iperf", "iperfudp"} & set(MN_TEST_STEPS.get(test, ())):
            _iperf_hosts(scenario, test)
    return Experiment(scenario, backend=args.backend, strict=args.strict,
                      bridge=getattr(args, "bridge", "ovs"),
                      shaping=getattr(args, "shaping", "dom0"),
                      offloads=getattr(args, "offload", False),
                      warm=getattr(args, "warm", False),
                      replace=getattr(args, "replace", False), progress=say, **options)


def print_warnings(warnings: list[Problem]) -> None:
    """Grouped as errors are: a kind repeated over many links is one line."""
    for line in group_problems(warnings):
        print(f"warning: {line}", file=sys.stderr)


def _checked_only(args: argparse.Namespace) -> dict[str, Any]:
    """The options validate and plan check as a run would, creating nothing."""
    return {"out": args.out} if getattr(args, "out", None) is not None else {}


def cmd_validate(args: argparse.Namespace) -> int:
    with checking_only():   # a file that runs itself is checked, not refused
        exp = _experiment(args, **_checked_only(args))
    warnings = exp.check()
    events = events_of(args, exp)
    topo = exp.topology
    hosts = sum(1 for n in topo.nodes.values() if n.kind is NodeKind.HOST)
    print_warnings(warnings)
    adaptive = f" ({exp.adaptive.spec()}: starting there)" if exp.adaptive else ""
    print(f"{exp.scenario.source}: valid: experiment {topo.name}, TDF "
          f"{units.tdf_text(topo.tdf)}{adaptive}, {hosts} hosts, "
          f"{len(topo.nodes) - hosts} other nodes, "
          f"{len(topo.links)} links, {len(topo.hubs)} hubs, {len(exp.scenario.actions)} "
          f"scenario actions" + (f", {len(events)} scheduled events" if events else "")
          + (f", {len(warnings)} warning(s)" if warnings else ""))
    if exp.templates is None:
        print("  (guest templates not checked: none installed on this host)")
    if exp.host is None or exp.host.cpus is None:
        print("  (host CPUs and memory not checked: no Xen toolstack answered here)")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    with checking_only():
        exp = _experiment(args, **_checked_only(args))
    text = exp.render()
    events = events_of(args, exp)
    print_warnings(exp.warnings)
    print(text, end="")
    for event in events:
        print(f"# at virtual {event.t:g} s: {event.text()}")
    if exp.adaptive is not None:
        print(f"# {exp.adaptive.describe()}; starts at TDF {units.tdf_text(exp.topology.tdf)}")
        if exp.adaptive_start_calibrated:
            print(f"# {exp.adaptive_start_reason}")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    if args.events is not None:
        raise SelenaError("--events: deploy runs no scenario; use selena run --events FILE")
    if isinstance(args.tdf, Policy):
        raise SelenaError(f"--tdf {args.tdf.spec()}: deploy runs no scenario to adapt to; use "
                          "selena run --tdf auto, or deploy at a fixed TDF and change it with "
                          "selena set-tdf")
    exp = _experiment(args, keep=True, ready_timeout=max(args.wait, 1.0))
    if not exp.backend.dilates:
        raise SelenaError(f"the {exp.backend.name} backend lives as long as one `selena run`; "
                          "it cannot deploy an experiment that outlives the command")
    exp.deploy(wait=args.wait > 0 or exp.needs_agents())
    try:
        for node, domid in sorted(exp.domids.items()):
            print(f"{node}\tselena-{exp.topology.name}-{node}\t{domid}")
    finally:
        exp.detach()
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    out = args.out or Path("results") / f"{_name(args)}-{time.strftime('%Y%m%d-%H%M%S')}"
    options: dict[str, object] = {"out": out, "keep": args.keep,
                                  "ready_timeout": args.ready_timeout,
                                  "output_cap": args.output_cap}
    if args.command_timeout is not None:
        options["command_timeout"] = args.command_timeout or None
    if args.follow:
        options["show_output"] = FollowedLines(sys.stdout)
    exp = _experiment(args, **options)
    events = events_of(args, exp)       # a bad line is refused before any deploy
    started = time.monotonic()
    failure: BaseException | None = None
    try:
        with exp:
            _run_steps(args, exp, events)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported below
        failure = exc
    engine = exp.engine
    if engine is not None:
        for rec in sorted(engine.records, key=lambda r: r.seq):
            r = rec.result
            print(f"{r.guest:>10}  {r.summary():<28} {r.command[:60]}")
        _print_action_outputs(engine.records, exp.bundle)
        for metric in engine.metrics.values():
            print(metric.line())
    if exp.adaptive is not None and engine is not None:
        print(tdf_timeline_line(engine.clock.timeline()))
    if exp.fidelity is not None:
        print(exp.fidelity.line())
    if exp.bundle is not None:
        print(f"results: {exp.bundle} (real time {time.monotonic() - started:.1f} s)")
    if isinstance(failure, KeyboardInterrupt):
        signum = failure.signum if isinstance(failure, SignalInterrupt) else signal.SIGINT
        how = f"by {failure.name}" if isinstance(failure, SignalInterrupt) else ""
        say(f"selena: interrupted {how}".rstrip() + " (the experiment was torn down"
            + ("; the bundle records the commands so far)" if exp.bundle else ")"))
        return 128 + int(signum)
    if failure is not None:
        if isinstance(failure, SelenaError) and not _from_user_code(failure):
            report(failure)
        else:
            report(user_error(failure, exp.scenario.source))
        return 1
    return 0


class FollowedLines:
    """selena run --follow: every command's output as it comes, line by
    line, each line after its node's name (`|` stdout, `!` stderr), its
    control characters escaped; a command's last line without a newline
    printed at its end."""

    # Characters of one line printed; the rest is cut (and counted).
    LINE_LIMIT = 2000

    def __init__(self, out: IO[str]):
        self.out = out
        self._partial: dict[tuple[str, int], bytes] = {}

    def __call__(self, node: str, command_id: str, stream: int, data: bytes) -> None:
        key = (command_id, stream)
        pending = self._partial.pop(key, b"") + data
        *lines, rest = pending.split(b"\n")
        if not data and rest:               # the stream's end: its last line
            lines.append(rest)
        elif rest:
            self._partial[key] = rest
        mark = "|!"[stream]
        for line in lines:
            shown = printable(line.rstrip(b"\r"), self.LINE_LIMIT)
            self.out.write(f"{node} {mark} {shown}\n")
        if lines:
            self.out.flush()


def tdf_timeline_line(timeline: list[dict[str, Any]]) -> str:
    """An adaptive run's TDF changes in one line, each with its virtual time."""
    steps = [f"{units.tdf_text(float(seg['tdf']))} at virtual {seg['virtual_s']:.1f} s"
             for seg in timeline]
    return f"TDF timeline ({len(timeline) - 1} change(s)): " + " -> ".join(steps)


def _run_steps(args: argparse.Namespace, exp: Experiment, events: list[Event]) -> None:
    """A deployed run's steps, in mn's order where they are mn's: --pre,
    --test, the scenario, the prompt, --post."""
    say(f"running {exp.scenario.source} at TDF {units.tdf_text(exp.tdf)}"
        + (f" ({exp.adaptive.spec()})" if exp.adaptive else ""))
    if events:
        exp.schedule(events)
        say(f"{len(events)} events scheduled from {args.events} (the last at "
            f"virtual {events[-1].t:g} s)")
    if args.pre is not None:
        _prompt_script(exp, args.pre)
    for test in args.test or []:
        for step in MN_TEST_STEPS.get(test, ()):
            mn_test(exp, step)
    exp.run_scenario()
    if args.cli or "cli" in (args.test or []) or _opens_prompt(args, exp.scenario):
        say("guests up: type help for the commands, exit or Ctrl-D to end the run")
        interact(Session(exp))
    if args.post is not None:
        _prompt_script(exp, args.post)


def _prompt_script(exp: Experiment, script: PromptScript) -> None:
    """--pre's or --post's commands, as the prompt runs piped input: each
    line's error is one line on stderr and the next line runs."""
    interact(Session(exp), stdin=io.StringIO(script.text))


def _opens_prompt(args: argparse.Namespace, scenario: Scenario) -> bool:
    """As mn: a topology with nothing to run (no --test, no scenario actions
    or run function) opens the prompt; stdin closed or absent does not."""
    if args.test is not None or scenario.actions or scenario.run is not None:
        return False
    try:
        sys.stdin.fileno()      # none under pytest's capture, or a daemon's closed stdin
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _print_action_outputs(records: list[Recorded], bundle: Path | None) -> None:
    """SELENA Listing-2 commands print what they printed (netperf's result,
    say), as SELENA's own controller showed it: from the bundle, since the
    engine keeps no output. Their records say they came from pushCmd."""
    if bundle is None:
        return
    for rec in sorted(records, key=lambda r: r.seq):
        r = rec.result
        if rec.origin != PUSH_CMD or not rec.stdout_bytes:
            continue
        text = _tail(bundle / "nodes" / r.guest / f"{rec.n}.stdout")
        if text.strip():
            tail = text.rstrip().splitlines()[-ACTION_LINES:]
            print(f"{r.guest}$ {r.command}\n" + "\n".join(f"  {line}" for line in tail))


def _tail(path: Path, size: int = 64 * 1024) -> str:
    """The end of a file (a command's output may be megabytes)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _from_user_code(exc: BaseException) -> bool:
    return bool(user_frames(exc.__traceback__))


def _name(args: argparse.Namespace) -> str:
    source = args.topo or args.scenario or "run"
    return Path(source).stem.replace(",", "-").replace("=", "")


def mn_test(exp: Experiment, test: str) -> None:
    """`--test pingall|pingpair|iperf|iperfudp` as mn prints them
    (selena.session), each recorded as a metric."""
    session = Session(exp)
    hosts = [h.name for h in exp.hosts]
    if test in ("iperf", "iperfudp"):
        if len(hosts) < 2:
            raise ScenarioError(f"--test {test}: the topology has fewer than two hosts")
        client, server = hosts[0], hosts[-1]        # mn: the first and the last host
        udp = test == "iperfudp"
        print(f"*** Iperf: testing {'UDP' if udp else 'TCP'} bandwidth between {client} "
              f"and {server}")
        received, sent = session.iperf_bps(client, server,
                                           udp_bps=udp_rate(MN_UDP_BW) if udp else None)
        rates = [rate_text(received), rate_text(sent)]
        print(f"*** Results: {([MN_UDP_BW] if udp else []) + rates!r}")
        exp.record(f"{test}_received_mbit", received / 1e6, unit="Mbit/s")
        return
    pair = test == "pingpair"
    if pair and len(hosts) < 2:
        raise ScenarioError("--test pingpair: the topology has fewer than two hosts")
    print(PING_HEADER)
    result = session.pingall(timeout=2.0, hosts=set(hosts[:2]) if pair else None)
    for line in result.lines():
        print(line)
    print(result.results_line())
    exp.record(f"{test}_received_pct", 100 - result.dropped_percent, expected=100.0, unit="%")


# The template with iperf3 that --test iperf puts its two hosts on.
IPERF_TEMPLATE = "tools-host"
# mn's --test iperfudp rate (Mininet's iperf udpBw default).
MN_UDP_BW = "10M"


def _iperf_hosts(scenario: Scenario, test: str) -> None:
    """`--test iperf` (and iperfudp) measures from the first host to the
    last, which need iperf3: those on the default tiny-host template (no
    iperf3) get tools-host, as mn's --test iperf runs on any topology. Said
    in a line."""
    hosts = [n.name for n in scenario.topology.nodes.values() if n.kind is NodeKind.HOST]
    moved = scenario.topology.use_host_template(IPERF_TEMPLATE, names=hosts[:1] + hosts[-1:])
    if moved:
        say(f"--test {test}: {' and '.join(moved)} use the {IPERF_TEMPLATE} template (iperf3)")


def cmd_exec(args: argparse.Namespace) -> int:
    """The command's own exit status (128 + N when signal N killed it), so
    scripts can test it; its output byte for byte (a file can be copied out)."""
    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not words:
        raise ScenarioError(f"selena exec {args.experiment} {args.node}: give the command "
                            "to run (e.g. selena exec NAME h1 ip addr)")
    backend = get_backend(args.backend)
    streams = (sys.stdout.buffer, sys.stderr.buffer)

    def show(stream: int, data: bytes) -> None:     # byte for byte, as it comes
        streams[stream].write(data)
        streams[stream].flush()
    try:
        result = exec_command(backend, args.experiment, args.node, " ".join(words),
                              timeout_s=args.timeout, on_output=show)
    finally:
        backend.close()
    if result.state == "exited" and result.exit_code is not None and not result.lost_bytes \
            and not result.truncated:
        return result.exit_code
    say(f"{args.node}: {result.summary()}")
    if result.state == "killed" and result.signal:
        return 128 + result.signal
    return result.exit_code or 1


def mode_arg(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise argparse.ArgumentTypeError(f"{text!r} is not a permission mode in octal "
                                         "(e.g. 755)")
    return mode


def cmd_cp(args: argparse.Namespace) -> int:
    backend = get_backend(args.backend)
    try:
        done = copy_file(backend, args.experiment, args.src, args.dest, mode=args.mode)
    finally:
        backend.close()
    arrow = (f"{args.src} -> {done.node}:{done.guest_path}" if done.direction == "put"
             else f"{done.node}:{done.guest_path} -> {done.local_path}")
    print(f"{arrow}: {done.size} bytes, sha256 {done.sha256}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    states = get_backend(args.backend).status()
    if args.json:
        print(json.dumps(states, indent=1))
        return 0
    if not states:
        print("no experiments deployed")
    for s in states:
        if "error" in s:
            print(f"{s['experiment']}: {s['error']}")
            continue
        # status() is plain data typed as objects: tdf a number, domains,
        # bridges and nodes mappings (XlBackend's DeployState as a dict),
        # run_pid the live run's pid (-1 not written yet) or None, frozen
        # whether `selena pause` froze it.
        domains: dict[str, int] = s["domains"]  # type: ignore[assignment]
        nodes: dict[str, str] = s.get("nodes") or {}  # type: ignore[assignment]
        owner = s.get("run_pid")
        held = ("no run holds it" if owner is None else "a run is starting"
                if owner == -1 else f"its run is pid {owner}")
        paused = f"; paused (`selena resume {s['experiment']}`)" if s.get("frozen") else ""
        print(f"{s['experiment']}: TDF {units.tdf_text(float(s['tdf']))}, "  # type: ignore[arg-type]
              f"{len(domains)} guests, {len(s['bridges'])} bridges; {held}{paused}")  # type: ignore[arg-type]
        if nodes:
            # h2 before h10; the state file has them in the order their guests came up.
            print("  " + ", ".join(f"{node} (domain {domains.get(nodes[node], '?')})"
                                   for node in sorted(nodes, key=natural)))
    return 1 if any("error" in s for s in states) else 0


def cmd_set_tdf(args: argparse.Namespace) -> int:
    backend = get_backend(args.backend)
    try:
        backend.set_tdf(args.experiment, args.tdf, progress=say)
    finally:
        backend.close()
    print(f"{args.experiment}: TDF {units.tdf_text(args.tdf)}")
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    backend = get_backend(args.backend)
    try:
        virt, _ = backend.freeze(args.experiment, progress=say)
    finally:
        backend.close()
    print(f"{args.experiment}: paused at virtual time {virt / 1e9:.6f} s (guest clocks stand "
          "still until `selena resume`)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    backend = get_backend(args.backend)
    try:
        virt, _ = backend.thaw(args.experiment, progress=say)
    finally:
        backend.close()
    print(f"{args.experiment}: resumed at virtual time {virt / 1e9:.6f} s")
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    get_backend(args.backend).destroy(args.experiment, pool=args.pool, force=args.force)
    print(f"{'pooled the guests of' if args.pool else 'destroyed'} {args.experiment}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    try:
        removed = get_backend(args.backend).clean(force=args.force, progress=say)
    except CleanupError as exc:
        print("removed: " + (", ".join(exc.removed) if exc.removed else "nothing"))
        raise
    print("removed: " + (", ".join(removed) if removed else "nothing"))
    return 0
