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
everything down: also when the body raises or on Ctrl-C, and then the
bundle records the error and the exception goes on (so the script or CLI
exits non-zero).
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

from selena import units
from selena.backends import Backend, Deployment, get_backend
from selena.compat import Action
from selena.control.channel import (
    DEFAULT_OUTPUT_CAP,
    CommandHandle,
    CommandResult,
    Controller,
)
from selena.control.protocol import CommandSpec
from selena.engine import DEFAULT_COMMAND_TIMEOUT_S, Engine, VirtualClock, run_actions
from selena.errors import (
    ExperimentError,
    Problem,
    ScenarioError,
    SelenaError,
    UnitError,
    ValidationError,
)
from selena.fidelity import DEFAULT_INTERVAL_S, FidelityReport, Monitor
from selena.hostinfo import HostInfo
from selena.loader import Scenario, describe, load_scenario, user_frames
from selena.metrics import Metric
from selena.model import NodeKind, Topology
from selena.openflow import Switches
from selena.paths import switch_profiles
from selena.plan import TEMPLATE_ROOT, Plan, make_plan
from selena.results import write_bundle
from selena.runner import Runner
from selena.shaping import Placement
from selena.shaping.guest import apply_guest_shaping
from selena.validate import validate

log = logging.getLogger(__name__)

Progress = Callable[[str], None]
# Real seconds for every guest to boot and its agent to report ready.
DEFAULT_READY_TIMEOUT_S = 600.0


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

    def crash(self) -> None:
        self.exp.crash(self.name)

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


