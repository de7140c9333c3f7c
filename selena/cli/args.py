"""Argument helpers the CLI's verb modules share (selena.cli.experiment,
.sweep, .advise and the lab's): option types that refuse bad values in one
line, the option groups a checking verb accepts so that a run's command line
can be checked unchanged, and the scenario the options describe."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from selena import units
from selena.adaptive import AdaptiveSpecError, Policy, parse_spec
from selena.control.channel import DEFAULT_OUTPUT_CAP
from selena.errors import ScenarioError, UnitError
from selena.experiment import DEFAULT_READY_TIMEOUT_S, Experiment
from selena.loader import Scenario, load_scenario
from selena.schedule import Event, load_events
from selena.specs import apply_host_spec, parse_host_spec
from selena.validate import MAX_SWITCH_PORTS, TEMPLATE_RE

# mn's --test values, each as mn runs it: pingall, pingpair, iperf, iperfudp
# (at mn's 10M); all is pingall then iperf; cli opens the prompt; build and
# none run nothing and open no prompt. Repeatable, run in the order given.
MN_TESTS = ("pingall", "pingpair", "iperf", "iperfudp", "all", "cli", "build", "none")
# What each --test runs, in order.
MN_TEST_STEPS = {"all": ("pingall", "iperf"), "pingall": ("pingall",),
                 "pingpair": ("pingpair",), "iperf": ("iperf",), "iperfudp": ("iperfudp",)}


# mn's options that selena does not take, and what it does instead (a mn
# command line's other options, --topo, --link, --test, --mac, --arp, --custom,
# are selena's too). argparse alone said "unrecognized arguments".
MN_ONLY_OPTIONS = {
    "--switch": "selena's switches are Open vSwitch guests (the ovs-switch template), "
                "standalone learning bridges unless static flows or a controller node say "
                "otherwise (docs/openflow.md)",
    "--controller": "a controller is a node of the topology (add_controller) or a switch's "
                    "static flows (docs/openflow.md); without one, switches are standalone "
                    "learning bridges",
    "--host": "validate, plan, deploy and run take it (cfs,cpu=SHARE); elsewhere give the "
              "hosts add_host(cpu_share=SHARE) in the scenario, --host-template picks their "
              "template",
    "--nat": "guests have no route out of the experiment",
    "--innamespace": "every node is a Xen guest of its own",
    "-x": "no xterms: type `h1 COMMAND` at the selena> prompt, or use `xl console`",
    "--xterms": "no xterms: type `h1 COMMAND` at the selena> prompt, or use `xl console`",
    "--ipbase": "--topo's hosts are on 10.0.0.0/8; a scenario file gives its own addresses",
    "--pin": "vCPUs are pinned per node: add_host(..., cpus='2-3')",
    "--listenport": "switches are guests; OpenFlow is a controller node's or static flows "
                    "(docs/openflow.md), and the prompt's dpctl runs ovs-ofctl in each switch",
    "--nolistenport": "switches are guests; OpenFlow is a controller node's or static flows "
                      "(docs/openflow.md), and the prompt's dpctl runs ovs-ofctl in each "
                      "switch",
    "--verbosity": "selena's -v goes before the verb (selena -v run ...: info, -vv debug); "
                   "a run prints its progress anyway",
    "-v": "selena's -v goes before the verb (selena -v run ...: info, -vv debug); a run "
          "prints its progress anyway",
}
# Of those, the ones some verbs take as selena's own.
MN_OPTIONS_TAKEN = {"--host": ("validate", "plan", "deploy", "run")}
# mn's -c (--clean): anywhere on a command line that names no other verb.
MN_CLEAN = ("mn -c is `selena clean` here: it destroys the experiments selena created and "
            "what they left (never another tool's), sparing live runs unless --force")
# Only run's: deploy (and the verbs that check its command line) take --wait SECONDS.
MN_WAIT = ("a run waits for every guest's agent before anything runs (its "
           "--ready-timeout SECONDS bounds the wait)")
EXPERIMENT_VERBS = ("validate", "plan", "deploy", "run", "advise", "sweep")


def mn_only_option(argv: list[str]) -> str | None:
    """The one-line error for the first of mn's options selena does not
    take on an experiment verb's command line (or mn's -c on its own), else
    None."""
    words = [a for a in argv if not a.startswith("-")]
    clean = [a for a in argv if a in ("-c", "--clean")]
    if clean and (not words or words[0] in EXPERIMENT_VERBS):
        return f"{clean[0]} is mn's, not selena's: {MN_CLEAN}"
    if not words or words[0] not in EXPERIMENT_VERBS:
        return None
    verb_at = argv.index(words[0])
    for arg in argv[verb_at + 1:]:
        option = arg.split("=", 1)[0]
        if option in MN_ONLY_OPTIONS and words[0] not in MN_OPTIONS_TAKEN.get(option, ()):
            return f"{option} is mn's, not selena's: {MN_ONLY_OPTIONS[option]}"
        if words[0] == "run" and option in ("--wait", "-w", "--twait"):
            return f"{option} is mn's, not selena's: {MN_WAIT}"
    return None


def tdf_arg(text: str) -> float:
    try:
        return units.tdf(text)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tdf_list_arg(text: str) -> list[float]:
    """TDFs separated by commas (sweep's --tdf, the lab's TDF lists)."""
    try:
        return [units.tdf(part) for part in text.split(",") if part.strip()]
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tdf_or_auto_arg(text: str) -> float | Policy:
    """run's, deploy's, validate's and plan's --tdf: a TDF or auto[:MIN-MAX]."""
    try:
        policy = parse_spec(text)
    except AdaptiveSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return policy if policy is not None else tdf_arg(text)


def param_arg(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"--param {text!r}: want NAME=VALUE")
    for convert in (int, float):
        try:
            return key, convert(value)
        except ValueError:
            continue
    return key, value


class _ParamAction(argparse.Action):
    """Repeated --param NAME=VALUE into a list; a NAME given twice is refused
    at parse time (a dict of them would keep the last without a word)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        name, value = cast(tuple[str, object], values)
        params: list[tuple[str, object]] = list(getattr(namespace, self.dest) or [])
        earlier = [v for n, v in params if n == name]
        if earlier:
            parser.error(f"--param {name} given twice ({name}={earlier[0]}, {name}={value}): "
                         "give each name once")
        setattr(namespace, self.dest, params + [(name, value)])


