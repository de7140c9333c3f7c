"""The experiment lifecycle: one object that every front end drives (the
CLI's deploy and run, the lab's demo and checks, and researchers' own
Python scripts), the way CORE's Session or Mininet's Mininet object does:

    from selena import Experiment
    from selena.model import Topology

    topo = Topology("pair", tdf=10)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"),
                  topo.add_host("h2", ip="10.0.0.2/24"), rate="10Mbit", delay="5ms")
    with Experiment(topo, out="results/pair") as exp:
        print(exp["h1"].cmd("ping -c 3 10.0.0.2").stdout.decode())
        exp.record("answer", 42)

Entering validates (nothing is created on error), plans, deploys (guests
created paused, TDF set, links wired and shaped, all unpaused together),
attaches the control channel, waits for every guest agent, and configures
the guests (guest-side shaping, switch bridges; static ARP and addresses are
applied by the agents at boot). Leaving ends the scenario (commands left
running are killed and recorded), writes the results bundle and tears
everything down: also when the body raises or on Ctrl-C, SIGTERM or SIGHUP
(handled like Ctrl-C while the experiment is deployed), and then the bundle
records the error and the exception goes on (so the script or CLI exits
non-zero). The teardown happens even when the bundle cannot be written; that
failure is raised after it.

The bundle is written atomically: `out` is checked, and a staging directory
beside it created, before anything else; each command's output goes there
as the command completes (the engine keeps none of it), meta.json last,
then the staging directory is renamed to `out` (an older bundle there is
replaced only then). While the run is on, `exp.out_dir` is that staging
directory: files a scenario writes there end up in the bundle.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

from selena import excepthook, units
from selena.adaptive import (
    AdaptiveSpecError,
    Controller,
    Policy,
    calibrated_start,
    cover_segments,
    judge_segments,
    parse_spec,
)
from selena.advise import Calibration, default_calibration_path
from selena.backends import Backend, Deployment, get_backend
from selena.backends.base import CAPTURE_REFUSED
from selena.capture import LinkRecorder, parse_link
from selena.compat import Action, run_actions
from selena.control.channel import CommandHandle, CommandResult
from selena.control.interface import DEFAULT_OUTPUT_CAP, CommandChannel
from selena.control.protocol import CommandSpec
from selena.engine import (
    DEFAULT_COMMAND_TIMEOUT_S,
    FINISH_LIMIT_S,
    LISTEN_TIMEOUT_S,
    Engine,
    VirtualClock,
)
from selena.errors import (
    ExperimentError,
    Problem,
    ResultsError,
    ScenarioError,
    SelenaError,
    UnitError,
    ValidationError,
)
from selena.fidelity import (
    DEFAULT_INTERVAL_S,
    ECHO_COUNT,
    ECHO_GAP_S,
    ECHO_TIMEOUT_S,
    EchoRound,
    FidelityReport,
    LatencyPath,
    Monitor,
    echo_argv,
    latency_path,
    parse_echoes,
)
from selena.hostinfo import HostInfo
from selena.loader import Scenario, intercept
from selena.metrics import Metric
from selena.model import Link, NodeKind, Topology
from selena.model.cpus import checked_share, max_capped_tdf
from selena.openflow import Switches, bridge_scripts, flow_scripts
from selena.paths import switch_profiles
from selena.plan import TEMPLATE_ROOT, Plan, guest_shaping_script, make_plan
from selena.provenance import run_provenance
from selena.relay import NodeOutput, OutputFollower, SharedRelay
from selena.results import BundleWriter, check_target
from selena.runner import Runner
from selena.schedule import (
    LINK_VALUES,
    Event,
    changed_link,
    check_events,
    links_between,
    parse_change,
    value_text,
)
from selena.shaping import Placement
from selena.shaping.guest import apply_guest_shaping
from selena.signals import (
    TERMINATING,
    SignalInterrupt,
    TerminateAsInterrupt,
    restore_handlers,
)
from selena.transfer import Transfer
from selena.user_errors import describe, user_frames
from selena.validate import validate

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
# Real seconds for every guest to boot and its agent to report ready.
DEFAULT_READY_TIMEOUT_S = 600.0
# Real seconds a latency probe may run past its own timeout (ECHO_TIMEOUT_S
# of the guest's time) before it is killed: the control channel's delays.
ECHO_GRACE_S = 30.0
GUEST_SHAPED_LINKS_FIXED = ("links shaped inside the guests (shaping='guest') cannot change "
                            "during a run; use Dom0 shaping (the default) to change them")


def installed_templates(root: Path = TEMPLATE_ROOT) -> set[str] | None:
    """Guest templates installed on this host (None: none, e.g. not a Dom0)."""
    if not root.is_dir():
        return None
    return {p.name for p in root.iterdir() if (p / "template.yaml").exists()}


class Node:
    """A node of a running experiment (`exp["h1"]`), Mininet-style."""

    def __init__(self, exp: Experiment, name: str):
        self.exp = exp
        self.name = name

    def cmd(self, command: str | Sequence[str], **kwargs: Any) -> CommandResult:
        return self.exp.cmd(self.name, command, **kwargs)

    def start(self, command: str | Sequence[str], **kwargs: Any) -> CommandHandle:
        return self.exp.start(self.name, command, **kwargs)

    def wait_listening(self, port: int, **kwargs: Any) -> None:
        self.exp.wait_listening(self.name, port, **kwargs)

    def put(self, src: str | os.PathLike[str], dest: str, **kwargs: Any) -> Transfer:
        return self.exp.put(self.name, src, dest, **kwargs)

    def get(self, src: str, dest: str | os.PathLike[str]) -> Transfer:
        return self.exp.get(self.name, src, dest)

    def crash(self) -> None:
        self.exp.crash(self.name)

    def set_cpu_share(self, share: float | None) -> None:
        """Cap the node at `share` of the host's CPUs per virtual second from
        now on (None: no cap); see Experiment.set_cpu_share."""
        self.exp.set_cpu_share(self.name, share)

    def restart(self) -> int:
        """Boot the node again (see Experiment.restart); its new domain id."""
        return self.exp.restart(self.name)

    @property
    def domid(self) -> int:
        return self.exp.domid(self.name)

    def IP(self, index: int = 0) -> str | None:  # noqa: N802 - Mininet's name
        """The address (without prefix) of interface `index`, as Mininet's IP()."""
        node = self.exp.topology.nodes[self.name]
        iface = node.interface(index)
        return iface.ip.split("/")[0] if iface and iface.ip else None

    def __repr__(self) -> str:
        return f"<Node {self.name} of {self.exp.topology.name}>"


class LinkHandle:
    """The link(s) between two nodes of a running experiment
    (`exp.link("h1", "s1")`): change their shaping, take them down or up,
    now or from `exp.at(t, ...)`. Every change is recorded in the bundle
    (meta.json `events`) with its virtual and real time."""

    def __init__(self, exp: Experiment, a: str, b: str):
        self.exp = exp
        self.a = a
        self.b = b

    def set(self, **values: Any) -> None:
        """New rate, delay, jitter, loss or queue (units as add_link takes
        them; rate=None lifts the rate limit), both directions, in virtual
        terms: Dom0 applies them scaled by the current TDF, and again after
        every TDF change. Values not given keep theirs. A bad value is
        refused in one line naming the link; nothing changes then."""
        self.exp.set_link_values(self.a, self.b, **values)

    def down(self) -> None:
        self.exp.set_link(self.a, self.b, up=False)

    def up(self) -> None:
        self.exp.set_link(self.a, self.b, up=True)

    @property
    def links(self) -> list[Link]:
        return self.exp.links_between(self.a, self.b)

    def __repr__(self) -> str:
        return f"<LinkHandle {self.a}--{self.b} of {self.exp.topology.name}>"