class Experiment:
    """One experiment from validation to teardown (module docstring)."""

    def __init__(self, topology: Topology | Scenario | str | Path, *,
                 tdf: float | str | None = None, shaping: str = "dom0", bridge: str = "ovs",
                 backend: str | Backend = "xl", runner: Runner | None = None,
                 xenstore: Any = None, out: str | Path | None = None, keep: bool = False,
                 warm: bool = False, offloads: bool = False, strict: bool = False,
                 ready_timeout: float = DEFAULT_READY_TIMEOUT_S,
                 command_timeout: float | None = DEFAULT_COMMAND_TIMEOUT_S,
                 params: dict[str, object] | None = None, link: str | None = None,
                 templates: set[str] | None | str = "installed",
                 monitor: bool = True, monitor_interval: float = DEFAULT_INTERVAL_S,
                 output_cap: int = DEFAULT_OUTPUT_CAP,
                 progress: Progress | None = None):
        # While selena loads a scenario file (validate, plan, advise, sweep),
        # an Experiment the file constructs is recorded and the file stopped:
        # loading never deploys. A file that runs itself is refused here
        # unless only checked. (selena.loader.intercept)
        from selena.loader import intercept

        topology = intercept(topology, tdf=tdf, params=params, link=link)  # type: ignore[assignment]
        if isinstance(topology, str | Path):
            scenario = load_scenario(str(topology), tdf=tdf, link_spec=link, params=params)
        elif isinstance(topology, Scenario):
            scenario = topology
        elif isinstance(topology, Topology):
            scenario = Scenario(topology, source=topology.name, params=dict(params or {}))
        else:
            raise ExperimentError(f"Experiment needs a Topology, a Scenario or a scenario "
                                  f"file, got {type(topology).__name__}")
        if tdf is not None:
            try:
                scenario.topology.tdf = units.tdf(tdf)
            except UnitError as exc:
                raise ScenarioError(f"tdf: {exc}") from None
        try:
            self.placement = Placement(shaping)
        except ValueError:
            raise ExperimentError(f"shaping {shaping!r}: use dom0 or guest") from None
        if bridge not in ("ovs", "linux"):
            raise ExperimentError(f"bridge {bridge!r}: use ovs or linux")
        self.scenario = scenario
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
        if output_cap < 0:
            raise ValidationError(f"output cap {output_cap} is negative")
        self.output_cap = output_cap
        self.monitor: Monitor | None = None
        self.fidelity: FidelityReport | None = None
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.templates = installed_templates() if templates == "installed" else templates
        if isinstance(backend, Backend):
            self.backend = backend
        else:
            options: dict[str, Any] = {"offloads": offloads}
            if runner is not None:
                options["runner"] = runner
            if xenstore is not None:
                options["xenstore"] = xenstore
            self.backend = get_backend(backend, **options)
        if not self.backend.dilates and self.topology.tdf != 1.0:
            self.progress(f"the {self.backend.name} backend runs in real time: TDF 1, not "
                          f"{units.tdf_text(self.topology.tdf)}")
            self.topology.tdf = 1.0
        self.warnings: list[Problem] = []
        self.deployment: Deployment | None = None
        self.controller: Controller | None = None
        self.engine: Engine | None = None
        self.environment: dict[str, Any] = {}
        self.timings: dict[str, float] = {}         # real seconds of each stage
        self.host: HostInfo | None = None
        self.started_at: float | None = None
        self.bundle: Path | None = None
        self.error: BaseException | None = None
        self._plan: Plan | None = None
        self._closed = False

    # -- before anything exists ----------------------------------------------------

    def check(self) -> list[Problem]:
        """Everything a deploy would check, creating nothing: raises
        TopologyError naming every problem; returns the warnings."""
        self.host = self.backend.host_info()
        self.warnings = validate(self.topology, templates=self.templates, host=self.host,
                                 switch_profiles=switch_profiles(), strict=self.strict)
        return self.warnings

    def plan(self) -> Plan:
        """The validated plan (checks first if not done)."""
        if self._plan is None:
            if self.host is None:
                self.check()
            assert self.host is not None
            self._plan = make_plan(self.topology, bridge_kind=self.bridge,
                                   placement=self.placement, host_cpus=self.host.cpus)
        return self._plan

    def render(self) -> str:
        """What a deploy would run, as a shell script (runs nothing)."""
        from selena.openflow import bridge_script, flow_scripts
        from selena.plan import guest_shaping_script

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
            extra.append(f"# switch {setup.node}, through its agent:\n"
                         + _commented("".join([bridge_script(setup),
                                               *(f"{s}\n" for s in flow_scripts(setup))])))
        return text + ("\n" + "\n".join(extra) if extra else "")

    # -- bring up ------------------------------------------------------------------

    def deploy(self, *, wait: bool = True) -> Experiment:
        """Validate, plan, deploy and (wait=True) attach to every guest agent
        and configure the guests. On failure whatever was created is removed."""
        if self._closed:
            raise ExperimentError("this experiment was closed; create a new Experiment")
        if self.deployment is not None:
            raise ExperimentError(f"experiment {self.topology.name} is already deployed")
        plan = self.plan()
        for warning in self.warnings:
            self.progress(f"warning: {warning}")
        self.started_at = time.time()
        begin = time.monotonic()
        self.deployment = self.backend.deploy(plan, progress=self.progress, warm=self.warm)
        self.timings["deploy_s"] = time.monotonic() - begin
        if not wait:
            if any(g.guest_shaping for g in plan.guests) or plan.switches:
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
        self.controller = self.backend.command_channel(self.topology.tdf,
                                                       output_cap=self.output_cap)
        for node, domid in self.deployment.domids.items():
            self.controller.add_guest(node, domid)
        self.progress(f"waiting for {len(self.deployment.domids)} guest agents")
        self.controller.wait_ready(self.ready_timeout)
        # Unpaused to every agent ready: the guests' boot, in real seconds.
        self.timings["boot_to_agents_s"] = time.monotonic() - begin
        if self.backend.guest_agents:
            apply_guest_shaping(self.controller, plan, progress=self.progress)
        # Without agents the backend set the switches up itself.
        switches = Switches(self.controller,
                            plan.switches if self.backend.guest_agents else [])
        switches.configure(progress=self.progress)
        self.environment = self._environment()
        deployment = self.deployment
        self.engine = Engine(self.controller, deployment.domids,
                             VirtualClock(self.topology.tdf),
                             crash=lambda node: self.backend.crash(deployment, node),
                             switches=switches, out_dir=self.out,
                             command_timeout=self.command_timeout, params=self.params)
        if self.monitor_enabled:
            name = self.topology.name
            # Backends that cannot capture frames are judged without the spacing check.
            capture = (functools.partial(self.backend.capture_links, name)
                       if self.backend.captures_links else None)
            self.monitor = Monitor(lambda: self.backend.load_sample(name),
                                   self.monitor_interval, capture=capture).start()

    def _abort_deploy(self) -> None:
        self.progress(f"setting up the guests failed: removing {self.topology.name}")
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        self._close_controller()
        try:
            self.backend.destroy(self.topology.name)
        except SelenaError as exc:
            self.progress(f"removing {self.topology.name} failed too: {exc}")
        self.deployment = None

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
        self._running()
        run_actions(self, self.scenario.actions if actions is None else actions)
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

    def at(self, t: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run fn(*args, **kwargs) at virtual time t (seconds after the start)."""
        return self._running().at(t, fn, *args, **kwargs)

    def parallel(self, *calls: Callable[[], Any]) -> list[Any]:
        return self._running().parallel(*calls)

    def cmd(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
            env: dict[str, str] | None = None, cwd: str | None = None,
            check: bool = False) -> CommandResult:
        """Run a command in `node` and wait for it (see Engine.cmd)."""
        return self._running().cmd(node, command, timeout=timeout, env=env, cwd=cwd,
                                   check=check)

    def start(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
              env: dict[str, str] | None = None, cwd: str | None = None) -> CommandHandle:
        """Start a command in the background (see Engine.start)."""
        return self._running().start(node, command, timeout=timeout, env=env, cwd=cwd)

    def wait(self, handle: CommandHandle, *, check: bool = False) -> CommandResult:
        """Wait for a started command (see Engine.wait)."""
        return self._running().wait(handle, check=check)

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        self._running().kill(handle, signal)

    def record(self, name: str, value: float | Sequence[float], *,
               expected: float | None = None, unit: str = "") -> Metric:
        """A named result for metrics.json (see Engine.record)."""
        return self._running().record(name, value, expected=expected, unit=unit)

    def set_switch_model(self, node: str, profile: str | None) -> None:
        self._running().set_switch_model(node, profile)

    def crash(self, node: str) -> None:
        self._running().crash(node)

    def set_tdf(self, tdf: float | str) -> float:
        """Change the TDF of every guest at one instant: guests paused together,
        their TDF set, the Dom0 shaping of every link re-rendered (links keep
        their virtual rate and delay), unpaused together. Virtual time stays
        continuous (exp.now()), and sleeps, `at`, command deadlines and the
        heartbeat limit follow. A bad TDF is refused before anything changes;
        a failure half-way puts every guest and link back at the old TDF.
        Returns the real instant (time.monotonic) the guests changed."""
        engine = self._running()
        try:
            new = units.tdf(tdf)
        except UnitError as exc:
            raise ScenarioError(f"set_tdf: {exc}") from None
        first, last = self.backend.set_tdf(self.topology.name, new, self.progress)
        engine.clock.set_tdf(new, at=(first + last) / 2)
        if self.controller is not None:
            self.controller.set_tdf(new)
        return (first + last) / 2

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
        """End the run: record commands left running, write the bundle (when
        `out` is set), detach and tear down (unless keep; into the warm pool
        when warm). `error` is what ended the run early, if anything: it goes
        into the bundle, and a teardown failure is then reported, not raised,
        so that the caller's exception carries on. Safe to call twice;
        returns the bundle."""
        if self._closed:
            return self.bundle
        self._closed = True
        late_error: BaseException | None = None
        teardown_error: SelenaError | None = None
        with _sigint_deferred(self.progress):
            if self.engine is not None:
                try:
                    self.engine.finish(raise_errors=error is None)
                except Exception as exc:  # noqa: BLE001 - a scheduled call of the scenario's
                    late_error = exc
            self.error = error or late_error
            if self.monitor is not None:
                self.fidelity = self.monitor.stop()
                self.monitor = None
            if self.out is not None and self.deployment is not None:
                self.bundle = self._write_bundle(self.error)
            self._close_controller()
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
        if teardown_error is not None:
            if self.error is None:
                raise teardown_error
            self.progress(f"teardown failed as well: {teardown_error}")
        if late_error is not None and error is None:
            raise late_error
        return self.bundle

    def detach(self) -> None:
        """Leave the experiment running (selena deploy): close the control
        channel and connections, write nothing, tear nothing down."""
        self._closed = True
        if self.monitor is not None:
            self.monitor.stop()
            self.monitor = None
        self._close_controller()
        self.backend.close()

    def _close_controller(self) -> None:
        if self.controller is not None:
            self.controller.close()
            self.controller = None

    def _write_bundle(self, error: BaseException | None) -> Path:
        assert self.out is not None
        engine = self.engine
        env = dict(self.environment)
        env["timings"] = dict(self.timings)
        if engine is not None:
            env["tdf_timeline"] = engine.clock.timeline()
            env["params"] = {k: repr(v) if not isinstance(v, int | float | str | bool)
                             else v for k, v in engine.params.items()}
        info = error_info(error) if error is not None else None
        return write_bundle(self.out, topo=self.topology,
                            records=engine.records if engine else [],
                            environment=env, started=self.started_at or time.time(),
                            finished=time.time(), metrics=engine.metrics if engine else {},
                            error=info,
                            fidelity=self.fidelity.to_json() if self.fidelity else None)

    def __enter__(self) -> Experiment:
        return self.deploy()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(exc)


def error_info(error: BaseException) -> dict[str, Any]:
    """How the bundle records a failed or interrupted run: the user's frames only."""
    frames = user_frames(error.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None
    return {"status": "interrupted" if isinstance(error, KeyboardInterrupt) else "failed",
            "type": type(error).__name__, "message": describe(error), "where": where,
            "traceback": [f"{f.filename}:{f.lineno} in {f.name}: {f.line}" for f in frames]}


class _sigint_deferred:  # noqa: N801 - used as a context manager
    """While tearing down, a Ctrl-C is noted, not obeyed: half a teardown would
    leave guests and bridges behind. Only in the main thread (signals)."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.previous: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            def note(_signum: int, _frame: object) -> None:
                self.progress("tearing down; Ctrl-C is ignored until that is done")

            self.previous = signal.signal(signal.SIGINT, note)

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _commented(script: str) -> str:
    return "\n".join(f"#   {line}" for line in script.rstrip().splitlines())


__all__ = ["Experiment", "Node", "error_info", "installed_templates"]