def param_option(p: argparse.ArgumentParser, help: str) -> None:
    """--param NAME=VALUE (repeatable), as run, sweep and advise take it."""
    p.add_argument("--param", type=param_arg, action=_ParamAction, default=[],
                   metavar="NAME=VALUE", help=help)


def template_arg(text: str) -> str:
    """--host-template: a template's name, refused in one line here rather
    than once per host by validation."""
    if not TEMPLATE_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a template name (lower-case "
                                         "letters, digits, '.', '_', '-'; e.g. tools-host)")
    return text


def seconds_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < math.inf:       # NaN and infinity too: no wait ends on them
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds, 0 "
                                         "or more")
    return value


@dataclass(frozen=True)
class PromptScript:
    """A file of selena> prompt commands (mn's --pre and --post), as read."""

    path: str
    text: str


def prompt_script_arg(text: str) -> PromptScript:
    """mn's --pre and --post: a file of prompt commands, read now, so that a
    file that cannot be read is refused before anything is deployed (its
    commands are checked against the topology by scenario_of)."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory: give a file of prompt "
                                         "commands, one per line")
    try:
        return PromptScript(text, path.read_text())
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text} is not text: give a file of prompt "
                                         "commands, one per line") from None


def size_arg(text: str) -> int:
    try:
        value = units.size_bytes(text)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be zero or more bytes")
    return value


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def deploy_only_args(p: argparse.ArgumentParser) -> None:
    """deploy's and run's options, for a verb that only checks (validate,
    advise): accepted so that a run's command line can be checked as it is."""
    g = p.add_argument_group("deploy options (accepted as run takes them; "
                             "nothing is deployed)")
    g.add_argument("--bridge", choices=("ovs", "linux"), default="ovs")
    g.add_argument("--shaping", choices=("dom0", "guest"), default="dom0")
    g.add_argument("--offload", action="store_true")
    g.add_argument("--warm", action="store_true")


