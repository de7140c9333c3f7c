"""The xl backend: creates a plan's guests paused, sets their TDF, wires and
shapes their links in Dom0, then unpauses them all together. Every `xl`,
`selena-tdf`, Dom0 networking command and Xenstore access of selena happens
here, through one Runner and one Xenstore connection.

Everything created is tagged: domains by the `selena-` name prefix and the
Xenstore marker /local/domain/<domid>/selena/experiment, OVS bridges by
external_ids:selena-experiment, Linux bridges by their interface alias
`selena:<experiment>`. Each object is recorded in the experiment's state file
as soon as it exists, so a deploy that fails (or is interrupted) is rolled
back, and `destroy`/`clean` remove exactly what selena created and nothing
else. A lock file serialises deploy, destroy and clean on one host.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import platform
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import jinja2

from selena import units
from selena.backends.base import (
    Backend,
    Deployment,
    LinkCapture,
    LoadSample,
    Progress,
    QdiscStats,
)
from selena.control.keys import Key, control_keys
from selena.errors import (
    BackendError,
    CleanupError,
    CommandError,
    ControlError,
    StateFileError,
    ValidationError,
    XenstoreError,
)
from selena.hostinfo import HostInfo
from selena.model.cpus import credit_cap
from selena.plan import GuestPlan, Plan, pool_key
from selena.runner import Runner
from selena.shaping.plan import real_rate_bps, real_seconds

if TYPE_CHECKING:
    from selena.control.xenstore import XenstoreConnection

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = Path("/run/selena")
MARKER = "selena/experiment"
# Warm pool (SELENA's warm start): idle guests named selena-pool-<key>-<n>,
# paused, with no vifs, still tagged so `clean` removes them.
POOL_PREFIX = "selena-pool-"
POOL_MARKER = "pool"
OFFLOADS = ("tso", "gso", "gro", "tx", "rx", "sg")
LINUX_BRIDGE_ALIAS = "selena:"
EXPERIMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
# Guests created at once: xl spends much of a create waiting for hotplug
# scripts, so a few in flight beat one at a time even on two CPUs.
DEFAULT_PARALLEL = 4
VIF_CONNECTED = "4"
# Domains one `selena-tdf pause/unpause/freeze/thaw` call takes.
TDF_TOOL_DOMAINS_MAX = 257
TAP_START_S = 30.0

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("selena.backends", "templates"),
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False,
)
# What may appear inside a quoted xl config value (and inside a vif spec,
# whose fields are split on ',' and '='). Everything rendered passes this
# check, so no value can end its string or add a setting.
_XL_VALUE = re.compile(r"[A-Za-z0-9_./:=, +@%-]*")
_VIF_FIELD = re.compile(r"[A-Za-z0-9_./:@%-]*")
# A disk image path: the last field of an xl disk spec (no ',' or '=').
_DISK_PATH = re.compile(r"/[A-Za-z0-9_./@%+-]*")


def _refusing(pattern: re.Pattern[str], what: str, why: str = "") -> Callable[[object], str]:
    """A template filter passing a value that matches `pattern` whole, and
    refusing anything else with a ValidationError naming it."""
    def check(value: object) -> str:
        text = str(value)
        if not pattern.fullmatch(text):
            raise ValidationError(f"{what} {text!r} cannot go into an xl {why}")
        return text
    return check


_ENV.filters["xl"] = _refusing(_XL_VALUE, "value", "config (quotes, backslashes, newlines "
                               "and most punctuation are refused)")
_ENV.filters["vif"] = _refusing(_VIF_FIELD, "value", "vif spec")
_ENV.filters["disk"] = _refusing(_DISK_PATH, "disk image", "disk spec (an absolute path of "
                                 "letters, digits and _ . / @ % + -)")


def xl_config(plan: Plan, guest: GuestPlan) -> str:
    """The guest's xl configuration (every value checked as it is rendered)."""
    return _ENV.get_template("xl.cfg.j2").render(experiment=plan.experiment, guest=guest)