def _check_options(params: object, **seconds: object) -> None:
    """The Python API's seconds and params, before anything is loaded or
    created (the CLI's parser checks its own): a NaN or negative monitor
    interval would spin the monitor's thread, a timeout of NaN never end."""
    if params is not None and not isinstance(params, Mapping):
        raise ValidationError(f"params {params!r}: want a dict of NAME: VALUE, as build() "
                              "takes them")
    for name, value in seconds.items():
        if value is None and name == "command_timeout":
            continue                    # no limit
        number = value if isinstance(value, int | float) and not isinstance(value, bool) \
            else math.nan
        least = "0 or more" if name in ("ready_timeout", "finish_limit") else "above 0"
        if not math.isfinite(number) or number < 0 or (number == 0 and least == "above 0"):
            extra = " (None: no limit)" if name == "command_timeout" else ""
            raise ValidationError(f"{name} {value!r}: want a finite number of seconds "
                                  f"{least}{extra}")


def _check_values(*, out: object, output_cap: object, link: object, meta: object,
                  templates: object, progress: object, show_output: object,
                  flags: Mapping[str, object]) -> None:
    """The Python API's other options, before anything is loaded or created:
    a wrong type there was a TypeError deep inside, or worse, taken as
    meant (replace="no" is true: it would destroy the experiment running
    under that name; out="" is the working directory)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValidationError(f"{name}={value!r}: want True or False")
    if out is not None and (not isinstance(out, str | os.PathLike) or not os.fspath(out)):
        raise ValidationError(f"out={out!r}: want the results bundle's directory (a path), "
                              "or None for no bundle")
    if isinstance(output_cap, bool) or not isinstance(output_cap, int) or output_cap < 0:
        raise ValidationError(f"output_cap={output_cap!r}: want a whole number of bytes, 0 "
                              "or more")
    if link is not None and not isinstance(link, str):
        raise ValidationError(f"link={link!r}: want Mininet's --link text, e.g. "
                              "'tc,bw=10,delay=5ms'")
    if templates not in (None, "installed") and (
            isinstance(templates, str) or not isinstance(templates, Collection)
            or not all(isinstance(name, str) for name in templates)):
        raise ValidationError(f"templates={templates!r}: want \"installed\" (what this host "
                              "has), None (no check) or a set of template names")
    if progress is not None and not callable(progress):
        raise ValidationError(f"progress={progress!r}: want a function of one message, "
                              "e.g. print")
    if show_output is not None and not callable(show_output):
        raise ValidationError(f"show_output={show_output!r}: want a function of (node, "
                              "command id, stream, bytes), or None")
    if meta is None:
        return
    if not isinstance(meta, Mapping):
        raise ValidationError(f"meta={meta!r}: want a dict of extra meta.json keys")
    for key, value in meta.items():     # found now, not when the bundle is written
        if not isinstance(key, str):
            raise ValidationError(f"meta key {key!r}: want text")
        try:
            json.dumps({key: value})
        except (TypeError, ValueError):
            raise ValidationError(f"meta[{key!r}]: {type(value).__name__} cannot go into "
                                  "meta.json: give text, numbers, lists or dicts") from None


def _capture_names(item: object) -> tuple[str, ...]:
    """One item of capture=...: "h1,s1" or ("h1", "s1")."""
    if isinstance(item, str):
        return (item,)
    if isinstance(item, tuple | list) and len(item) == 2 \
            and all(isinstance(name, str) for name in item):
        return tuple(item)
    raise ScenarioError(f"capture {item!r}: name a link as 'NODE,NODE' or ('NODE', 'NODE')")


class Experiment:
    """One experiment from validation to teardown (module docstring)."""

    def __init__(self, topology: Topology | Scenario | str | Path, *,
                 tdf: float | str | Policy | None = None, shaping: str = "dom0",
                 bridge: str = "ovs",
                 backend: str | Backend = "xl", runner: Runner | None = None,
                 xenstore: Any = None, out: str | Path | None = None, keep: bool = False,
                 warm: bool = False, offloads: bool = False, strict: bool = False,
                 ready_timeout: float = DEFAULT_READY_TIMEOUT_S,
                 command_timeout: float | None = DEFAULT_COMMAND_TIMEOUT_S,
                 params: dict[str, object] | None = None, link: str | None = None,
                 templates: set[str] | None | str = "installed",
                 monitor: bool = True, monitor_interval: float = DEFAULT_INTERVAL_S,
                 latency_probe: bool = True,
                 output_cap: int = DEFAULT_OUTPUT_CAP,
                 progress: Progress | None = None, replace: bool = False,
                 finish_limit: float = FINISH_LIMIT_S, meta: Mapping[str, Any] | None = None,
                 capture: Sequence[str | tuple[str, str]] = (),
                 show_output: NodeOutput | None = None):
        excepthook.install()    # a selena error ending the user's script is one line
        _check_options(params, monitor_interval=monitor_interval, ready_timeout=ready_timeout,
                       command_timeout=command_timeout, finish_limit=finish_limit)
        _check_values(out=out, output_cap=output_cap, link=link, meta=meta,
                      templates=templates, progress=progress, show_output=show_output,
                      flags={"keep": keep, "warm": warm, "offloads": offloads,
                             "strict": strict, "monitor": monitor,
                             "latency_probe": latency_probe, "replace": replace})

        # A scenario file comes back loaded (as a Scenario). Its TDF is set
        # once, below, not also while it loads (where an error would name
        # the CLI's --tdf); a file being loaded is captured with its own.
        # tdf="auto" or "auto:MIN-MAX": an adaptive TDF (selena.adaptive); the
        # run starts at the scenario's TDF clamped into MIN-MAX.
        self.adaptive, tdf = _adaptive_tdf(tdf)
        # While selena loads a scenario file (validate, plan, advise, sweep),
        # an Experiment the file constructs is recorded and the file stopped:
        # loading never deploys. A file that runs itself is refused here
        # unless only checked.
        from_file = isinstance(topology, str | Path)
        loaded = intercept(topology, tdf=None if from_file else tdf, params=params, link=link)
        if isinstance(loaded, Scenario):
            scenario = loaded
        elif isinstance(loaded, Topology):
            scenario = Scenario(loaded, source=loaded.name, params=dict(params or {}))
        else:
            raise ExperimentError(f"Experiment needs a Topology, a Scenario or a scenario "
                                  f"file, got {type(loaded).__name__}")
        if tdf is not None:
            try:
                scenario.topology.tdf = units.tdf(tdf)
            except UnitError as exc:
                raise ScenarioError(f"tdf: {exc}") from None
        if self.adaptive is not None:
            scenario.topology.tdf = self.adaptive.start(scenario.topology.tdf)
        try:
            self.placement = Placement(shaping)
        except ValueError:
            raise ExperimentError(f"shaping {shaping!r}: use dom0 or guest") from None
        if bridge not in ("ovs", "linux"):
            raise ExperimentError(f"bridge {bridge!r}: use ovs or linux")
        self.scenario = scenario
        # Now, as the file was loaded: a long run's file may be edited meanwhile.
        self.provenance = run_provenance(scenario.source)
        self.topology = scenario.topology
        self.params = dict(scenario.params) if params is None else dict(params)
        self.bridge = bridge
        self.out = Path(out) if out is not None else None
        self.keep = keep
        self.warm = warm
        self.strict = strict
        self.ready_timeout = ready_timeout
        self.command_timeout = command_timeout
        self.monitor_enabled = monitor
        self.monitor_interval = monitor_interval
        # The latency signal pings over the topology's links: a scenario that
        # must carry nothing but its own packets turns it off.
        self.latency_probe = latency_probe
        self.adaptive_start_reason = ""
        self.adaptive_start_calibrated = False
        self._adaptive_start()
        self.output_cap = output_cap
        # Every command's output as it comes (selena run --follow).
        self.show_output = show_output
        self._shown: SharedRelay | None = None
        self.monitor: Monitor | None = None
        self.fidelity: FidelityReport | None = None
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.templates = installed_templates() if templates == "installed" \
            else None if templates is None else set(templates)
        if isinstance(backend, Backend):
            self.backend = backend
        else:
            options: dict[str, Any] = {"offloads": offloads}
            if runner is not None:
                options["runner"] = runner
            if xenstore is not None:
                options["xenstore"] = xenstore
            self.backend = get_backend(backend, **options)
        self.host: HostInfo | None = None
        self._check_adaptive()
        self.controller_adaptive: Controller | None = None
        self.fidelity_segments: list[dict[str, Any]] = []
        if not self.backend.dilates and self.topology.tdf != 1.0:
            self.progress(f"the {self.backend.name} backend runs in real time: TDF 1, not "
                          f"{units.tdf_text(self.topology.tdf)}")
            self.topology.tdf = 1.0
        self.warnings: list[Problem] = []
        self.links_down: set[int] = set()   # indexes into topology.links (set_link)
        # Link and node changes applied during the run (meta.json `events`).
        self.events: list[dict[str, Any]] = []
        self._events_lock = threading.Lock()
        self._due = threading.local()       # the `at` time of the callback running
        self.deployment: Deployment | None = None
        self.controller: CommandChannel | None = None
        self.engine: Engine | None = None
        self.environment: dict[str, Any] = {}
        self.timings: dict[str, float] = {}         # real seconds of each stage
        self.started_at: float | None = None
        self.bundle: Path | None = None
        self.error: BaseException | None = None
        self._plan: Plan | None = None
        self._closed = False
        # replace: a deploy removes an experiment of the same name first
        # (otherwise the backend refuses with ExperimentExists).
        self.replace = replace
        self.finish_limit = float(finish_limit)
        self.meta = dict(meta or {})       # extra meta.json keys (a sweep's id)
        self._writer: BundleWriter | None = None
        self._signals = TerminateAsInterrupt()
        # Links to capture (exp.capture, --capture), checked now: (a, b) in
        # the order named; their recorders once running, and what they wrote.
        self.captures: list[tuple[str, str]] = []
        self._recorders: list[LinkRecorder] = []
        self._capture_info: list[dict[str, Any]] = []
        # capture="h1,s1" is one link, as capture=["h1,s1"].
        for item in [capture] if isinstance(capture, str) else capture:
            self._want_capture(*_capture_names(item))

    # -- before anything exists ----------------------------------------------------

    def _check_adaptive(self) -> None:
        """An adaptive TDF needs a backend that dilates and the monitor."""
        if self.adaptive is None:
            return
        if not self.backend.dilates:
            raise ExperimentError(f"tdf {self.adaptive.spec()}: the {self.backend.name} "
                                  "backend runs in real time and cannot change its TDF; use "
                                  "the xl backend or a fixed TDF")
        if not self.monitor_enabled:
            raise ExperimentError(f"tdf {self.adaptive.spec()}: the adaptive TDF reads the "
                                  "fidelity monitor's signals; turn the monitor on (drop "
                                  "--no-monitor / monitor=False) or give a fixed TDF")
        for node in sorted(self.topology.nodes.values(), key=lambda n: n.name):
            capped = self._capped_tdf_limit(node.cpu_share, node.cpu_time, node.vcpus)
            if capped is None:
                continue
            what, limit = capped
            if self.adaptive.max_tdf > limit:
                raise ExperimentError(
                    f"tdf {self.adaptive.spec()}: node {node.name} has {what}, which Xen "
                    f"can cap up to TDF {limit} only; give "
                    f"auto:{units.tdf_text(self.adaptive.min_tdf)}-{min(limit, 1000)} or "
                    "less")

    def _capped_tdf_limit(self, cpu_share: float | None, cpu_time: str,
                          vcpus: int) -> tuple[str, int] | None:
        """A capped guest's cap in words and the largest TDF Xen can cap it
        at (100 x its CPUs' worth / TDF, in whole percent); None: no cap, or
        a share whose worth the host's unknown CPU count leaves open."""
        host_cpus = self.host.cpus if self.host is not None else None
        if cpu_share is not None and host_cpus:
            return (f"cpu_share={cpu_share:g} of {host_cpus} CPUs",
                    max_capped_tdf(cpu_share * host_cpus))
        if cpu_time == "real":
            return f"cpu_time='real' with {vcpus} vCPU(s)", max_capped_tdf(vcpus)
        return None

    def check(self) -> list[Problem]:
        """Everything a deploy would check, creating nothing: raises
        TopologyError naming every problem (ResultsError for an `out` no
        bundle can go to); returns the warnings."""
        self.host = self.backend.host_info()
        self._check_adaptive()      # again: a cpu_share's limit needs the host's CPUs
        self.warnings = validate(self.topology, templates=self.templates, host=self.host,
                                 switch_profiles=switch_profiles(), strict=self.strict)
        if self.out is not None:
            check_target(self.out)
        return self.warnings

    def preflight(self) -> None:
        """The host checks a deploy runs first (HostNotReady in one line:
        not a Dom0, a stock hypervisor, ...), creating nothing: a sweep runs
        them once before its first run rather than fail every run."""
        self.backend.preflight(self.plan())

    def plan(self) -> Plan:
        """The validated plan (checks first if not done)."""
        if self._plan is None:
            if self.host is None:
                self.check()
            assert self.host is not None
            self._plan = make_plan(self.topology, bridge_kind=self.bridge,
                                   placement=self.placement, host_cpus=self.host.cpus)
        return self._plan

    def needs_agents(self) -> bool:
        """Whether the nodes must be configured through their agents once
        up (guest-side shaping, switch bridges and flows), so a deploy has
        to wait for them: the one place that decides it. A backend without
        agents configures its nodes itself."""
        plan = self.plan()
        return self.backend.guest_agents and (
            bool(plan.switches) or any(g.guest_shaping for g in plan.guests))

    def render(self) -> str:
        """What a deploy would run, as a shell script (runs nothing)."""
        plan = self.plan()
        text = self.backend.render(plan)
        if not self.backend.guest_agents:
            return text
        extra = []
        for guest in plan.guests:
            script = guest_shaping_script(guest)
            if script:
                extra.append(f"# guest-side shaping inside {guest.node}, through its agent:\n"
                             + _commented(script))
        for setup in plan.switches:
            bridge = bridge_scripts(setup)
            commands = [*bridge, *(f"{s}\n" for s in flow_scripts(setup))]
            if len(bridge) == 1:
                extra.append(f"# switch {setup.node}, through its agent:\n"
                             + _commented("".join(commands)))
            else:
                # Past one command's size the bridge setup is several commands.
                extra.append(f"# switch {setup.node}, through its agent, {len(commands)} "
                             "commands in order:\n"
                             + _commented("# next command\n".join(commands)))
        return text + ("\n" + "\n".join(extra) if extra else "")

    # -- bring up ------------------------------------------------------------------

    def deploy(self, *, wait: bool = True) -> Experiment:
        """Validate, plan, deploy and (wait=True) attach to every guest agent
        and configure the guests. On failure whatever was created is removed."""
        if self._closed:
            raise ExperimentError("this experiment was closed; create a new Experiment")
        if self.deployment is not None:
            raise ExperimentError(f"experiment {self.topology.name} is already deployed")
        if self.captures and self.out is None:
            raise ExperimentError("capturing a link needs a results bundle to hold it: "
                                  "give out=... (selena run always has one)")
        plan = self.plan()
        for warning in self.warnings:
            self.progress(f"warning: {warning}")
        # Not a Dom0, a stock hypervisor, no xenstored: one line now rather
        # than a failure half-way through creating guests.
        self.preflight()
        # Before the backend creates anything: a bad --out is refused now, not
        # after a long run (and the staging directory proves it writable).
        if self.out is not None:
            self._writer = BundleWriter.prepare(self.out)
        self._signals.install()
        self.started_at = time.time()
        begin = time.monotonic()
        try:
            self.deployment = self.backend.deploy(plan, progress=self.progress,
                                                  warm=self.warm, replace=self.replace)
        except BaseException:
            self._release()
            raise
        self.timings["deploy_s"] = time.monotonic() - begin
        try:
            # From before the guests have booted: the scenario's first frame is in.
            for a, b in self.captures:
                self._start_capture(a, b)
        except BaseException:
            self._abort_deploy()
            raise
        if not wait:
            if self.needs_agents():
                self._abort_deploy()
                raise ExperimentError("guest-side shaping and switches need the guest "
                                      "agents: deploy with wait")
            return self
        try:
            self._attach(plan)
        except BaseException:
            self._abort_deploy()
            raise
        return self

    def _attach(self, plan: Plan) -> None:
        assert self.deployment is not None
        begin = time.monotonic()
        late = self.backend.wait_up(self.deployment, self.ready_timeout, self.progress)
        if late:
            self.progress(f"not booted after {self.ready_timeout:g} s: {', '.join(late)}")
        self.controller = channel = self.backend.command_channel(self.topology.tdf,
                                                                 output_cap=self.output_cap)
        for node, domid in self.deployment.domids.items():
            channel.add_guest(node, domid)
        self.progress(f"waiting for {len(self.deployment.domids)} guest agents")
        channel.wait_ready(self.ready_timeout)
        # Unpaused to every agent ready: the guests' boot, in real seconds.
        self.timings["boot_to_agents_s"] = time.monotonic() - begin
        if self.backend.guest_agents:
            apply_guest_shaping(channel, plan, progress=self.progress)
        # Without agents the backend set the switches up itself.
        switches = Switches(channel, plan.switches if self.backend.guest_agents else [])
        switches.configure(progress=self.progress)
        self.environment = self._environment()
        deployment = self.deployment
        start_reason = self.adaptive_start_reason or None
        self.engine = Engine(channel, deployment.domids,
                             VirtualClock(self.topology.tdf, reason=start_reason),
                             crash=lambda node: self.backend.crash(deployment, node),
                             switches=switches,
                             out_dir=self._writer.staging if self._writer else None,
                             command_timeout=self.command_timeout, params=self.params,
                             output=self._writer.add if self._writer else None,
                             shown=self._shown_relay())
        if self.monitor_enabled:
            name = self.topology.name
            # Backends that cannot capture frames are judged without the spacing check.
            capture = (functools.partial(self.backend.capture_links, name)
                       if self.backend.captures_links else None)
            echo, path, note, floor_ms = self._latency_probe()
            self.monitor = Monitor(lambda: self.backend.load_sample(name),
                                   self.monitor_interval, capture=capture, echo=echo,
                                   path=path, latency_note=note, floor_ms=floor_ms).start()
        if self.adaptive is not None and self.monitor is not None:
            self.progress(self.adaptive.describe())
            if self.adaptive_start_calibrated:
                self.progress(self.adaptive_start_reason)
            monitor = self.monitor
            self.controller_adaptive = Controller(
                self.adaptive, self.monitor, self.engine.clock,
                lambda new, reason: self.set_tdf(new, reason=reason),
                latency=self.monitor.latency_excess,
                # A path whose probe has answered before: one that never does
                # (no ping in the guests) holds nothing back.
                latency_measurable=lambda: monitor.path is not None and any(
                    e.rtts_ms for e in list(monitor.echoes)),
                say=self.progress, host_cpus=self.host.cpus if self.host else None).start()

    def _adaptive_start(self) -> None:
        """An adaptive run starts at the scenario's TDF clamped into MIN-MAX,
        or, when this host's calibration predicts the latency path's round
        trip too slow there, higher up the ladder (calibrated_start)."""
        if self.adaptive is None:
            return
        self.adaptive_start_reason = (f"start of {self.adaptive.spec()} at the scenario's "
                                      "TDF clamped into MIN-MAX")
        path, _ = latency_path(self.topology) if self.latency_probe else (None, "")
        if path is None or self.topology.nodes[path.a].kind is not NodeKind.HOST:
            return
        cal = _host_calibration()
        if cal is None:
            return

        def predict(tdf: float) -> float:
            assert path is not None and cal is not None
            return _path_floor_ms(cal, path, tdf) / path.rtt_ms

        self.topology.tdf, self.adaptive_start_reason = calibrated_start(
            self.adaptive, self.topology.tdf, predict)
        self.adaptive_start_calibrated = True

    def _latency_probe(self) -> tuple[Callable[[threading.Event], EchoRound] | None,
                                      LatencyPath | None,
                                      str, float | None]:
        """The fidelity monitor's latency signal: pings between the host pair
        with the smallest configured round trip, over the topology's own
        links, through the control channel (see docs/fidelity.md for why not
        an echo of Dom0's); the calibrated floor if this host has one."""
        if not self.latency_probe:
            return None, None, "the latency probe is off (--no-latency-probe)", None
        path, note = latency_path(self.topology)
        if path is None:
            return None, None, note, None
        if self.topology.nodes[path.a].kind is not NodeKind.HOST:
            return None, None, f"{path.a} is not a host that can ping", None
        cal = _host_calibration()   # without one the rule goes without the floor
        floor_ms = _path_floor_ms(cal, path, self.topology.tdf) if cal is not None else None
        channel, engine = self.controller, self.engine
        assert channel is not None and engine is not None
        spec = CommandSpec(argv=tuple(echo_argv(path)), timeout_ns=round(ECHO_TIMEOUT_S * 1e9))

        def echo(stop: threading.Event) -> EchoRound:
            # None while paused: a frozen guest would answer only after the resume.
            while engine.clock.frozen:
                if stop.wait(0.2):
                    return EchoRound(time.monotonic(), 0, (), "")
            handle = channel.submit(path.a, spec)
            # Real seconds: the guest ends it after ECHO_TIMEOUT_S of its own time.
            deadline = time.monotonic() + ECHO_TIMEOUT_S * engine.tdf + ECHO_GRACE_S
            while not handle.wait_done(0.2):
                if engine.clock.frozen:
                    deadline += 0.2         # a pause: the guest's time stands still
                if stop.is_set() or time.monotonic() > deadline:
                    channel.kill(handle)        # ping prints what it has on SIGTERM
                    break
            if stop.is_set() and engine.clock.frozen and not handle.done:
                # The run ends paused: a frozen guest answers nothing, the
                # kill neither. The probe in flight goes unjudged (sent 0).
                return EchoRound(time.monotonic(), 0, (), "")
            result = channel.wait(handle, 10)
            rtts = tuple(parse_echoes(result.stdout.decode(errors="replace")))
            stderr = result.stderr.decode(errors="replace").strip()[-200:]
            error = "" if rtts or result.ok else \
                f"`{result.command}` {result.summary()}" + (f": {stderr}" if stderr else "")
            return EchoRound(time.monotonic(), len(rtts) if stop.is_set() else ECHO_COUNT,
                             rtts, error)

        return echo, path, "", floor_ms

    def _abort_deploy(self) -> None:
        self.progress(f"setting up the guests failed: removing {self.topology.name}")
        self._stop_adapting()
        self._stop_captures()
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        self._close_controller()
        try:
            self.backend.destroy(self.topology.name)
        except SelenaError as exc:
            self.progress(f"removing {self.topology.name} failed too: {exc}")
        self.deployment = None
        self._release()

    def _release(self) -> None:
        """No bundle and no more signal handling: a deploy that failed, or a
        detached experiment."""
        if self._writer is not None:
            self._writer.discard()
            self._writer = None
        self._signals.restore()

    def _environment(self) -> dict[str, Any]:
        host = self.host or self.backend.host_info()
        env: dict[str, Any] = {"backend": self.backend.name,
                               "xen_version": (host.hypervisor or "?").removeprefix("Xen "),
                               "dom0_kernel": host.dom0_kernel, "host_cpus": host.cpus,
                               "shaping": self.placement.value, "bridge": self.bridge,
                               "warnings": [str(w) for w in self.warnings]}
        assert self.controller is not None and self.deployment is not None
        first = next(iter(sorted(self.deployment.domids)), None)
        if first is not None:
            result = self.controller.run(first, CommandSpec(argv=("uname", "-r")), timeout=120)
            env["guest_kernel"] = result.stdout.decode(errors="replace").strip()
        return env

    # -- the scenario --------------------------------------------------------------

    def run_scenario(self, run: Callable[[Experiment], object] | None = None,
                     actions: list[Action] | None = None) -> None:
        """SELENA Listing-2 actions (in file order), then run(exp): by default
        those of the scenario this experiment was made from."""
        run_actions(self._running(), self.scenario.actions if actions is None else actions)
        fn = self.scenario.run if run is None else run
        if fn is not None:
            fn(self)

    def _running(self) -> Engine:
        if self.engine is None:
            raise ExperimentError("the experiment is not running: deploy() it first, or use "
                                  "`with Experiment(...) as exp:`")
        return self.engine

    @property
    def tdf(self) -> float:
        return self.engine.tdf if self.engine else self.topology.tdf

    @property
    def out_dir(self) -> Path | None:
        """Where a scenario may write derived files for the bundle: while the
        run is on, the staging directory that becomes `out` at the end."""
        if self._writer is not None:
            return self._writer.staging
        return self.out

    @property
    def domids(self) -> dict[str, int]:
        return dict(self.deployment.domids) if self.deployment else {}

    @property
    def metrics(self) -> dict[str, Metric]:
        return self.engine.metrics if self.engine else {}

    @property
    def switches(self) -> Switches | None:
        return self.engine.switches if self.engine else None

    def now(self) -> float:
        """Virtual seconds since the scenario started."""
        return self._running().now()

    def sleep(self, virtual_seconds: float) -> None:
        self._running().sleep(virtual_seconds)

    def at(self, t: float, fn: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> Future:
        """Run fn(*args, **kwargs) at virtual time t (seconds after the start).
        `fn` may be a change as a schedule file writes it ("link h1 s1
        delay=60ms", "link h1 s1 down", "node h2 crash": selena.schedule),
        checked now and applied at t."""
        engine = self._running()
        if isinstance(fn, str):
            event = parse_change(fn.split(), "exp.at")
            self.check_events([event])
            return engine.at(t, self.apply_event, event, t)

        def due(*args: Any, **kwargs: Any) -> Any:
            # A change fn makes (link.set, down, crash) records when it was due.
            self._due.t = t
            try:
                return fn(*args, **kwargs)
            finally:
                self._due.t = None

        return engine.at(t, due, *args, **kwargs)

    def schedule(self, events: Sequence[Event]) -> Future:
        """Apply each event (selena.schedule.load_events) at its virtual time,
        in time order, from one scenario thread (a long schedule holds no
        thread per event); all are checked first, so a bad one schedules
        none. The run lasts until the last one (within finish_limit)."""
        engine = self._running()
        ordered = sorted(events, key=lambda e: e.t or 0.0)
        self.check_events(ordered)

        def apply_all() -> None:
            for event in ordered:
                engine.clock.sleep_until(event.t or 0.0)
                self.apply_event(event, event.t)

        return engine.at(0.0, apply_all)

    def apply_event(self, event: Event, scheduled: float | None = None) -> None:
        """Apply one change now (the recorded event carries `scheduled`, the
        virtual time it was scheduled for)."""
        if event.target == "link":
            a, b = event.nodes
            if event.change == "set":
                self.set_link_values(a, b, _scheduled=scheduled, **dict(event.values))
            else:
                self.set_link(a, b, up=event.change == "up", _scheduled=scheduled)
        elif event.change == "set":
            self.set_cpu_share(event.nodes[0], checked_share(dict(event.values)["cpu_share"]),
                               _scheduled=scheduled)
        elif event.change == "crash":
            self.crash(event.nodes[0], _scheduled=scheduled)
        else:
            self.restart(event.nodes[0], _scheduled=scheduled)

    def parallel(self, *calls: Callable[[], Any]) -> list[Any]:
        return self._running().parallel(*calls)

    def cmd(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
            env: dict[str, str] | None = None, cwd: str | None = None,
            check: bool = False, on_output: OutputFollower | None = None) -> CommandResult:
        """Run a command in `node` and wait for it (see Engine.cmd; on_output
        gets its output as it comes)."""
        return self._running().cmd(node, command, timeout=timeout, env=env, cwd=cwd,
                                   check=check, on_output=on_output)

    def start(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
              env: dict[str, str] | None = None, cwd: str | None = None,
              show: bool = True) -> CommandHandle:
        """Start a command in the background (see Engine.start)."""
        return self._running().start(node, command, timeout=timeout, env=env, cwd=cwd,
                                     show=show)

    def wait(self, handle: CommandHandle, *, check: bool = False) -> CommandResult:
        """Wait for a started command (see Engine.wait)."""
        return self._running().wait(handle, check=check)

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        self._running().kill(handle, signal)

    def wait_listening(self, node: str, port: int, *,
                       timeout: float | None = LISTEN_TIMEOUT_S) -> None:
        """Wait until something in `node` listens on TCP `port` (see
        Engine.wait_listening): between starting a server and its clients."""
        self._running().wait_listening(node, port, timeout=timeout)

    def put(self, node: str, src: str | os.PathLike[str], dest: str, *,
            mode: int | None = None) -> Transfer:
        """Copy local file `src` to absolute path `dest` in `node` (a path
        ending in / or a directory there gets src's name; missing
        directories are made; `mode`, e.g. 0o755, defaults to src's). Whole
        or not at all, checked by sha256; up to 8 MiB. Recorded in the
        bundle's meta.json (`files`)."""
        self[node]
        return self._running().put(node, src, dest, mode=mode)

    def get(self, node: str, src: str, dest: str | os.PathLike[str]) -> Transfer:
        """Copy file `src` of `node` to local `dest` (a directory gets src's
        name), at most the output cap; recorded as put is."""
        self[node]
        return self._running().get(node, src, dest)

    def record(self, name: str, value: float | Sequence[float], *,
               expected: float | None = None, unit: str = "") -> Metric:
        """A named result for metrics.json (see Engine.record)."""
        return self._running().record(name, value, expected=expected, unit=unit)

    def set_switch_model(self, node: str, profile: str | None) -> None:
        self._running().set_switch_model(node, profile)

    def set_cpu_share(self, node: str, share: float | None, *,
                      _scheduled: float | None = None) -> None:
        """Cap node `node` at `share` (above 0, at most 1) of the host's CPUs
        per virtual second from now on, as add_host(cpu_share=) does from the
        start, following later TDF changes and a restart; None lifts it.
        Refused in one line, nothing changed, for a bad share, a node with
        cpu_time='real' or a cap Xen cannot give at the current TDF."""
        self._running()
        self[node]          # an unknown name: one line naming the nodes there are
        model = self.topology.nodes[node]
        try:
            share = checked_share(share)
        except ValueError as exc:
            raise ScenarioError(f"node {node}: {exc}") from None
        if model.cpu_time == "real":
            raise ExperimentError(f"node {node} has cpu_time='real', a cap of its own; a "
                                  "cpu_share would replace it: give the node one or the other")
        capped = self._capped_tdf_limit(share, model.cpu_time, model.vcpus)
        if capped is not None and self.adaptive is not None \
                and self.adaptive.max_tdf > capped[1]:
            # The controller's later raise would be refused half-way through the run.
            raise ExperimentError(f"node {node}: {capped[0]} can be capped up to TDF "
                                  f"{capped[1]} only, and the adaptive TDF goes up to "
                                  f"{units.tdf_text(self.adaptive.max_tdf)}: give a larger "
                                  "share")
        with self._event(f"node {node}", f"cpu_share={'none' if share is None else share}",
                         _scheduled):
            self.backend.set_cpu_share(self.topology.name, node, share, model.vcpus,
                                       self.progress)
            # A restart caps it the same; the model keeps the deploy's share
            # (meta.json's cpu_time is the start's, events the changes).
            self.plan().guest(node).cpu_share = share

    def crash(self, node: str, *, _scheduled: float | None = None) -> None:
        with self._event(f"node {node}", "crash", _scheduled):
            self._running().crash(node)

    def _restart_refusal(self, node: str) -> str | None:
        """Why this experiment cannot restart `node` whenever asked (None: it
        can): checked by restart() and, before a run, for scheduled restarts."""
        if not self.backend.restarts_nodes:
            return (f"node {node} restart: the {self.backend.name} backend cannot restart a "
                    "node (the xl backend can)")
        if self.placement is not Placement.DOM0:
            return (f"node {node} restart: links shaped inside the guests (shaping='guest') "
                    "are set up once per run; use Dom0 shaping (the default) to restart nodes")
        for a, b in self.captures:
            if a == node:
                return (f"node {node} restart: the capture of link {a},{b} is taken on {a}'s "
                        f"vif, which a restart replaces; capture it as {b},{a} (from the other "
                        "end) instead")
        return None

    def check_events(self, events: Sequence[Event]) -> None:
        """Scheduled changes checked before anything runs: against the
        topology (selena.schedule.check_events), and against what this
        experiment cannot do at any time (a restart or crash its backend
        cannot make, a link change with guest-side shaping). ScenarioError
        naming the event's FILE:LINE."""
        check_events(events, self.topology)
        for event in events:
            refusal = self._change_refusal(event)
            if refusal is not None:
                raise ScenarioError(f"{event.where}: {refusal}" if event.where else refusal)

    def _change_refusal(self, event: Event) -> str | None:
        if event.target == "link":
            if event.change == "set" and self.placement is not Placement.DOM0:
                a, b = event.nodes
                return (f"link {a} {b} set: {GUEST_SHAPED_LINKS_FIXED}")
            return None
        node = event.nodes[0]
        if event.change == "restart":
            return self._restart_refusal(node)
        if event.change == "set":
            if not self.backend.caps_cpu:
                return (f"node {node} cpu_share: the {self.backend.name} backend cannot cap a "
                        "node's CPU (the xl backend can)")
            return None
        if not self.backend.crashes_nodes:
            return f"node {node} crash: the {self.backend.name} backend cannot crash a node"
        return None

    def restart(self, node: str, *, _scheduled: float | None = None) -> int:
        """Boot node `node` again, as a power cycle would: its guest (or what
        a crash left) is destroyed and created again as deployed, at the
        current TDF, its links with their current shaping and down/up state,
        a switch with its bridge, flows and controller set up again. Commands
        running on it end `lost` ("node N restarted"); those started on it
        while it boots are refused; the call returns once its agent is ready
        (real time: a boot, seconds to minutes under emulation). Its guest
        kernel's clocks start again, as after any reboot. Recorded in the
        bundle's events like a crash. Returns the new domain id."""
        engine = self._running()
        self[node]          # an unknown name: one line naming the nodes there are
        refusal = self._restart_refusal(node)
        if refusal is not None:
            raise ExperimentError(refusal)
        if engine.clock.frozen:
            raise ExperimentError(f"node {node} restart: the experiment is paused: resume it "
                                  "first")
        channel, deployment = self.controller, self.deployment
        assert channel is not None and deployment is not None
        plan = self.plan()
        held = self.monitor.capture_held if self.monitor else contextlib.nullcontext()
        with self._event(f"node {node}", "restart", _scheduled):
            switches = engine.switches
            if switches is not None:
                switches.forget(node)
            channel.drop_guest(node, f"node {node} restarted")
            with held:
                domid = self.backend.restart(deployment, node, plan, self.progress)
            engine.domids[node] = domid
            channel.add_guest(node, domid)
            channel.wait_ready(self.ready_timeout, nodes=[node])
            for index in sorted(self.links_down):
                link = self.topology.links[index]
                if node in (link.a.node, link.b.node):
                    self.backend.set_link(self.topology.name, link, False, self.progress)
            if switches is not None and node in switches.setups:
                switches.configure(self.progress, nodes=[node])
        return domid

    def set_tdf(self, tdf: float | str, *, reason: str | None = None) -> float:
        """Change the TDF of every guest at one instant: guests paused together,
        their TDF set, the Dom0 shaping of every link re-rendered (links keep
        their virtual rate and delay), unpaused together. Virtual time stays
        continuous (exp.now()), and sleeps, `at`, command deadlines and the
        heartbeat limit follow. A bad TDF is refused before anything changes;
        a failure half-way puts every guest and link back at the old TDF.
        `reason` goes into the TDF timeline (the adaptive controller's).
        Returns the real instant (time.monotonic) the guests changed."""
        engine = self._running()
        if engine.clock.frozen:
            raise ExperimentError("the experiment is paused: resume it before changing the TDF")
        try:
            new = units.tdf(tdf)
        except UnitError as exc:
            raise ScenarioError(f"set_tdf: {exc}") from None
        first, last = self.backend.set_tdf(self.topology.name, new, self.progress)
        engine.clock.set_tdf(new, at=(first + last) / 2, reason=reason)
        if self.controller is not None:
            self.controller.set_tdf(new)
        return (first + last) / 2

    def links_between(self, a: str, b: str) -> list[Link]:
        """The point-to-point links joining nodes a and b (either way round);
        a one-line ScenarioError for an unknown node or no such link."""
        self[a], self[b]        # unknown names: one line naming the nodes there are
        return links_between(self.topology, a, b)

    def link(self, a: str, b: str) -> LinkHandle:
        """The link(s) between nodes a and b, to change during the run:
        `exp.link("h1", "s1").set(delay="20ms")`, `.down()`, `.up()`, or
        `exp.at(30, exp.link("h1", "s1").down)`."""
        self.links_between(a, b)        # unknown nodes or no link: one line now
        return LinkHandle(self, a, b)

    def node(self, name: str) -> Node:
        """The running node `name` (as exp[name]): cmd, start, crash, restart."""
        return self[name]

    def set_link(self, a: str, b: str, up: bool, *, _scheduled: float | None = None) -> None:
        """Take the link(s) between nodes a and b down (nothing passes; the
        guests' own interfaces stay up, as with a cable pulled out at the
        switch) or bring them back up, as Mininet's configLinkStatus."""
        self._running()
        links = self.links_between(a, b)
        with self._event(f"link {a} {b}", "up" if up else "down", _scheduled):
            for link in links:
                self.backend.set_link(self.topology.name, link, up, self.progress)
                index = next(i for i, x in enumerate(self.topology.links) if x is link)
                (self.links_down.discard if up else self.links_down.add)(index)

    def set_link_values(self, a: str, b: str, *, _scheduled: float | None = None,
                        **values: Any) -> None:
        """LinkHandle.set: new shaping values for the link(s) between a and b."""
        self._running()
        unknown = sorted(set(values) - set(LINK_VALUES))
        if unknown or not values:
            raise ScenarioError(f"link {a} {b} set: "
                                + (f"unknown value {unknown[0]!r}; " if unknown else "")
                                + f"give one or more of {', '.join(LINK_VALUES)} (e.g. "
                                "delay='20ms')")
        if self.placement is not Placement.DOM0:
            raise ExperimentError(f"link {a} {b} set: {GUEST_SHAPED_LINKS_FIXED}")
        links = self.links_between(a, b)
        changed = []
        for link in links:      # all checked before any changes
            candidate, warnings = changed_link(link, self.topology, **values)
            for warning in warnings:
                self.progress(f"warning: {warning}")
            changed.append((link, candidate))
        change = " ".join(f"{k}={value_text(k, v)}" for k, v in values.items())
        with self._event(f"link {a} {b}", change, _scheduled):
            for link, candidate in changed:
                self.backend.shape_link(self.topology.name, candidate, self.progress)
                # The model follows (the plan shares these Link objects).
                for name in ("rate_bps", "delay_s", "jitter_s", "loss", "queue_packets",
                             "given"):
                    setattr(link, name, getattr(candidate, name))

    @contextlib.contextmanager
    def _event(self, target: str, change: str, scheduled: float | None) -> Iterator[None]:
        """Record a change once applied: its virtual time, the real time
        (seconds since the scenario's start, as tdf_timeline's real_s) and
        the TDF at the middle of applying it, how long that took (real
        seconds) and, from a schedule, the virtual time it was due."""
        engine = self._running()
        before = time.monotonic()
        yield
        after = time.monotonic()
        middle = (before + after) / 2
        clock = engine.clock
        entry: dict[str, Any] = {
            "virtual_s": round(clock.now() - (after - middle) / clock.tdf, 6),
            "real_s": round(middle - clock.started, 6), "tdf": clock.tdf,
            "target": target, "change": change, "took_real_s": round(after - before, 6)}
        scheduled = scheduled if scheduled is not None else getattr(self._due, "t", None)
        if scheduled is not None:
            entry["scheduled_s"] = scheduled
        with self._events_lock:
            self.events.append(entry)
        self.progress(f"{target} {change} at virtual {entry['virtual_s']:.3f} s")

    def capture(self, a: str, b: str | None = None) -> None:
        """Capture the link between nodes a and b (or `capture("h1,s1")`)
        into the bundle's capture-<a>-<b>.pcapng, timestamped in virtual
        time (selena/capture.py): from the deploy when asked before it, from
        now when the experiment runs. The capture is taken on the Dom0 vif
        of a's end and holds both directions."""
        pair = self._want_capture(a, b)
        if pair is not None and self.engine is not None:
            self._start_capture(*pair)

    def _want_capture(self, a: str, b: str | None = None) -> tuple[str, str] | None:
        """Check one capture (one line naming the links there are); None
        if it is asked for already."""
        if not self.backend.link_capture:
            raise ExperimentError(CAPTURE_REFUSED.format(name=self.backend.name))
        text = a if b is None else f"{a},{b}"
        pairs = [(link.a.node, link.b.node) for link in self.topology.links]
        pair = parse_link(text, sorted(self.topology.nodes), pairs)
        if any({*pair} == {*seen} for seen in self.captures):
            return None
        self.captures.append(pair)
        return pair

    def _start_capture(self, a: str, b: str) -> None:
        if self._writer is None:
            raise ExperimentError("capturing a link needs a results bundle to hold it: "
                                  "give out=... (selena run always has one)")
        link = self.links_between(a, b)[0]
        source = self.backend.capture_source(self.topology.name, link, a)
        raw = self._writer.staging / f".capture-{a}-{b}.real.pcapng"
        try:
            recorder = LinkRecorder(a, b, source, raw).start()
        except OSError as exc:
            raise ExperimentError(f"capture {a},{b}: cannot open {source.iface} "
                                  f"({exc.strerror or exc}); run as root in Dom0") from None
        self._recorders.append(recorder)
        self.progress(f"capturing {a}-{b} on {source.iface} ({a}'s end, both directions)")

    def _stop_captures(self) -> None:
        for recorder in self._recorders:
            recorder.stop()
            recorder.raw.unlink(missing_ok=True)
        self._recorders = []

    def _finish_captures(self) -> None:
        """The run's captures into the bundle, in virtual time (its timeline)."""
        engine, recorders, self._recorders = self.engine, self._recorders, []
        if engine is None or self._writer is None:
            self._recorders = recorders
            self._stop_captures()
            return
        clock = engine.clock
        timeline = clock.timeline()
        if clock.frozen:    # ended paused: virtual time stood still from then on
            timeline.append({"tdf": clock.tdf, "real_s": clock.real_elapsed(),
                             "virtual_s": clock.now()})
        # Virtual second 0 as a wall-clock instant (the kernel stamps frames
        # with CLOCK_REALTIME; the clock runs on CLOCK_MONOTONIC).
        origin_ns = time.time_ns() - time.monotonic_ns() + round(clock.started * 1e9)
        for recorder in recorders:
            try:
                info = recorder.finish(self._writer.staging, origin_ns, timeline)
            except (OSError, SelenaError) as exc:
                recorder.raw.unlink(missing_ok=True)
                info = {"link": f"{recorder.a}-{recorder.b}", "error": str(exc)}
                self.progress(f"capture {recorder.a}-{recorder.b} not written: {exc}")
            info["virtual_origin"] = origin_ns / 1e9
            self._capture_info.append(info)

    @property
    def paused(self) -> bool:
        return self.engine is not None and self.engine.clock.frozen

    def pause(self) -> float:
        """Freeze every guest's virtual time at one instant (the backend's
        freeze: guests paused, clocks and timers standing still); the
        experiment's own virtual clock stands still with them. Commands
        wait until resume(). Returns the virtual time of the pause."""
        engine = self._running()
        if engine.clock.frozen:
            raise ExperimentError("the experiment is paused already")
        if self.controller is not None:
            # No heartbeat comes while frozen: that is not a lost guest.
            self.controller.hold_heartbeats(True)
        before = time.monotonic()
        try:
            self.backend.freeze(self.topology.name, self.progress)
        except BaseException:
            if self.controller is not None:
                self.controller.hold_heartbeats(False)
            raise
        virtual = engine.clock.freeze(at=(before + time.monotonic()) / 2)
        if self.monitor is not None:
            self.monitor.pause()
        return virtual

    def resume(self) -> float:
        """Restart virtual time where pause() stopped it, losing none."""
        engine = self._running()
        if not engine.clock.frozen:
            raise ExperimentError("the experiment is not paused")
        before = time.monotonic()
        self.backend.thaw(self.topology.name, self.progress)
        virtual = engine.clock.thaw(at=(before + time.monotonic()) / 2)
        if self.controller is not None:
            self.controller.hold_heartbeats(False)
        if self.monitor is not None:
            self.monitor.resume()
        return virtual

    def domid(self, node: str) -> int:
        return self._running().domid(node)

    def __getitem__(self, name: str) -> Node:
        if name not in self.topology.nodes:
            raise ScenarioError(f"no node named {name!r} in experiment {self.topology.name} "
                                f"(have {', '.join(sorted(self.topology.nodes))})")
        return Node(self, name)

    @property
    def hosts(self) -> list[Node]:
        return [Node(self, n.name) for n in self.topology.nodes.values()
                if n.kind is NodeKind.HOST]

    # -- the end -------------------------------------------------------------------

    def close(self, error: BaseException | None = None) -> Path | None:
        """End the run: wait (at most finish_limit real seconds) for `at`
        callbacks and record commands left running, write the bundle (when
        `out` is set), detach and tear down (unless keep; into the warm pool
        when warm). `error` is what ended the run early, if anything: it goes
        into the bundle, and a teardown or bundle failure is then reported,
        not raised, so that the caller's exception carries on. Without one, a
        failure is raised after the teardown. Ctrl-C (or SIGTERM, SIGHUP)
        while waiting skips the waiting, records the run as interrupted and
        is raised after the teardown; during the teardown it is ignored. Safe
        to call twice; returns the bundle."""
        if self._closed:
            return self.bundle
        self._closed = True
        late_error: BaseException | None = None
        teardown_error: SelenaError | None = None
        bundle_error: ResultsError | None = None
        with _EndOfRun(self.progress) as end:
            # The run's TDF stays as it is from here to the teardown.
            self._stop_adapting()
            if self.engine is not None:
                late_error = self._finish_engine(self.engine, end,
                                                 isinstance(error, KeyboardInterrupt))
            self.error = error or end.interrupt or late_error
            if self.monitor is not None:
                monitor = self.monitor
                self.fidelity = monitor.stop()
                self.monitor = None
                self._cover_segments(monitor.samples, monitor.echoes, monitor.path)
            self._finish_captures()
            if self._writer is not None:
                try:
                    if self.deployment is not None:
                        self.bundle = self._write_bundle(self._writer, self.error)
                    else:
                        self._writer.discard()
                except ResultsError as exc:
                    bundle_error = exc
                finally:
                    self._writer = None
            self._close_controller()
            if self._shown is not None:         # every command has ended by now
                self._shown.stop()
                self._shown = None
            try:
                if self.deployment is not None and not self.keep:
                    self.backend.destroy(self.topology.name, pool=self.warm)
                elif self.deployment is not None:
                    self.progress(f"kept experiment {self.topology.name} "
                                  f"(selena destroy {self.topology.name})")
            except SelenaError as exc:
                teardown_error = exc
            finally:
                self.backend.close()
        self._signals.restore()
        if bundle_error is not None:
            self.progress(f"the results bundle was not written: {bundle_error}")
        if teardown_error is not None:
            self.progress(f"teardown failed: {teardown_error}")
        if error is not None:
            return self.bundle              # the caller's exception carries on
        first = end.interrupt or bundle_error or teardown_error or late_error
        if first is not None:
            raise first
        return self.bundle

    def _shown_relay(self) -> SharedRelay | None:
        if self.show_output is not None and self._shown is None:
            self._shown = SharedRelay(self.show_output)
        return self._shown

    def _finish_engine(self, engine: Engine, end: _EndOfRun,
                       interrupted: bool) -> BaseException | None:
        """The end-of-run waits, each cut short by a signal: the first skips
        the wait for `at` callbacks (a run interrupted already skips it), the
        next the wait for commands left running; both are bounded by
        finish_limit. Returns the scenario's first late error (an `at`
        callback's)."""
        deadline = time.monotonic() + self.finish_limit
        errors: list[BaseException] = []
        try:
            if engine.clock.frozen:
                # Ended paused: virtual time stands still, so no `at` callback
                # comes due and no guest moves; waiting would only run out
                # the finish limit (killing a frozen command waits too).
                callbacks = engine.pending_scheduled()
                self.progress("the run ended paused: not waiting for the commands left running"
                              + (f" or the {callbacks} `at` callback(s) not run"
                                 if callbacks else "") + "; tearing down")
                engine.end_commands(None, "the run ended paused (virtual time stood still)")
                return None
            if not interrupted and not end.wait(lambda: errors.extend(
                    engine.wait_scheduled(deadline, self.finish_limit))):
                self.progress("interrupted: not waiting for the scenario's `at` callbacks; "
                              "collecting the commands left running (interrupt again to "
                              "stop waiting for them)")
            again = interrupted or end.interrupt is not None
            if not end.wait(lambda: engine.end_commands(deadline)):
                self.progress(("interrupted again" if again else "interrupted")
                              + ": not waiting for the commands left running; tearing down")
                engine.end_commands(None)
        except Exception as exc:  # noqa: BLE001 - recorded, and the teardown goes on
            errors.insert(0, exc)
        finally:
            engine.stop()
        return errors[0] if errors else None

    def detach(self) -> None:
        """Leave the experiment running (selena deploy): close the control
        channel and connections, write nothing, tear nothing down."""
        self._closed = True
        self._stop_adapting()
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        self._stop_captures()
        self._close_controller()
        self._release()
        self.backend.close()

    def _stop_adapting(self) -> None:
        if self.controller_adaptive is not None:
            self.controller_adaptive.stop()

    def _cover_segments(self, samples: list[Any], echoes: list[EchoRound],
                        path: LatencyPath | None) -> None:
        """The verdict covers every TDF segment: each judged on its own
        samples, the worst wins (selena.adaptive.judge_segments)."""
        if self.fidelity is None or self.engine is None:
            return
        clock = self.engine.clock
        timeline = clock.timeline()
        if len(timeline) < 2:
            return
        self.fidelity_segments = judge_segments(samples, timeline, clock.started,
                                                self.fidelity.interval_s, echoes, path)
        cover_segments(self.fidelity, self.fidelity_segments)

    def _close_controller(self) -> None:
        if self.controller is not None:
            self.controller.close()
            self.controller = None

    def _write_bundle(self, writer: BundleWriter, error: BaseException | None) -> Path:
        engine = self.engine
        env = dict(self.environment)
        env["timings"] = dict(self.timings)
        env["provenance"] = dict(self.provenance)
        if engine is not None:
            env["tdf_timeline"] = engine.clock.timeline()
            env["events"] = list(self.events)
            if engine.transfers:
                env["files"] = [t.to_json() for t in engine.transfers]
            env["params"] = {k: repr(v) if not isinstance(v, int | float | str | bool)
                             else v for k, v in engine.params.items()}
        if self._capture_info:
            env["captures"] = list(self._capture_info)
        if self.controller_adaptive is not None:
            env["adaptive"] = self.controller_adaptive.to_json()
        elif self.adaptive is not None:
            env["adaptive"] = {"policy": self.adaptive.to_json(), "decisions": []}
        fidelity = self.fidelity.to_json() if self.fidelity else None
        if fidelity is not None and self.fidelity_segments:
            fidelity["segments"] = self.fidelity_segments
        info = error_info(error) if error is not None else None
        try:
            return writer.finish(topo=self.topology, records=engine.records if engine else [],
                                 environment=env, started=self.started_at or time.time(),
                                 finished=time.time(),
                                 metrics=engine.metrics if engine else {}, error=info,
                                 fidelity=fidelity,
                                 extra=self.meta)
        except ResultsError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a value JSON cannot hold
            writer.discard()
            raise ResultsError(f"results bundle {writer.target} not written: {exc}") from exc

    def __enter__(self) -> Experiment:
        return self.deploy()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(exc)


def _path_floor_ms(cal: Calibration, path: LatencyPath, tdf: float) -> float:
    """The calibrated floor of the latency probe's path at `tdf` (virtual ms):
    one link's calibrated extra times the links on the path, for echoes
    ECHO_GAP_S apart."""
    return path.links * cal.extra_ms(tdf, ECHO_GAP_S, path.rtt_ms)


def _host_calibration() -> Calibration | None:
    """This host's latency calibration (`selena calibrate`), or None: none
    made is the usual case; one that cannot be read is said (the run goes
    on without it, as with none)."""
    path = default_calibration_path()
    if not path.exists():
        return None
    try:
        return Calibration.load(path)
    except SelenaError as exc:
        log.warning("%s; going without the calibrated latency floor", exc)
        return None


def _adaptive_tdf(tdf: float | str | Policy | None) -> tuple[Policy | None, float | str | None]:
    """(the adaptive policy, None) for tdf="auto[:MIN-MAX]" or a Policy;
    (None, tdf) for a fixed TDF. A bad auto spec is one line naming the fix."""
    if isinstance(tdf, Policy):
        return tdf, None
    if isinstance(tdf, str):
        try:
            policy = parse_spec(tdf)
        except AdaptiveSpecError as exc:
            raise ScenarioError(f"tdf: {exc}") from None
        if policy is not None:
            return policy, None
    return None, tdf


def error_info(error: BaseException) -> dict[str, Any]:
    """How the bundle records a failed or interrupted run: the user's frames only."""
    frames = user_frames(error.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
    info: dict[str, Any] = {
        "status": "interrupted" if isinstance(error, KeyboardInterrupt) else "failed",
        "type": type(error).__name__, "message": describe(error), "where": where,
        "traceback": [f"{f.filename}:{f.lineno} in {f.name}: {f.line}" for f in frames]}
    if isinstance(error, SignalInterrupt):
        info["signal"] = error.name
    elif isinstance(error, KeyboardInterrupt):
        info["signal"] = "SIGINT"
    return info


class _EndOfRun:
    """Signals while a run ends. Within wait(): the first Ctrl-C, SIGTERM or
    SIGHUP cuts that waiting step short (the run is then interrupted).
    Otherwise (the bundle, the teardown) a signal is noted, not obeyed: half
    a teardown would leave guests and bridges behind. Main thread only."""

    SIGNALS = (signal.SIGINT, *TERMINATING)

    def __init__(self, progress: Progress):
        self.progress = progress
        self.previous: dict[int, Any] = {}
        self.raising = False
        self.interrupt: KeyboardInterrupt | None = None

    def __enter__(self) -> _EndOfRun:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        restore_handlers(self.previous)

    def _handle(self, signum: int, _frame: object) -> None:
        if self.raising:
            self.raising = False
            raise KeyboardInterrupt() if signum == signal.SIGINT else SignalInterrupt(signum)
        self.progress("tearing down; Ctrl-C is ignored until that is done")

    def wait(self, step: Callable[[], object]) -> bool:
        """Run a waiting step that a signal may cut short; False if one did."""
        try:
            self.raising = True
            try:
                step()
            finally:
                self.raising = False
        except KeyboardInterrupt as exc:
            if self.interrupt is None:
                self.interrupt = exc
            return False
        return True


def _commented(script: str) -> str:
    return "\n".join(f"#   {line}" for line in script.rstrip().splitlines())


__all__ = ["FINISH_LIMIT_S", "Experiment", "LinkHandle", "Node", "SignalInterrupt", "error_info",
           "installed_templates"]