def run_only_args(p: argparse.ArgumentParser) -> None:
    """The options only `run` (and deploy) use, accepted and ignored by the
    verbs that check a scenario, so that `selena validate` takes a run's
    command line unchanged."""
    g = p.add_argument_group("run options (accepted as run takes them; unused here)")
    g.add_argument("--out", type=Path, default=None)
    g.add_argument("--keep", action="store_true")
    g.add_argument("--test", choices=MN_TESTS, action="append", default=None)
    g.add_argument("--cli", action="store_true")
    g.add_argument("--pre", type=prompt_script_arg, metavar="FILE")
    g.add_argument("--post", type=prompt_script_arg, metavar="FILE")
    g.add_argument("--ready-timeout", type=seconds_arg, default=DEFAULT_READY_TIMEOUT_S,
                   metavar="SECONDS")
    g.add_argument("--command-timeout", type=seconds_arg, default=None, metavar="SECONDS")
    g.add_argument("--no-monitor", action="store_true")
    g.add_argument("--output-cap", type=size_arg, default=DEFAULT_OUTPUT_CAP, metavar="SIZE")
    g.add_argument("--wait", type=seconds_arg, default=120.0, metavar="SECONDS")
    g.add_argument("--follow", action="store_true")
    capture_arg(g)


def capture_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument("--capture", action="append", default=[], metavar="A,B",
                   help="capture the link between nodes A and B (or A-B) into the bundle's "
                        "capture-A-B.pcapng, timestamped in the guests' virtual time "
                        "(repeatable)")


def custom_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--custom", action="append", default=[], metavar="FILE",
                   help="a Mininet custom file (mn --custom): its `topos` give --topo names, "
                        "with Mininet's units (repeatable, or FILE1,FILE2)")


def scenario_of(args: argparse.Namespace) -> Scenario:
    """The scenario a verb's --topo/scenario, --tdf, --link and --param describe."""
    if args.scenario and args.topo:
        raise ScenarioError(f"give a scenario file or --topo, not both ({args.scenario!r} "
                            f"and --topo {args.topo!r})")
    source = args.topo or args.scenario
    custom = getattr(args, "custom", [])
    if not source and not custom:
        raise ScenarioError("give a scenario file or --topo NAME[,ARGS] (e.g. --topo linear,3)")
    # An adaptive TDF (auto:MIN-MAX) starts from the scenario's own (Experiment).
    tdf = None if isinstance(args.tdf, Policy) else args.tdf
    host = getattr(args, "host", None)
    host_share = None if host is None else parse_host_spec(host)     # before any loading
    scenario = load_scenario(source, tdf=tdf, link_spec=args.link, params=dict(args.param),
                             custom=custom)
    template = getattr(args, "host_template", None)
    if template is not None:
        scenario.topology.use_host_template(template)
    if host_share is not None:
        apply_host_spec(scenario.topology, host_share)
    if getattr(args, "mac", False):
        scenario.topology.number_host_macs()
    if getattr(args, "arp", False):         # after --mac: the entries carry its MACs
        scenario.topology.static_arp_between_hosts()
    for option in ("pre", "post"):
        script = getattr(args, option, None)
        if script is not None:
            from selena.cli.interactive import check_script

            check_script(script.text, f"--{option} {script.path}", set(scenario.topology.nodes))
    return scenario


# Unlike mn's, a switch here is a Xen guest, with a guest's limit on interfaces.
TOPO_LIMIT = (f"A switch takes at most {MAX_SWITCH_PORTS} ports (a Xen guest's limit, "
              "fewer with several vCPUs); for more hosts use a tree")


def events_of(args: argparse.Namespace, exp: Experiment) -> list[Event]:
    """The --events file's events, each checked against the experiment's
    topology (FILE:LINE: what, and the fix, for the first bad one)."""
    if getattr(args, "events", None) is None:
        return []
    events = load_events(args.events)
    exp.check_events(events)
    return events