@dataclass
class DeployState:
    experiment: str
    tdf: float
    domains: dict[str, int] = field(default_factory=dict)     # domain name -> domid
    bridges: dict[str, str] = field(default_factory=dict)     # bridge -> "ovs" | "linux"
    pool_keys: dict[str, str] = field(default_factory=dict)   # domain name -> plan.pool_key
    nodes: dict[str, str] = field(default_factory=dict)       # node -> domain name
    # Dom0-side shaping per vif, in the link's own (virtual) terms, so that a
    # TDF change can re-render it: rate_bps, delay_s, jitter_s, loss, queue.
    shaping: dict[str, dict[str, float | None]] = field(default_factory=dict)
    tap_pid: int | None = None      # the vif tap (selena/backends/vif_tap.py)
    vif_nodes: dict[str, str] = field(default_factory=dict)   # vif -> "h1 eth0"
    # Guests with cpu_time "real": domain name -> vCPUs (their cap follows the TDF).
    real_cpu: dict[str, int] = field(default_factory=dict)
    vif_bridges: dict[str, str] = field(default_factory=dict)  # vif -> its bridge

    @classmethod
    def load(cls, path: Path) -> DeployState:
        try:
            data = json.loads(path.read_text())
            state = cls(str(data["experiment"]), float(data["tdf"]),
                        {str(k): int(v) for k, v in dict(data["domains"]).items()},
                        {str(k): str(v) for k, v in dict(data["bridges"]).items()},
                        {str(k): str(v) for k, v in dict(data.get("pool_keys", {})).items()},
                        {str(k): str(v) for k, v in dict(data.get("nodes", {})).items()},
                        {str(k): {str(f): (None if x is None else float(x))
                                  for f, x in dict(v).items()}
                         for k, v in dict(data.get("shaping", {})).items()},
                        None if data.get("tap_pid") is None else int(data["tap_pid"]),
                        {str(k): str(v) for k, v in dict(data.get("vif_nodes", {})).items()},
                        {str(k): int(v) for k, v in dict(data.get("real_cpu", {})).items()},
                        {str(k): str(v) for k, v in dict(data.get("vif_bridges", {})).items()})
        except OSError as exc:
            raise StateFileError(f"state file {path}: cannot read it: {exc.strerror}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StateFileError(f"state file {path} is corrupt ({type(exc).__name__}: "
                                 f"{exc}); `selena clean` sweeps by tags instead") from None
        for kind in state.bridges.values():
            if kind not in ("ovs", "linux"):
                raise StateFileError(f"state file {path} is corrupt: unknown bridge kind "
                                     f"{kind!r}")
        return state

    def deployment(self) -> Deployment:
        return Deployment(self.experiment, self.tdf,
                          {node: self.domains[name] for node, name in self.nodes.items()
                           if name in self.domains}, "xl")


def cap_command(domid: int | str, cap: int) -> list[str]:
    """Cap a domain's CPU time (percent of one CPU, 0 = none). Xen's default
    scheduler, credit2, enforces it every 10 ms of real time."""
    return ["xl", "sched-credit2", "-d", str(domid), "-c", str(cap)]


class _Actions(Protocol):
    """Where deploy steps go: run for real, or printed as a script."""

    def run(self, argv: Sequence[str], check: bool = True) -> None: ...

    def write_file(self, path: Path, text: str) -> None: ...

    def write_keys(self, keys: list[Key]) -> None: ...

    def domid(self, guest: GuestPlan, known: int | None = None) -> str: ...


def _batches(domids: Sequence[int | str]) -> list[list[str]]:
    items = [str(d) for d in domids]
    return [items[i:i + TDF_TOOL_DOMAINS_MAX]
            for i in range(0, len(items), TDF_TOOL_DOMAINS_MAX)]


class XlBackend(Backend):
    name = "xl"
    captures_links = True

    def __init__(self, runner: Runner | None = None, state_dir: Path = DEFAULT_STATE_DIR, *,
                 xenstore: XenstoreConnection | None = None, offloads: bool = False,
                 parallel: int = DEFAULT_PARALLEL, vif_tap: bool = True):
        self.runner = runner or Runner()
        self.state_dir = Path(state_dir)
        self.offloads = offloads
        self.vif_tap = vif_tap
        self.parallel = max(1, parallel)
        self._xs = xenstore
        self._owns_xs = xenstore is None
        self._state_lock = threading.Lock()
        self._host_lock = threading.RLock()
        self._host_lock_depth = 0
        self._host_lock_file: object = None
        self._domain_names: dict[int, str] = {}     # domid -> name, as read from Xenstore
        self._names_lock = threading.Lock()

    # -- connection and host -------------------------------------------------------

    def xenstore(self) -> XenstoreConnection:
        if self._xs is None:
            from selena.control.xenstore import XenstoreConnection

            self._xs = XenstoreConnection()
        return self._xs

    def close(self) -> None:
        if self._xs is not None and self._owns_xs:
            self._xs.close()
            self._xs = None

    def host_info(self) -> HostInfo:
        """From `selena-tdf host` (the fields of `xl info` selena uses, without
        an xl start-up); fields stay None where the tool is missing or silent."""
        try:
            out = self.runner.run(["selena-tdf", "host"], check=False).stdout
        except CommandError:
            return HostInfo("xl", dom0_kernel=platform.release())
        fields = {k.strip(): v.strip() for k, _, v in
                  (line.partition(":") for line in out.splitlines())}

        def number(key: str) -> int | None:
            value = fields.get(key, "")
            return int(value) if value.isdigit() else None

        xen = None
        if "xen_major" in fields:
            xen = (f"Xen {fields['xen_major']}.{fields.get('xen_minor', '?')}"
                   f"{fields.get('xen_extra', '')}")
        return HostInfo("xl", cpus=number("nr_cpus"), free_memory_mb=number("free_memory"),
                        hypervisor=xen, dom0_kernel=platform.release())

    # -- deploy --------------------------------------------------------------------

    def render(self, plan: Plan) -> str:
        script = _Script(self)
        script.comment(f"selena plan: experiment {plan.experiment}, TDF {plan.tdf_text}, "
                       f"{len(plan.guests)} guests, {len(plan.segments)} bridges, shaping in "
                       f"{plan.placement.value}. Nothing was run.")
        script.comment("1. bridges, one per link or hub")
        for seg in plan.segments:
            self._bridge_steps(script, plan.experiment, seg.bridge, seg.kind)
        script.comment(f"2. guests, created paused (up to {self.parallel} at a time): "
                       "config, create, control keys, TDF, shaping, offloads")
        for guest in plan.guests:
            self._guest_steps(script, plan, guest, None)
        vifs = [vif.name for guest in plan.guests for vif in guest.vifs]
        if vifs and self.vif_tap:
            script.comment("3. the vif tap (selena/backends/vif_tap.py): transmit buffers go "
                           "back to the guests once Dom0 has each packet")
            script.background(self._tap_argv(plan.experiment, vifs))
        script.comment("4. start: every guest unpaused together")
        domids = [script.domid(guest) for guest in plan.guests]
        for batch in _batches(domids):
            script.run(["selena-tdf", "unpause", *batch])
        return script.text()

    def deploy(self, plan: Plan, progress: Progress | None = None,
               warm: bool = False) -> Deployment:
        """warm: reuse guests of the same template, memory and vCPUs from the
        pool; their interfaces and bridges are rebuilt like new ones."""
        say = progress or (lambda msg: log.info("%s", msg))
        with self._locked(say):
            pool = self._pooled() if warm else {}
            path = self._state_path(plan.experiment)
            if path.exists():
                say(f"experiment {plan.experiment} exists: destroying it first")
                self._teardown(DeployState.load(path))
            state = DeployState(plan.experiment, plan.tdf)
            state.shaping = {vif: {"rate_bps": link.rate_bps, "delay_s": link.delay_s,
                                   "jitter_s": link.jitter_s, "loss": link.loss,
                                   "queue": link.queue_packets}
                             for vif, link in plan.shaped}
            state.vif_nodes = {vif.name: f"{guest.node} eth{vif.index}"
                               for guest in plan.guests for vif in guest.vifs}
            state.vif_bridges = {vif.name: vif.bridge
                                 for guest in plan.guests for vif in guest.vifs}
            state.real_cpu = {guest.domain_name: guest.vcpus for guest in plan.guests
                              if guest.cpu_time == "real"}
            self._save(state)
            act = _Exec(self, state)
            try:
                for seg in plan.segments:
                    self._bridge_steps(act, plan.experiment, seg.bridge, seg.kind)
                    with self._state_lock:
                        state.bridges[seg.bridge] = seg.kind
                        self._save(state)
                reuse: dict[str, tuple[str, int] | None] = {}
                for guest in plan.guests:
                    idle = pool.get(pool_key(guest))
                    reuse[guest.node] = idle.pop() if idle else None
                self._bring_up(act, plan, reuse, say)
                self._start_tap(state, plan)
                self._unpause([state.domains[guest.domain_name] for guest in plan.guests])
                say(f"{len(state.domains)} of {len(plan.guests)} guests running at TDF "
                    f"{plan.tdf_text}")
            except BaseException:
                say(f"deploy of {plan.experiment} failed: removing what it created")
                self._teardown(state)
                raise
        return state.deployment()

    def _bring_up(self, act: _Exec, plan: Plan,
                  reuse: dict[str, tuple[str, int] | None], say: Progress) -> None:
        """Every guest's steps, several guests at a time."""
        done = [0]
        count_lock = threading.Lock()

        def one(guest: GuestPlan) -> None:
            pooled = reuse.get(guest.node)
            self._guest_steps(act, plan, guest, pooled)
            with count_lock:
                done[0] += 1
                n = done[0]
            how = "reused a pooled guest as" if pooled else "created"
            say(f"{how} {guest.domain_name} ({n} of {len(plan.guests)}, paused)")

        workers = min(self.parallel, len(plan.guests)) or 1
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deploy") as pool:
            futures: list[Future[None]] = [pool.submit(one, g) for g in plan.guests]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in finished if f.exception() is not None), None)
            if failed is not None:
                for future in futures:
                    future.cancel()
                wait(futures)       # let the creates in flight finish, then roll back
                raise failed.exception()  # type: ignore[misc]

    def _tap_argv(self, experiment: str, vifs: list[str]) -> list[str]:
        return [sys.executable or "python3", "-m", "selena.backends.vif_tap", experiment,
                str(self.state_dir), *vifs]

    def _start_tap(self, state: DeployState, plan: Plan) -> None:
        """Start the vif tap of the experiment and wait until it holds every vif."""
        vifs = [vif.name for guest in plan.guests for vif in guest.vifs]
        if not vifs or not self.vif_tap:
            return
        log_file = self.state_dir / plan.experiment / "vif-tap.log"
        pid = self.runner.daemon(self._tap_argv(plan.experiment, vifs), log_file)
        with self._state_lock:
            state.tap_pid = pid
            self._save(state)
        deadline = time.monotonic() + TAP_START_S
        while "tapping" not in (log_file.read_text() if log_file.exists() else ""):
            if time.monotonic() > deadline or (pid and not Path(f"/proc/{pid}").exists()):
                text = log_file.read_text() if log_file.exists() else ""
                raise BackendError(f"the vif tap of {plan.experiment} did not start: "
                                   f"{text.strip()[-300:] or 'no output'}")
            time.sleep(0.05)

    def _stop_tap(self, state: DeployState) -> None:
        pid = state.tap_pid
        if not pid:
            return
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return      # gone already
        # Only our own tap of this experiment (the pid may have been reused).
        if b"selena.backends.vif_tap" in cmdline and state.experiment.encode() in cmdline:
            os.kill(pid, signal.SIGTERM)

    def _bridge_steps(self, act: _Actions, experiment: str, bridge: str, kind: str) -> None:
        if kind == "ovs":
            act.run(["ovs-vsctl", "add-br", bridge, "--", "set", "bridge", bridge,
                     f"external_ids:selena-experiment={experiment}"])
        else:
            act.run(["ip", "link", "add", bridge, "type", "bridge"])
            act.run(["ip", "link", "set", bridge, "alias", f"{LINUX_BRIDGE_ALIAS}{experiment}"])
            act.run(["ip", "link", "set", bridge, "up"])

    def _guest_steps(self, act: _Actions, plan: Plan, guest: GuestPlan,
                     pooled: tuple[str, int] | None) -> None:
        if pooled is None:
            cfg = self.state_dir / plan.experiment / f"{guest.node}.cfg"
            act.write_file(cfg, xl_config(plan, guest))
            act.run(["xl", "create", "-p", "-q", str(cfg)])
            try:
                domid = act.domid(guest)
            except BackendError:    # created but not recorded: teardown would miss it
                act.run(["xl", "destroy", guest.domain_name], check=False)
                raise
        else:
            pooled_name, pooled_domid = pooled
            act.run(["xl", "rename", pooled_name, guest.domain_name])
            domid = act.domid(guest, known=pooled_domid)
            for vif in guest.vifs:
                act.run(["xl", "network-attach", domid, f"mac={vif.mac}", f"bridge={vif.bridge}",
                         f"script={vif.script}", f"vifname={vif.name}"])
            if guest.cpus:
                act.run(["xl", "vcpu-pin", domid, "all", guest.cpus])
        # The experiment marker and the agent's control keys, before it runs.
        act.write_keys(control_keys(domid, plan.experiment, guest.net))  # type: ignore[arg-type]
        act.run(["selena-tdf", "set", domid, plan.tdf_text])
        # A pooled guest may carry the cap of its last experiment: always set it.
        if guest.cpu_time == "real" or pooled is not None:
            act.run(cap_command(domid, guest.cpu_cap(plan.tdf)))
        for argv in plan.shaping_at(plan.tdf, {vif.name for vif in guest.vifs}):
            act.run(argv)
        if not self.offloads:
            for vif in guest.vifs:
                act.run(["ethtool", "-K", vif.name, *[x for o in OFFLOADS for x in (o, "off")]],
                        check=False)

    def _pooled(self) -> dict[str, list[tuple[str, int]]]:
        """Idle pooled guests by pool key: [(domain name, domid)]."""
        pool: dict[str, list[tuple[str, int]]] = {}
        for name, domid in self._tagged_domains().items():
            if name.startswith(POOL_PREFIX):
                key = name[len(POOL_PREFIX):].rsplit("-", 1)[0]
                pool.setdefault(key, []).append((name, domid))
        for idle in pool.values():
            idle.sort(reverse=True)     # pop() takes the lowest-numbered
        return pool

    # -- boot progress and faults --------------------------------------------------

    def wait_up(self, deployment: Deployment, timeout: float,
                progress: Progress | None = None, poll: float = 0.5,
                clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> list[str]:
        """Wait until every guest's kernel has connected its first vif.

        The netfront driver setting its Xenstore state to 4 (Connected) is the
        earliest sign, visible from Dom0 for any guest OS and without the guest
        agent, that a guest has booted; a guest without interfaces counts as up
        once its agent has written its state. Returns the nodes not up.
        """
        say = progress or (lambda msg: log.info("%s", msg))
        xs = self.xenstore()
        pending = dict(deployment.domids)
        total = len(pending)
        deadline = clock() + timeout
        while pending:
            for node, domid in sorted(pending.items()):
                vif = xs.read_or_none(f"/local/domain/{domid}/device/vif/0/state")
                agent = None if vif is not None else \
                    xs.read_or_none(f"/local/domain/{domid}/selena/agent/state")
                if (vif or b"").strip() == VIF_CONNECTED.encode() or \
                        (vif is None and agent is not None):
                    del pending[node]
                    say(f"{node} up ({total - len(pending)} of {total} up)")
            if not pending or clock() >= deadline:
                break
            sleep(poll)
        return sorted(pending)

    def freeze(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        """Stop the virtual time of every guest of the experiment at one real
        instant (one `selena-tdf freeze` of them all): the guests are paused,
        their clocks and timers stand still, and `xl unpause` cannot run them.
        Returns (virtual ns, Xen real ns) of the freeze."""
        with self._locked(progress):
            return self._freeze_thaw("freeze", self.state(experiment), progress)

    def thaw(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        """Restart the virtual time of every guest at one real instant: no
        virtual time is lost, and the guests stay exactly as far apart in
        virtual time as they were. Returns (virtual ns, Xen real ns)."""
        with self._locked(progress):
            return self._freeze_thaw("thaw", self.state(experiment), progress)

    def _freeze_thaw(self, op: str, state: DeployState,
                     progress: Progress | None) -> tuple[int, int]:
        say = progress or (lambda msg: log.info("%s", msg))
        domids = [str(d) for name, d in sorted(state.domains.items())
                  if self._is_ours(name, d, state.experiment)]
        if not domids:
            raise BackendError(f"experiment {state.experiment} has no running guests")
        out = self.runner.run(["selena-tdf", op, *domids]).stdout
        m = re.search(r"at virtual (\d+) ns \(Xen time (\d+) ns\)", out)
        if m is None:
            raise BackendError(f"selena-tdf {op} printed {out.strip()!r}")
        say(f"{state.experiment}: {'froze' if op == 'freeze' else 'thawed'} "
            f"{len(domids)} guests at once")
        return int(m.group(1)), int(m.group(2))

    def set_tdf(self, experiment: str, tdf: float,
                progress: Progress | None = None) -> tuple[float, float]:
        """Change every guest of a running experiment to `tdf` together:
        all paused, each guest's TDF set, the Dom0 shaping of every vif
        re-rendered for the new TDF (links keep their virtual rate, delay,
        jitter and loss), all unpaused. On a failure every guest and qdisc
        goes back to the old TDF and the error names what failed. Returns the
        monotonic real instants of the first and the last TDF set."""
        say = progress or (lambda msg: log.info("%s", msg))
        new = units.tdf(tdf)
        with self._locked(say):
            state = self.state(experiment)
            old = state.tdf
            domids = list(state.domains.values())
            try:    # refused before anything changes
                caps = {name: credit_cap(vcpus, new, "real")
                        for name, vcpus in state.real_cpu.items() if name in state.domains}
            except ValueError as exc:
                raise BackendError(f"set-tdf {units.tdf_text(new)}: {exc}") from None
            done: list[int] = []
            paused: list[int] = []
            first = last = time.monotonic()
            failed = True
            try:
                for batch in _batches(domids):  # each batch is paused whole or not at all
                    self.runner.run(["selena-tdf", "pause", *batch])
                    paused += [int(d) for d in batch]
                first = time.monotonic()
                for name, domid in state.domains.items():
                    try:
                        self.runner.run(["selena-tdf", "set", str(domid), units.tdf_text(new)])
                    except CommandError as exc:
                        raise BackendError(f"set-tdf {units.tdf_text(new)}: guest {name} "
                                           f"(domain {domid}) refused: {exc}") from None
                    done.append(domid)
                last = time.monotonic()
                self._shape(state, new)
                for name, cap in caps.items():
                    try:
                        self.runner.run(cap_command(state.domains[name], cap))
                    except CommandError as exc:
                        raise BackendError(f"set-tdf {units.tdf_text(new)}: capping the CPU "
                                           f"of {name} at {cap}%: {exc}") from None
                failed = False
            except BaseException:
                for domid in done:
                    self.runner.run(["selena-tdf", "set", str(domid), units.tdf_text(old)],
                                    check=False)
                for name, vcpus in state.real_cpu.items():
                    if name in state.domains:
                        self.runner.run(cap_command(state.domains[name],
                                                    credit_cap(vcpus, old, "real")), check=False)
                try:
                    self._shape(state, old)
                except BackendError as exc:
                    say(f"restoring the shaping at TDF {units.tdf_text(old)} failed: {exc}")
                raise
            finally:
                # After a failure the error being raised matters more than
                # one guest left paused; that is said, not raised.
                self._unpause(paused, say=say if failed else None)
            state.tdf = new
            self._save(state)
        say(f"{experiment}: TDF {units.tdf_text(old)} -> {units.tdf_text(new)} for "
            f"{len(domids)} guests and {len(state.shaping)} shaped vifs")
        return first, last

    def _unpause(self, domids: Sequence[int], say: Progress | None = None) -> None:
        """Unpause the guests from one process: they start microseconds
        apart, not one `xl unpause` (0.2 s under emulation) apart. With `say`
        a failure is reported through it instead of raised."""
        for batch in _batches(domids):
            result = self.runner.run(["selena-tdf", "unpause", *batch], check=say is None)
            if say is not None and result.returncode != 0:
                say(f"guests left paused: {result.stderr.strip()}")

    def domid_by_name(self, name: str) -> int:
        """The domid of a domain selena just created, from Xenstore, where
        libxl writes /local/domain/<id>/name before `xl create` returns: a
        read per domain not seen before instead of an `xl domid` per guest."""
        xs = self.xenstore()
        for _attempt in range(2):
            with self._names_lock:
                for entry in xs.directory("/local/domain"):
                    if entry.isdigit() and int(entry) not in self._domain_names:
                        value = xs.read_or_none(f"/local/domain/{entry}/name")
                        if value is not None:
                            self._domain_names[int(entry)] = value.decode()
                found = [d for d, n in self._domain_names.items() if n == name]
                for domid in found:     # the id may have been destroyed since it was read
                    value = xs.read_or_none(f"/local/domain/{domid}/name")
                    if value is not None and value.decode() == name:
                        return domid
                self._domain_names.clear()  # stale (a reused id): read them all again
        raise BackendError(f"domain {name} is not in Xenstore (/local/domain/*/name) "
                           "after xl create")

    def _shape(self, state: DeployState, tdf: float) -> None:
        from selena.model import Endpoint, Link
        from selena.shaping import shaping_commands

        for vif, spec in state.shaping.items():
            queue = spec.get("queue")
            link = Link(Endpoint("", 0), Endpoint("", 0), rate_bps=spec.get("rate_bps"),
                        delay_s=spec.get("delay_s") or 0.0,
                        jitter_s=spec.get("jitter_s") or 0.0, loss=spec.get("loss") or 0.0,
                        queue_packets=None if queue is None else int(queue))
            for argv in shaping_commands(vif, link, tdf, reshape=True):
                try:
                    self.runner.run(argv)
                except CommandError as exc:
                    raise BackendError(f"re-shaping {vif} at TDF {units.tdf_text(tdf)} "
                                       f"failed: {exc}") from None

    def load_sample(self, experiment: str) -> LoadSample:
        """Two commands: `xl vcpu-list` (CPU seconds of Dom0's and the
        experiment's vCPUs) and `tc -s -j qdisc show` (the shaped vifs)."""
        state = self.state(experiment)
        names = {name: node for node, name in state.nodes.items()}
        try:
            vcpus = self.runner.run(["xl", "vcpu-list"], timeout=30).stdout
            qdiscs = self.runner.run(["tc", "-s", "-j", "qdisc", "show"], timeout=30).stdout \
                if state.shaping else "[]"
        except CommandError as exc:
            raise BackendError(f"sampling load of {experiment}: {exc}") from None
        sample = LoadSample(time.monotonic())
        for name, cpu_s in parse_vcpu_list(vcpus).items():
            if name == "Domain-0":
                sample.dom0_vcpu_s = cpu_s
            elif name in names:
                sample.guest_vcpu_s[names[name]] = cpu_s
        sample.qdiscs = {vif: stats for vif, stats in parse_qdisc_stats(qdiscs).items()
                         if vif in state.shaping}
        sample.vif_nodes = {vif: state.vif_nodes.get(vif, "") for vif in sample.qdiscs}
        return sample

    def capture_links(self, experiment: str, seconds: float) -> list[LinkCapture]:
        """Frames through each rate-limited shaped vif and into its bridge's
        other vifs, from packet sockets in this process (vif_capture.py).
        Links with jitter are left out: netem reorders their frames, so when
        a frame became ready to leave is not known."""
        from selena.backends import vif_capture

        state = self.state(experiment)
        checked = {vif: spec for vif, spec in state.shaping.items()
                   if spec.get("rate_bps") and not spec.get("jitter_s")
                   and vif in state.vif_bridges}
        if not checked:
            return []
        peers = {vif: [other for other, bridge in state.vif_bridges.items()
                       if bridge == state.vif_bridges[vif] and other != vif]
                 for vif in checked}
        vifs = sorted(set(checked) | {p for ps in peers.values() for p in ps})
        # Departures in the first (real) delay of a window have their arrivals
        # before it: lengthen the window by the longest delay.
        longest = real_seconds(max(float(spec.get("delay_s") or 0.0)
                                   for spec in checked.values()), state.tdf)
        try:
            frames = vif_capture.capture(vifs, seconds + longest)
        except OSError as exc:
            raise BackendError(f"capturing frames on the vifs of {experiment}: {exc}") from None
        captures = []
        for vif, spec in sorted(checked.items()):
            senders = " + ".join(state.vif_nodes.get(p, p) for p in peers[vif])
            captures.append(LinkCapture(
                vif, f"{senders or '?'} -> {state.vif_nodes.get(vif, vif)}",
                rate_bps=real_rate_bps(float(spec["rate_bps"] or 0), state.tdf),
                delay_s=real_seconds(float(spec.get("delay_s") or 0.0), state.tdf),
                departures=frames[vif].outgoing,
                arrivals=sorted((f for p in peers[vif] for f in frames[p].incoming),
                                key=lambda f: f.t),
                dropped=frames[vif].dropped + sum(frames[p].dropped for p in peers[vif]),
                started=frames[vif].started))
        return captures

    def raw_create_seconds(self, plan: Plan, bridge: str = "sbraw0") -> float:
        """Benchmark baseline (selena lab bench-deploy): the sum of plain
        `xl create` times for the plan's guests, one after the other, on a
        bridge of their own; everything is removed again."""
        self.runner.run(["ovs-vsctl", "--may-exist", "add-br", bridge])
        total = 0.0
        names = []
        try:
            for guest in plan.guests:
                raw = dataclasses.replace(
                    guest, domain_name=f"raw-{guest.node}",
                    vifs=[dataclasses.replace(v, name=f"raw{v.name[-6:]}", bridge=bridge)
                          for v in guest.vifs])
                cfg = self.state_dir / "raw" / f"{raw.domain_name}.cfg"
                cfg.parent.mkdir(parents=True, exist_ok=True)
                cfg.write_text(xl_config(plan, raw))
                names.append(raw.domain_name)
                total += self.runner.run(["xl", "create", "-q", str(cfg)]).duration
        finally:
            for name in names:
                self.runner.run(["xl", "destroy", name], check=False)
            self.runner.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)
        return total

    def crash(self, deployment: Deployment, node: str) -> None:
        domid = deployment.domids.get(node)
        if domid is None:
            raise BackendError(f"no node named {node!r} in experiment {deployment.experiment}")
        self.runner.run(["xl", "destroy", str(domid)])

    # -- teardown ------------------------------------------------------------------

    def destroy(self, experiment: str, pool: bool = False) -> None:
        """Remove an experiment; with pool=True its guests go to the warm pool
        (vifs detached, control keys removed, paused) instead of being destroyed."""
        path = self._state_path(experiment)
        with self._locked():
            if not path.exists():
                raise BackendError(f"no experiment named {experiment!r} is deployed")
            self._teardown(DeployState.load(path), pool=pool)

    def clean(self) -> list[str]:
        """Remove every selena-tagged object on this host: each experiment it
        can, then whatever still carries a tag (crashed deploys, lost or corrupt
        state files). Failures are collected and raised together at the end."""
        removed: list[str] = []
        failures: list[str] = []
        with self._locked():
            for path in sorted(self.state_dir.glob("*.json")):
                try:
                    state = DeployState.load(path)
                except StateFileError as exc:
                    failures.append(str(exc))
                    path.unlink(missing_ok=True)    # its objects are swept by tag below
                    continue
                names = list(state.domains) + list(state.bridges)
                try:
                    self._teardown(state)
                    removed += names
                except (BackendError, CommandError, ControlError) as exc:
                    failures.append(f"experiment {state.experiment}: {exc}")
                    removed += [n for n in names
                                if n not in state.domains and n not in state.bridges]
            # Objects whose state file was lost or corrupt: trust only the tags.
            for name, domid in self._tagged_domains().items():
                self._sweep(removed, failures, name,
                            lambda d=domid, n=name: self._destroy_domain(n, d, None))
            for bridge in self._tagged_ovs_bridges():
                self._sweep(removed, failures, bridge, lambda b=bridge: self.runner.run(
                    ["ovs-vsctl", "--if-exists", "del-br", b]))
            for bridge in self._tagged_linux_bridges():
                self._sweep(removed, failures, bridge,
                            lambda b=bridge: self.runner.run(["ip", "link", "del", b]))
        if failures:
            raise CleanupError(removed, failures)
        return removed

    @staticmethod
    def _sweep(removed: list[str], failures: list[str], name: str,
               remove: Callable[[], object]) -> None:
        try:
            remove()
            removed.append(name)
        except (BackendError, CommandError, ControlError) as exc:
            failures.append(f"{name}: {exc}")

    def _teardown(self, state: DeployState, pool: bool = False) -> None:
        errors: list[str] = []
        self._stop_tap(state)
        for name, domid in list(state.domains.items()):
            try:
                key = state.pool_keys.get(name)
                if pool and key and self._is_ours(name, domid, state.experiment):
                    self._release_to_pool(name, domid, key)
                else:
                    self._destroy_domain(name, domid, state.experiment)
                del state.domains[name]
            except (CommandError, ControlError) as exc:
                errors.append(str(exc))
        for bridge, kind in list(state.bridges.items()):
            try:
                if kind == "ovs":
                    if self._ovs_tag(bridge) == state.experiment:
                        self.runner.run(["ovs-vsctl", "--if-exists", "del-br", bridge])
                elif self._linux_bridge_tag(bridge) == state.experiment:
                    self.runner.run(["ip", "link", "del", bridge])
                del state.bridges[bridge]
            except CommandError as exc:
                errors.append(str(exc))
        if errors:
            # Keep what could not be removed on record, so destroy can be retried.
            self._save(state)
            raise BackendError("cleanup incomplete:\n  " + "\n  ".join(errors))
        self._state_path(state.experiment).unlink(missing_ok=True)
        # The xl configs written for this experiment.
        cfg_dir = self.state_dir / state.experiment
        for cfg in cfg_dir.glob("*.cfg") if cfg_dir.is_dir() else []:
            cfg.unlink()
        with contextlib.suppress(OSError):
            cfg_dir.rmdir()

    def _marker(self, domid: int) -> str | None:
        try:
            value = self.xenstore().read_or_none(f"/local/domain/{domid}/{MARKER}")
        except XenstoreError as exc:
            if exc.code == "EACCES":
                return None
            raise
        return None if value is None else value.decode(errors="replace").strip()

    def _is_ours(self, name: str, domid: int, experiment: str | None) -> bool:
        """Is the domain still the one selena created (name, domid and marker)?"""
        if not name.startswith("selena-"):
            return False
        found = self.runner.run(["xl", "domid", name], check=False)
        if found.returncode != 0 or found.stdout.strip() != str(domid):
            return False  # gone, or the name now belongs to another domain
        marker = self._marker(domid)
        if marker is None:
            return False
        return experiment is None or marker == experiment

    def _destroy_domain(self, name: str, domid: int, experiment: str | None) -> None:
        """Destroy a domain only if it still is the one selena created."""
        if self._is_ours(name, domid, experiment):
            self.runner.run(["xl", "destroy", str(domid)])

    def _release_to_pool(self, name: str, domid: int, key: str) -> None:
        # Detach while the guest runs: its netfront must acknowledge the removal.
        listing = self.runner.run(["xl", "network-list", str(domid)]).stdout.splitlines()
        for line in listing[1:]:
            devid = line.split()[0] if line.split() else ""
            if devid.isdigit():
                self.runner.run(["xl", "network-detach", str(domid), devid])
        xs = self.xenstore()
        xs.rm(f"/local/domain/{domid}/selena")
        xs.write(f"/local/domain/{domid}/{MARKER}", POOL_MARKER)
        self.runner.run(["xl", "pause", str(domid)])
        taken = {n for n in self._tagged_domains() if n.startswith(f"{POOL_PREFIX}{key}-")}
        index = next(i for i in range(len(taken) + 1) if f"{POOL_PREFIX}{key}-{i}" not in taken)
        self.runner.run(["xl", "rename", name, f"{POOL_PREFIX}{key}-{index}"])

    def _tagged_domains(self) -> dict[str, int]:
        listing = self.runner.run(["xl", "list"]).stdout.splitlines()[1:]
        tagged = {}
        for line in listing:
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("selena-") and parts[1].isdigit():
                domid = int(parts[1])
                if self._marker(domid) is not None:
                    tagged[parts[0]] = domid
        return tagged

    def _tagged_ovs_bridges(self) -> list[str]:
        # Ask each bridge for its tag rather than trusting `find` semantics for
        # a missing map key: a foreign bridge must never look tagged.
        out = self.runner.run(["ovs-vsctl", "list-br"], check=False)
        if out.returncode != 0:
            return []
        return [br for br in (ln.strip() for ln in out.stdout.splitlines())
                if br and self._ovs_tag(br) is not None]

    def _ovs_tag(self, bridge: str) -> str | None:
        out = self.runner.run(["ovs-vsctl", "br-get-external-id", bridge,
                               "selena-experiment"], check=False)
        text = out.stdout.strip().strip('"') if out.returncode == 0 else ""
        return text or None

    def _tagged_linux_bridges(self) -> list[str]:
        out = self.runner.run(["ip", "-o", "link", "show", "type", "bridge"], check=False)
        found = []
        for line in out.stdout.splitlines() if out.returncode == 0 else []:
            match = re.match(r"\d+:\s+([^:@\s]+)", line)
            alias = re.search(r"\balias (\S+)", line)
            if match and alias and alias.group(1).startswith(LINUX_BRIDGE_ALIAS):
                found.append(match.group(1))
        return found

    def _linux_bridge_tag(self, bridge: str) -> str | None:
        out = self.runner.run(["ip", "-o", "link", "show", "dev", bridge], check=False)
        alias = re.search(r"\balias (\S+)", out.stdout) if out.returncode == 0 else None
        if alias is None or not alias.group(1).startswith(LINUX_BRIDGE_ALIAS):
            return None
        return alias.group(1)[len(LINUX_BRIDGE_ALIAS):]

    # -- status and state files ----------------------------------------------------

    def host_free_mb(self) -> int | None:
        return self.host_info().free_memory_mb

    def status(self) -> list[dict[str, object]]:
        states: list[dict[str, object]] = []
        for path in sorted(self.state_dir.glob("*.json")):
            try:
                states.append(asdict(DeployState.load(path)))
            except StateFileError as exc:
                states.append({"experiment": path.stem, "error": str(exc)})
        return states

    def state(self, experiment: str) -> DeployState:
        path = self._state_path(experiment)
        if not path.exists():
            raise BackendError(f"no experiment named {experiment!r} is deployed")
        return DeployState.load(path)

    def _state_path(self, experiment: str) -> Path:
        if not EXPERIMENT_RE.fullmatch(experiment):
            raise BackendError(f"{experiment!r} is not an experiment name (letters, digits, "
                               "'.', '_', '-'; no paths)")
        return self.state_dir / f"{experiment}.json"

    def _save(self, state: DeployState) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self._state_path(state.experiment)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1))
        tmp.replace(path)

    @contextlib.contextmanager
    def _locked(self, say: Progress | None = None) -> Iterator[None]:
        """Hold the host-wide lock of deploy, destroy and clean (re-entrant
        within this backend)."""
        with self._host_lock:
            if self._host_lock_depth == 0:
                self.state_dir.mkdir(parents=True, exist_ok=True)
                handle = open(self.state_dir / ".lock", "w")  # noqa: SIM115 - held across yield
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    (say or log.warning)("another selena deploy, destroy or clean is running "
                                         f"on this host; waiting for {self.state_dir / '.lock'}")
                    fcntl.flock(handle, fcntl.LOCK_EX)
                self._host_lock_file = handle
            self._host_lock_depth += 1
            try:
                yield
            finally:
                self._host_lock_depth -= 1
                if self._host_lock_depth == 0:
                    handle = self._host_lock_file
                    self._host_lock_file = None
                    handle.close()  # type: ignore[attr-defined]


class _Exec:
    """Runs deploy steps for real, recording each domain as soon as it exists."""

    def __init__(self, backend: XlBackend, state: DeployState):
        self.backend = backend
        self.state = state

    def run(self, argv: Sequence[str], check: bool = True) -> None:
        self.backend.runner.run(argv, check=check)

    def write_file(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def write_keys(self, keys: list[Key]) -> None:
        xs = self.backend.xenstore()
        for key in keys:
            xs.write(key.path, key.value)
            xs.set_perms(key.path, list(key.perms))

    def domid(self, guest: GuestPlan, known: int | None = None) -> str:
        name = guest.domain_name
        domid = known if known is not None else self.backend.domid_by_name(name)
        with self.backend._state_lock:
            self.state.domains[name] = domid
            self.state.nodes[guest.node] = name
            self.state.pool_keys[name] = pool_key(guest)
            self.backend._save(self.state)
        return str(domid)


_PLACEHOLDER = re.compile(r"\$D([1-9])")


class _Script:
    """Deploy steps printed as the shell script they amount to."""

    def __init__(self, backend: XlBackend):
        self.backend = backend
        self.lines: list[str] = []
        self.vars: dict[str, str] = {}

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def run(self, argv: Sequence[str], check: bool = True) -> None:
        self.lines.append(" ".join(self._word(a) for a in argv)
                          + ("" if check else " || true"))

    def background(self, argv: Sequence[str]) -> None:
        self.lines.append(" ".join(self._word(a) for a in argv) + " &")

    def write_file(self, path: Path, text: str) -> None:
        self.lines.append(f"mkdir -p {shlex.quote(str(path.parent))}")
        self.lines.append(f"cat > {shlex.quote(str(path))} <<'EOF'\n{text.rstrip()}\nEOF")

    def write_keys(self, keys: list[Key]) -> None:
        for key in keys:
            self.run(["xenstore-write", key.path, key.value])
            self.run(["xenstore-chmod", key.path, *key.perms])

    def domid(self, guest: GuestPlan, known: int | None = None) -> str:
        var = self.vars.get(guest.node)
        if var is None:
            var = f"D{len(self.vars) + 1}"
            self.vars[guest.node] = var
            self.lines.append(f"{var}=$(xl domid {shlex.quote(guest.domain_name)})"
                              f"   # {guest.node}")
        return f"${var}"

    def _word(self, word: str) -> str:
        if "$D" in word and self._has_placeholder(word):
            return f'"{word}"'      # a domid placeholder: let the shell expand it
        return shlex.quote(word)

    def _has_placeholder(self, word: str) -> bool:
        """Whether `word` holds a known `$D<n>`, by lookup: a scan of every
        guest's variable per word made plans quadratic. The variables are D1,
        D2, ... so a `$D` whose digits start 1-9 within the count is one (as the
        substring test this replaces found `$D1` in `$D12`)."""
        for match in _PLACEHOLDER.finditer(word):
            if int(match.group(1)) <= len(self.vars):
                return True
        return False

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"



def parse_vcpu_list(text: str) -> dict[str, list[float]]:
    """`xl vcpu-list`: domain name -> CPU seconds of each vCPU, in vCPU order.
    Columns: Name ID VCPU CPU State Time(s) Affinity..."""
    found: dict[str, list[float]] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 6 or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        try:
            seconds = float(fields[5])
        except ValueError:
            continue
        found.setdefault(fields[0], []).append(seconds)
    return found


def parse_qdisc_stats(text: str) -> dict[str, QdiscStats]:
    """`tc -s -j qdisc show`: device -> counters of its qdiscs. A root qdisc
    counts what its children queue and send again, so packets and backlog are
    the largest of them; drops and overlimits happen in one qdisc each and add."""
    try:
        entries = json.loads(text or "[]")
    except ValueError as exc:
        raise BackendError(f"tc -s -j qdisc show printed no JSON: {exc}") from None
    found: dict[str, QdiscStats] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or "dev" not in entry:
            continue
        stats = found.setdefault(str(entry["dev"]), QdiscStats())
        stats.sent_packets = max(stats.sent_packets, int(entry.get("packets", 0)))
        stats.drops += int(entry.get("drops", 0))
        stats.overlimits += int(entry.get("overlimits", 0))
        stats.backlog_bytes = max(stats.backlog_bytes, int(entry.get("backlog", 0)))
    return found
