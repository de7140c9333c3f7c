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
import functools
import json
import logging
import math
import os
import platform
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Protocol, TypeVar

import jinja2

from selena import units
from selena.backends import vif_capture
from selena.backends.base import (
    Backend,
    Deployment,
    LinkCapture,
    LoadSample,
    Progress,
    QdiscStats,
)
from selena.capture import CaptureSource
from selena.control.channel import Controller
from selena.control.interface import DEFAULT_OUTPUT_CAP
from selena.control.keys import Key, control_keys
from selena.control.protocol import printable
from selena.control.xenstore import XenstoreConnection
from selena.errors import (
    BackendError,
    CleanupError,
    CommandError,
    CommandTimeout,
    ControlError,
    ExperimentExists,
    ExperimentInUse,
    HostLockTimeout,
    HostNotReady,
    StateFileError,
    ValidationError,
    XenstoreError,
)
from selena.host import doctor
from selena.hostinfo import GUEST_DOMIDS_MAX, HostInfo
from selena.model import Endpoint, Link
from selena.model.cpus import credit_cap, worth_cap
from selena.paths import CONSOLE_LOG_DIR
from selena.plan import GuestPlan, Plan, VifPlan, pool_key
from selena.runner import Runner
from selena.shaping import shaping_commands
from selena.shaping.netem import netem_args
from selena.shaping.plan import real_rate_bps, real_seconds
from selena.signals import sigint_deferred

log = logging.getLogger(__name__)

CONSOLE_TAIL_BYTES = 16384
# Kernel messages that say why a guest stopped answering its control channel.
_CONSOLE_FAILURE = re.compile(r"Out of memory|Kernel panic|BUG: |Oops|soft lockup|"
                              r"blocked for more than|general protection fault")


def console_failure(console: str) -> str | None:
    """The first line of a guest console's text that names a failure (its
    timestamp stripped, shortened), with how many more there are. Only the
    text after xenconsoled last opened the log counts: it appends every
    domain of the same name (the next run of an experiment) to one file."""
    lines = console.splitlines()
    found = []
    for line in lines[_last_opened(lines):]:
        text = re.sub(r"^\[[0-9: -]+\] ", "", line).strip()
        match = _CONSOLE_FAILURE.search(text)
        if match:
            found.append(text[match.start():])
    if not found:
        return None
    first = printable(found[0], 120)
    return first if len(found) == 1 else f"{first} (and {len(found) - 1} more such lines)"


def _last_opened(lines: list[str]) -> int:
    return max((i for i, line in enumerate(lines) if line.endswith("Logfile Opened")),
               default=0)


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
# How long a destroyed domain's vifs may take to go before a restart gives up.
VIF_GONE_S = 20.0
# The longest wait for the host lock of deploy, destroy and clean: long enough
# for another deploy of many guests, short enough that a hung one is noticed.
HOST_LOCK_TIMEOUT_S = 300.0
HOST_LOCK_POLL_S = 0.2
# Looks at a run lock held by a process that has not yet written its pid.
RUN_LOCK_TRIES = 20
# libxl runs the hotplug scripts of a create's vifs side by side, each under
# its compile-time timeout (LIBXL_HOTPLUG_TIMEOUT, 40 s in 4.17), and Debian's
# vif-openvswitch waits for ovs-vswitchd to reconfigure (no --no-wait) and for
# a global iptables lock: a 40-vif create outlived it in the lab. A guest's
# vifs past this many are attached after its create, one at a time (xl picks
# devids and libxl's lock per domain: concurrent attaches would only race),
# still paused. Every shipped scenario's guests have at most 5, so their
# configs and plans are unchanged.
VIFS_AT_CREATE = 8
# `xl create` waits for the hotplug scripts of every vif and the disk; the
# other Dom0 tools take the runner's default (selena.runner.DEFAULT_TIMEOUT_S).
XL_CREATE_TIMEOUT_S = 300.0
# One vif's attach: libxl's hotplug timeout (40 s) and its wait for the
# backend (10 s), with room for xl itself on a slow Dom0.
XL_ATTACH_TIMEOUT_S = 120.0
# What `xl domid` prints when libxl lists no domain of that name (xl_misc.c).
_XL_NOT_FOUND = "Can't get domid of domain name '{}', maybe this domain does not exist."

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


# An HVM guest's emulated PC: Dom0's device model and no display. No Hyper-V
# enlightenments: their synthetic timers run in real time, so the hypervisor
# refuses to dilate a guest that has them.
HVM_XL_LINES = ('device_model_version = "qemu-xen"', 'vga = "none"', "vnc = 0", "viridian = 0")


def xl_config(plan: Plan, guest: GuestPlan) -> str:
    """The guest's xl configuration (every value checked as it is rendered):
    its first VIFS_AT_CREATE vifs; the rest are attached after the create
    (attach_argvs)."""
    created = guest if len(guest.vifs) <= VIFS_AT_CREATE else \
        dataclasses.replace(guest, vifs=guest.vifs[:VIFS_AT_CREATE])
    return _ENV.get_template("xl.cfg.j2").render(experiment=plan.experiment, guest=created,
                                                  hvm_lines=HVM_XL_LINES)


def attach_argvs(guest: GuestPlan, domid: str) -> list[tuple[VifPlan, list[str]]]:
    """The `xl network-attach` of each of the guest's vifs past the ones its
    config holds, in order, each with the devid its place in a config would
    give it (so the n-th vif is still the guest's eth<n>)."""
    return [(vif, ["xl", "network-attach", domid, f"mac={vif.mac}", f"bridge={vif.bridge}",
                   f"script={vif.script}", f"vifname={vif.name}", f"devid={devid}"])
            for devid, vif in enumerate(guest.vifs) if devid >= VIFS_AT_CREATE]


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
    # Guests whose CPU cap follows the TDF (cpu_time "real" or a cpu_share):
    # domain name -> vCPUs.
    real_cpu: dict[str, int] = field(default_factory=dict)
    vif_bridges: dict[str, str] = field(default_factory=dict)  # vif -> its bridge
    # vif -> "h1 0": its node and the model's interface index, for finding a
    # link's vifs (vif_nodes holds the guest's device name, for people).
    vif_ends: dict[str, str] = field(default_factory=dict)
    # Of those, the ones with a cpu_share: domain name -> the CPUs' worth they
    # get per virtual second (the share times the host's CPUs; a "real"
    # guest's is its vCPUs).
    cpu_worth: dict[str, float] = field(default_factory=dict)

    def cpu_cap(self, name: str, tdf: float) -> int:
        """The cap of guest `name` (one of real_cpu) at `tdf`; ValueError if
        Xen cannot give it."""
        vcpus = self.real_cpu[name]
        return worth_cap(self.cpu_worth.get(name, vcpus), vcpus, tdf, f"guest {name}")

    @classmethod
    def load(cls, path: Path) -> DeployState:
        """Read a state file, refusing anything a selena could not have written
        (wrong types, NaN or infinite numbers, impossible domids, ...) with a
        StateFileError: what it names is destroyed, so it must make sense."""
        try:
            text = path.read_text()
        except OSError as exc:
            raise StateFileError(f"state file {path}: cannot read it: {exc.strerror}") from None
        except ValueError as exc:   # not UTF-8
            raise _corrupt(path, exc) from None
        try:
            data = json.loads(text, parse_constant=_no_constant)
            state = _state_from(data)
        except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:
            raise _corrupt(path, exc) from None
        return state

    def deployment(self) -> Deployment:
        return Deployment(self.experiment, self.tdf,
                          {node: self.domains[name] for node, name in self.nodes.items()
                           if name in self.domains}, "xl")


_IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")
_STATE_STRING_MAX = 4096


def _corrupt(path: Path, exc: BaseException) -> StateFileError:
    why = str(exc).splitlines()[0][:200] if str(exc) else ""
    return StateFileError(f"state file {path} is corrupt ({type(exc).__name__}: {why}); "
                          "`selena clean` sweeps by tags instead")


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number selena writes")


def _str(value: object, what: str) -> str:
    if not isinstance(value, str) or len(value) > _STATE_STRING_MAX:
        raise TypeError(f"{what} is not a string")
    return value


def _int(value: object, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{what} {value!r} is not a whole number in {low}..{high}")
    return value


def _real(value: object, what: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} {value!r} is not a number")
    number = float(value)   # OverflowError for a huge int
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise ValueError(f"{what} {value!r} is not a finite, non-negative number")
    return number


_V = TypeVar("_V")


def _map(data: dict[str, object], key: str, what: str,
         value: Callable[[object, str], _V]) -> dict[str, _V]:
    raw = data.get(key, {})
    if not isinstance(raw, dict):
        raise TypeError(f"{key} is not an object")
    return {_str(k, f"a key of {key}"): value(v, f"{what} {k}") for k, v in raw.items()}


def _state_from(data: object) -> DeployState:
    if not isinstance(data, dict):
        raise TypeError(f"the file holds a JSON {type(data).__name__}, not an object")
    for key in ("experiment", "tdf", "domains", "bridges"):
        if key not in data:
            raise KeyError(key)
    experiment = _str(data["experiment"], "experiment")
    if not EXPERIMENT_RE.fullmatch(experiment):
        raise ValueError(f"experiment {experiment!r} is not an experiment name")

    def domid(v: object, what: str) -> int:
        return _int(v, what, 1, GUEST_DOMIDS_MAX)

    def bridge_kind(v: object, what: str) -> str:
        if v not in ("ovs", "linux"):
            raise ValueError(f"{what}: unknown bridge kind {v!r}")
        return str(v)

    def shaping(v: object, what: str) -> dict[str, float | None]:
        if not isinstance(v, dict):
            raise TypeError(f"{what} is not an object")
        return {_str(f, what): None if x is None else _real(x, f"{what} {f}")
                for f, x in v.items()}

    def text(v: object, what: str) -> str:
        return _str(v, what)

    bridges = _map(data, "bridges", "bridge", bridge_kind)
    for name in bridges:
        if not _IFNAME.fullmatch(name):
            raise ValueError(f"bridge {name!r} is not an interface name")
    tap_pid = data.get("tap_pid")
    return DeployState(
        experiment, _real(data["tdf"], "tdf", positive=True),
        _map(data, "domains", "domain", domid),
        bridges,
        _map(data, "pool_keys", "pool key of", text),
        _map(data, "nodes", "domain of node", text),
        _map(data, "shaping", "shaping of", shaping),
        None if tap_pid is None else _int(tap_pid, "tap_pid", 0, 2**22),  # 0: none
        _map(data, "vif_nodes", "node of vif", text),
        _map(data, "real_cpu", "vCPUs of",
             lambda v, w: _int(v, w, 1, 4096)),
        _map(data, "vif_bridges", "bridge of vif", text),
        _map(data, "vif_ends", "link end of vif", text),
        _map(data, "cpu_worth", "CPUs of",
             lambda v, w: _real(v, w, positive=True)))



def _xl_not_found(stderr: str, name: str) -> bool:
    """Is this xl's answer for a domain that does not exist, and nothing else?
    libxl logs its own errors ("libxl: error: ...") before the same sentence
    when it could not list the domains at all."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines == [_XL_NOT_FOUND.format(name)]


def _pid_text(pid: int | None) -> str:
    return "?" if pid is None else str(pid)


def cap_command(domid: int | str, cap: int) -> list[str]:
    """Cap a domain's CPU time (percent of one CPU, 0 = none). Xen's default
    scheduler, credit2, enforces it every 10 ms of real time."""
    return ["xl", "sched-credit2", "-d", str(domid), "-c", str(cap)]


class _Actions(Protocol):
    """Where deploy steps go: run for real, or printed as a script."""

    def run(self, argv: Sequence[str], check: bool = True) -> None: ...

    def comment(self, text: str) -> None: ...

    def write_file(self, path: Path, text: str) -> None: ...

    def write_keys(self, keys: list[Key]) -> None: ...

    def domid(self, guest: GuestPlan, known: int | None = None) -> str: ...

    def attach(self, guest: GuestPlan, vif: VifPlan, argv: list[str]) -> None: ...


def _batches(domids: Sequence[int | str]) -> list[list[str]]:
    items = [str(d) for d in domids]
    return [items[i:i + TDF_TOOL_DOMAINS_MAX]
            for i in range(0, len(items), TDF_TOOL_DOMAINS_MAX)]


def _set_tdfs(run: Callable[[list[str]], object], domids: Sequence[int | str],
              tdf: float) -> None:
    """`selena-tdf set` of domids (at most TDF_TOOL_DOMAINS_MAX) from one
    process: a running domain's clock changes rate at its set, so domains
    set one process start-up (about 50 ms under emulation) apart would
    drift apart by that times the change of 1/TDF. A tool that sets one
    domain at a time (an older package) is named, with the fix."""
    argv = ["selena-tdf", "set", *map(str, domids), units.tdf_text(tdf)]
    try:
        run(argv)
    except CommandError as exc:
        if exc.returncode == 2 and "usage:" in exc.stderr and len(domids) > 1:
            raise _tdf_tool_too_old("sets one domain at a time") from None
        raise


def _tdf_tool_too_old(what: str) -> BackendError:
    """selena-tdf answered a verb of this selena with its usage."""
    return BackendError(f"selena-tdf {what}: it is older than this selena; install the "
                        "selena-xen package built from this tree (make -C xen-patches deb)")


def _aligns_clocks(plan: Plan) -> bool:
    """At TDF 1 every new guest's clock reads real time, so all agree
    already; a dilated deploy starts them together (_align_clocks)."""
    return plan.tdf != 1


def _port_switch_commands(bridge: str, kind: str, vif: str, up: bool) -> list[list[str]]:
    """The Dom0 commands that stop (or restart) a bridge passing frames
    through one of its ports, leaving the port's device alone."""
    if kind == "ovs":
        prefix = "" if up else "no-"
        return [["ovs-ofctl", "mod-port", bridge, vif, f"{prefix}receive"],
                ["ovs-ofctl", "mod-port", bridge, vif, f"{prefix}forward"]]
    # A Linux bridge port: disabled (0) or forwarding (3); selena's bridges run no STP.
    return [["bridge", "link", "set", "dev", vif, "state", "3" if up else "0"]]

class XlBackend(Backend):
    name = "xl"
    captures_links = True
    link_capture = True
    restarts_nodes = True
    caps_cpu = True

    def __init__(self, runner: Runner | None = None, state_dir: Path = DEFAULT_STATE_DIR, *,
                 xenstore: XenstoreConnection | None = None, offloads: bool = False,
                 parallel: int = DEFAULT_PARALLEL, vif_tap: bool = True,
                 lock_timeout: float = HOST_LOCK_TIMEOUT_S, host_root: Path = Path("/")):
        self.runner = runner or Runner()
        # Where the preflight reads /proc/xen and the xenstored socket (a fake
        # host tree in tests; its commands go through `runner` like the rest).
        self.host_root = Path(host_root)
        self.lock_timeout = lock_timeout
        self.state_dir = Path(state_dir)
        self.offloads = offloads
        self.vif_tap = vif_tap
        self.parallel = max(1, parallel)
        self._xs = xenstore
        self._owns_xs = xenstore is None
        self._state_lock = threading.Lock()
        self._host_lock = threading.RLock()
        self._host_lock_depth = 0
        self._host_lock_file: IO[str] | None = None
        # The run locks this object holds: experiment -> its open lock file.
        self._runs: dict[str, IO[str]] = {}
        self._runs_lock = threading.Lock()
        self._domain_names: dict[int, str] = {}     # domid -> name, as read from Xenstore
        self._names_lock = threading.Lock()

    # -- connection and host -------------------------------------------------------

    def command_channel(self, tdf: float, output_cap: int = DEFAULT_OUTPUT_CAP) -> Controller:
        """The Xenstore control channel to the guest agents, on a connection
        of its own to this backend's xenstored (closed with the controller),
        so that nothing the guests do to the channel reaches the connection
        teardown uses."""
        shared = self.xenstore()
        return Controller.connect(shared.path, timeout=shared.timeout, tdf=tdf,
                                  output_cap=output_cap, console_hint=self.console_hint)

    def console_hint(self, domain_name: str) -> str | None:
        """Why a guest stopped answering, from its console log, when
        xenconsoled keeps one (`--log=guest`: XENCONSOLED_ARGS in Debian's
        /etc/default/xen, docs/host.md; the lab's does): the first line
        saying the kernel killed or gave up (out of memory, panic, oops),
        else nothing (a silent hang names no cause)."""
        path = self.host_root / CONSOLE_LOG_DIR.lstrip("/") / f"guest-{domain_name}.log"
        try:
            with path.open("rb") as log_file:
                log_file.seek(0, 2)
                log_file.seek(max(0, log_file.tell() - CONSOLE_TAIL_BYTES))
                tail = log_file.read().decode(errors="replace")
        except OSError:
            return None
        reason = console_failure(tail)
        return f"{reason} ({CONSOLE_LOG_DIR}/guest-{domain_name}.log)" if reason else None

    def xenstore(self) -> XenstoreConnection:
        """The Xenstore connection this backend uses (the control channel
        opens its own to the same xenstored); Xen's alone, not part of the
        Backend interface."""
        if self._xs is None:
            self._xs = XenstoreConnection()
        return self._xs

    def close(self) -> None:
        """Release the run locks of this object's experiments (they stay
        deployed; `selena destroy` from anywhere may now remove them) and the
        Xenstore connection if this object opened it."""
        for experiment in list(self._runs):
            self._release_run(experiment)
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
        if any(len(guest.vifs) > VIFS_AT_CREATE for guest in plan.guests):
            script.comment(f"   a guest's vifs past its first {VIFS_AT_CREATE} are attached "
                           "after its create, one at a time (libxl runs a create's vif "
                           "hotplug scripts side by side under one timeout)")
        for guest in plan.guests:
            self._guest_steps(script, plan, guest, None, set_tdf=not _aligns_clocks(plan))
        if _aligns_clocks(plan):
            script.comment("   every guest's clock started at one virtual instant: frozen "
                           "together, TDF set, thawed together")
            self._align_clocks(script, [script.domid(guest) for guest in plan.guests],
                               plan.tdf)
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

    def preflight(self, plan: Plan) -> None:
        """The checks of `selena host doctor` a deploy cannot do without:
        Dom0, the TDF domctl, xenstored, the bridge tool and, for PVH
        nodes, Xen's HVM support, through this backend's runner."""
        kinds = {seg.kind for seg in plan.segments}
        bridge = "linux" if kinds == {"linux"} else "ovs"
        probe = doctor.HostProbe(runner=self.runner, root=self.host_root, bridge=bridge)
        doctor.preflight(probe, guest_types={guest.virt for guest in plan.guests})

    def deploy(self, plan: Plan, progress: Progress | None = None,
               warm: bool = False, replace: bool = False) -> Deployment:
        """warm: reuse guests of the same template, memory and vCPUs from the
        pool; their interfaces and bridges are rebuilt like new ones.

        The experiment's run lock is taken and kept until destroy() of the
        experiment or close(). An experiment of that name that exists raises
        ExperimentExists, unless replace (then it is destroyed first); one
        whose run is alive in another process is never replaced."""
        say = progress or (lambda msg: log.info("%s", msg))
        with self._locked(say):
            took = self._claim_run(plan.experiment, force=False, action="replaced",
                                   fix="stop that run first")
            replaced = False
            try:
                path = self._state_path(plan.experiment)
                if path.exists():
                    if not replace:
                        raise ExperimentExists(plan.experiment)
                    say(f"experiment {plan.experiment} exists: destroying it first (replace)")
                    replaced = True
                    self._teardown(DeployState.load(path))
                pool = self._pooled() if warm else {}
                state = self._deploy(plan, pool, say)
            except BaseException:
                if took or replaced:
                    self._release_run(plan.experiment)
                raise
        return state.deployment()

    def _deploy(self, plan: Plan, pool: dict[str, list[tuple[str, int]]],
                say: Progress) -> DeployState:
        for guest in plan.guests:       # before anything exists
            if guest.cpu_capped:
                try:
                    guest.cpu_cap(plan.tdf)
                except ValueError as exc:
                    raise BackendError(f"node {guest.node}: {exc}") from None
        state = DeployState(plan.experiment, plan.tdf)
        state.shaping = {vif: shaping_spec(link) for vif, link in plan.shaped}
        topo = plan.topology
        # The guest's own device name (a listing's first interface is eth1).
        state.vif_nodes = {vif.name: f"{guest.node} "
                                     + (topo.nodes[guest.node].device(vif.index)
                                        if topo is not None and guest.node in topo.nodes
                                        else f"eth{vif.index}")
                           for guest in plan.guests for vif in guest.vifs}
        state.vif_ends = {vif.name: _end_key(guest.node, vif.index)
                           for guest in plan.guests for vif in guest.vifs}
        state.vif_bridges = {vif.name: vif.bridge
                             for guest in plan.guests for vif in guest.vifs}
        state.real_cpu = {guest.domain_name: guest.vcpus for guest in plan.guests
                          if guest.cpu_capped}
        state.cpu_worth = {guest.domain_name: guest.cpu_share * guest.host_cpus
                           for guest in plan.guests
                           if guest.cpu_share is not None and guest.host_cpus}
        self._save(state)
        act = _Exec(self, state)
        try:
            for seg in plan.segments:
                # On record before it exists: a bridge whose tagging fails (or
                # is interrupted) is still found by the rollback. A name that
                # was taken already carries no tag of ours and is left alone.
                with self._state_lock:
                    state.bridges[seg.bridge] = seg.kind
                    self._save(state)
                self._bridge_steps(act, plan.experiment, seg.bridge, seg.kind)
            reuse: dict[str, tuple[str, int] | None] = {}
            for guest in plan.guests:
                idle = pool.get(pool_key(guest))
                reuse[guest.node] = idle.pop() if idle else None
            self._bring_up(act, plan, reuse, say)
            fresh = [state.domains[guest.domain_name] for guest in plan.guests
                     if reuse[guest.node] is None]
            if _aligns_clocks(plan) and fresh:
                self._align_clocks(act, fresh, plan.tdf)
            self._start_tap(state, plan)
            self._unpause([state.domains[guest.domain_name] for guest in plan.guests])
            say(f"{len(state.domains)} of {len(plan.guests)} guests running at TDF "
                f"{plan.tdf_text}")
        except BaseException as exc:
            # A second Ctrl-C must not stop the rollback halfway.
            with sigint_deferred(say, "removing what the deploy created; Ctrl-C is "
                                      "ignored until that is done"):
                how = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
                say(f"deploy of {plan.experiment} {how}: removing what it created")
                try:
                    self._teardown(state)
                except (BackendError, CommandError, ControlError, OSError) as undo:
                    # The deploy's own error (or Ctrl-C) is what is raised; what
                    # is left stays on record for `selena destroy` / `clean`.
                    note = (f"rollback of {plan.experiment} incomplete, left on record "
                            f"for `selena destroy {plan.experiment}`: {undo}")
                    say(note)
                    exc.add_note(note)
            raise
        return state

    def _bring_up(self, act: _Exec, plan: Plan,
                  reuse: dict[str, tuple[str, int] | None], say: Progress) -> None:
        """Every guest's steps, several guests at a time."""
        done = [0]
        count_lock = threading.Lock()

        def one(guest: GuestPlan) -> None:
            if act.stop.is_set():
                return      # a guest failed: a worker must not start the next one
            pooled = reuse.get(guest.node)
            try:
                # A pooled guest has run: its clock cannot be moved, only dilated.
                self._guest_steps(act, plan, guest, pooled,
                                  set_tdf=pooled is not None or not _aligns_clocks(plan))
            except BaseException:
                act.stop.set()      # before this worker takes another guest
                raise
            with count_lock:
                done[0] += 1
                n = done[0]
            how = "reused a pooled guest as" if pooled else "created"
            say(f"{how} {guest.domain_name} ({n} of {len(plan.guests)}, paused)")

        workers = min(self.parallel, len(plan.guests)) or 1
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deploy")
        # Guests with vifs to attach first: their attaches, one after the
        # other, are the deploy's longest chain, and overlap the others' creates.
        order = sorted(plan.guests, key=lambda g: len(g.vifs) <= VIFS_AT_CREATE)
        try:
            futures: list[Future[None]] = [pool.submit(one, g) for g in order]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((e for f in finished if (e := f.exception()) is not None), None)
            if failed is not None:
                raise failed
        except BaseException:
            # A failed guest, or Ctrl-C (or SIGTERM made one): no new creates;
            # the ones in flight finish and are recorded, so that the rollback
            # finds every guest created; their vif attaches stop at the next one.
            act.stop.set()
            with sigint_deferred(say, "stopping the deploy; Ctrl-C is ignored until "
                                      "what it created is removed"):
                pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

    def _tap_argv(self, experiment: str, vifs: list[str]) -> list[str]:
        return [sys.executable or "python3", "-m", "selena.backends.vif_tap", experiment,
                str(self.state_dir), *vifs]

    def _start_tap(self, state: DeployState, plan: Plan) -> None:
        """Start the vif tap of the experiment and wait until it holds every vif."""
        vifs = [vif.name for guest in plan.guests for vif in guest.vifs]
        if not vifs or not self.vif_tap:
            return
        log_file = self.state_dir / plan.experiment / "vif-tap.log"
        # The daemon appends: a previous tap's "tapping" must not pass for this
        # one's. The last log is kept beside it for whoever reads it.
        with contextlib.suppress(FileNotFoundError):
            log_file.replace(log_file.with_name("vif-tap.log.1"))
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
            try:
                act.run(["ip", "link", "set", bridge, "alias",
                         f"{LINUX_BRIDGE_ALIAS}{experiment}"])
            except BaseException:
                # Created (the name was free) but untagged: no teardown could
                # tell it is ours, so it goes now.
                act.run(["ip", "link", "del", bridge], check=False)
                raise
            act.run(["ip", "link", "set", bridge, "up"])

    def _guest_steps(self, act: _Actions, plan: Plan, guest: GuestPlan,
                     pooled: tuple[str, int] | None, *, tdf: float | None = None,
                     shaping: list[list[str]] | None = None, set_tdf: bool = True) -> None:
        """One guest created (or taken from the pool), keyed, attached, its TDF
        set (unless not `set_tdf`: _align_clocks sets it) and its vifs shaped:
        at the plan's TDF and shaping, or (a restart) at `tdf` with the
        `shaping` commands the links have now."""
        tdf = plan.tdf if tdf is None else tdf
        if pooled is None:
            cfg = self.state_dir / plan.experiment / f"{guest.node}.cfg"
            act.write_file(cfg, xl_config(plan, guest))
            act.run(["xl", "create", "-p", "-q", str(cfg)])
            try:
                domid = act.domid(guest)
            except BackendError:    # created but not recorded: teardown would miss it
                act.run(["xl", "destroy", guest.domain_name], check=False)
                raise
            # The marker (with the control keys) before the attaches: a
            # recorded domain without it is not destroyed by the rollback,
            # which destroys the domain and its vifs (the ports go with the
            # experiment's bridges).
            act.write_keys(control_keys(domid, plan.experiment, guest.net))
            for vif, argv in attach_argvs(guest, domid):
                act.attach(guest, vif, argv)
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
            act.write_keys(control_keys(domid, plan.experiment, guest.net))
        if set_tdf:
            act.run(["selena-tdf", "set", domid, units.tdf_text(tdf)])
        # A pooled guest may carry the cap of its last experiment: always set it.
        if guest.cpu_capped or pooled is not None:
            try:
                act.run(cap_command(domid, guest.cpu_cap(tdf)))
            except ValueError as exc:   # only in a plan: _deploy refuses it first
                act.comment(f"   node {guest.node}: no CPU cap: {exc}")
        if shaping is None:
            shaping = plan.shaping_at(tdf, {vif.name for vif in guest.vifs})
        for argv in shaping:
            act.run(argv)
        if not self.offloads:
            for vif in guest.vifs:
                act.run(["ethtool", "-K", vif.name, *[x for o in OFFLOADS for x in (o, "off")]],
                        check=False)

    def _align_clocks(self, act: _Actions, domids: Sequence[int | str], tdf: float) -> None:
        """Dilate new guests from one virtual instant. A new domain's clock
        reads real time until its TDF is set, and runs at 1/TDF from then on:
        set one guest after another as they are created, their clocks (and
        so their wall clocks, `date` in each) would end up apart by the
        spread of the sets times 1 - 1/TDF (0.16 s among four guests at TDF
        10 in the lab). Frozen together, they all stand at that instant; the
        factor set while frozen takes effect at the thaw, which restarts
        them together. Domains never run, so no guest sees the freeze."""
        batches = _batches(domids)
        for batch in batches:
            act.run(["selena-tdf", "freeze", *batch])
        for batch in batches:
            _set_tdfs(act.run, batch, tdf)
        for batch in batches:
            act.run(["selena-tdf", "thaw", *batch])

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

    def set_link(self, experiment: str, link: Link, up: bool,
                 progress: Progress | None = None) -> None:
        """Down: the link's Dom0 bridge passes nothing to or from either end
        (their own interfaces stay up, as a cable pulled out elsewhere); up:
        it forwards again. Done in the bridge (OVS port flags no-receive and
        no-forward, or a Linux bridge port disabled), never by taking the vif
        itself down: netback comes back from that with its guest's transmit
        path stalled for seconds (seen in the lab), and the vifs' qdiscs, so
        the link's shaping, are not touched."""
        say = progress or (lambda msg: log.info("%s", msg))
        with self._locked(progress):
            state = self.state(experiment)
            vifs = _link_vifs(state, link)
            for vif in vifs:
                bridge = state.vif_bridges.get(vif)
                kind = state.bridges.get(bridge or "")
                if bridge is None or kind is None:
                    raise BackendError(f"{link} of {experiment}: vif {vif} has no bridge in "
                                       "the state file")
                for command in _port_switch_commands(bridge, kind, vif, up):
                    self.runner.run(command)
        say(f"{experiment}: {link} {'up' if up else 'down'}")

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
                caps = {name: state.cpu_cap(name, new)
                        for name in state.real_cpu if name in state.domains}
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
                for batch in _batches(domids):
                    # Until it answers, any of them may have the new TDF.
                    done += [int(d) for d in batch]
                    try:
                        _set_tdfs(self.runner.run, batch, new)
                    except CommandError as exc:
                        named = re.search(r"domain (\d+)", exc.stderr)
                        who = next((f"guest {name} (domain {d})"
                                    for name, d in state.domains.items()
                                    if named and d == int(named.group(1))), "a guest")
                        raise BackendError(f"set-tdf {units.tdf_text(new)}: {who} refused: "
                                           f"{exc}") from None
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
                for batch in _batches(done):
                    # One process, as the change: a refusal stops it at that
                    # domain, so each one after it is set on its own.
                    if self.runner.run(["selena-tdf", "set", *batch, units.tdf_text(old)],
                                       check=False).returncode != 0:
                        for domid in batch:
                            self.runner.run(["selena-tdf", "set", domid, units.tdf_text(old)],
                                            check=False)
                for name in state.real_cpu:
                    if name in state.domains:
                        self.runner.run(cap_command(state.domains[name],
                                                    state.cpu_cap(name, old)), check=False)
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

    def set_cpu_share(self, experiment: str, node: str, share: float | None, vcpus: int,
                      progress: Progress | None = None) -> None:
        say = progress or (lambda msg: log.info("%s", msg))
        with self._locked(progress):
            state = self.state(experiment)
            name = state.nodes.get(node)
            if name is None or name not in state.domains:
                raise BackendError(f"node {node} of {experiment}: no guest in the state file")
            cpus = self.host_info().cpus if share is not None else None
            try:
                cap = credit_cap(vcpus, state.tdf, "dilated", share, cpus)
            except ValueError as exc:
                raise BackendError(f"node {node}: {exc}") from None
            worth = None if share is None or cpus is None else share * cpus
            try:
                self.runner.run(cap_command(state.domains[name], cap))
            except CommandError as exc:
                raise BackendError(f"node {node}: capping its CPU at {cap}%: {exc}") from None
            if worth is None:
                state.real_cpu.pop(name, None)
                state.cpu_worth.pop(name, None)
            else:
                state.real_cpu[name] = vcpus
                state.cpu_worth[name] = worth
            self._save(state)
        say(f"{experiment}: node {node} "
            + ("uncapped" if share is None else f"capped at {cap}% (cpu_share={share:g})"))

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

    def shape_link(self, experiment: str, link: Link,
                   progress: Progress | None = None) -> None:
        """Give one link of a running experiment new values (`link`, in its
        virtual terms): the Dom0 qdiscs of the vifs of both its ends are
        re-rendered at the experiment's current TDF, and the state file
        keeps the values, so that later TDF changes rescale them. A change
        of the qdiscs' shape (a rate added or lifted, delay, jitter, loss and
        queue all set to none or from none) replaces the vif's root qdisc.
        On a failure both vifs get their old shaping back."""
        say = progress or (lambda msg: log.info("%s", msg))
        with self._locked(progress):
            state = self.state(experiment)
            vifs = _link_vifs(state, link)
            new = shaping_spec(link)
            wanted = new if shaping_commands("-", link, state.tdf) else None
            old = {vif: state.shaping.get(vif) for vif in vifs}
            done: list[str] = []
            try:
                for vif in vifs:
                    self._reshape_vif(vif, old[vif], wanted, state.tdf)
                    done.append(vif)
            except BaseException:
                for vif in done:
                    try:
                        self._reshape_vif(vif, wanted, old[vif], state.tdf)
                    except BackendError as exc:
                        say(f"restoring the old shaping of {vif} failed: {exc}")
                raise
            for vif in vifs:
                if wanted is None:
                    state.shaping.pop(vif, None)
                else:
                    state.shaping[vif] = dict(wanted)
            self._save(state)
        say(f"{experiment}: {link} re-shaped at TDF {units.tdf_text(state.tdf)}")

    def _reshape_vif(self, vif: str, old: dict[str, float | None] | None,
                     new: dict[str, float | None] | None, tdf: float) -> None:
        argvs: list[list[str]] = []
        if old is not None and (new is None or _qdisc_shape(old) != _qdisc_shape(new)):
            argvs.append(["tc", "qdisc", "del", "dev", vif, "root"])
        if new is not None:
            argvs += shaping_commands(vif, spec_link(new), tdf,
                                      reshape=old is not None and argvs == [])
        for argv in argvs:
            try:
                self.runner.run(argv)
            except CommandError as exc:
                raise BackendError(f"re-shaping {vif} at TDF {units.tdf_text(tdf)} "
                                   f"failed: {exc}") from None

    def _shape(self, state: DeployState, tdf: float) -> None:
        """Every shaped vif re-rendered for `tdf` by one `tc -batch`: a TDF
        change holds the guests paused (their clocks running) meanwhile, and
        one tc process per command (about 78 ms each under emulation, 24 for
        a star of six hosts) made that a 2 s stall."""
        lines: list[str] = []
        owners: list[str] = []
        for vif, spec in state.shaping.items():
            for argv in shaping_commands(vif, spec_link(spec), tdf, reshape=True):
                lines.append(shlex.join(argv[1:]))     # every command is tc's
                owners.append(vif)
        if not lines:
            return
        try:
            self.runner.run(["tc", "-batch", "-"], input="\n".join(lines) + "\n")
        except CommandError as exc:
            # tc stops at the first failure and names its line.
            failed = re.search(r"Command failed -:(\d+)", exc.stderr)
            index = int(failed.group(1)) - 1 if failed else -1
            vif = owners[index] if 0 <= index < len(owners) else "the vifs"
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
        sample.rates_bps = {vif: float(rate) / state.tdf for vif in sample.qdiscs
                            if (rate := state.shaping[vif].get("rate_bps"))}
        sample.delays_s = {vif: float(state.shaping[vif].get("delay_s") or 0.0) * state.tdf
                           for vif in sample.rates_bps}
        return sample

    def capture_links(self, experiment: str, seconds: float) -> list[LinkCapture]:
        """Frames through each rate-limited shaped vif and into its bridge's
        other vifs, from packet sockets in this process (vif_capture.py).
        Links with jitter are left out: netem reorders their frames, so when
        a frame became ready to leave is not known. So is, for this window, a
        link with a vif gone (its guest crashed and not restarted yet)."""

        state = self.state(experiment)
        checked = {vif: spec for vif, spec in state.shaping.items()
                   if spec.get("rate_bps") and not spec.get("jitter_s")
                   and vif in state.vif_bridges}
        peers = {vif: [other for other, bridge in state.vif_bridges.items()
                       if bridge == state.vif_bridges[vif] and other != vif]
                 for vif in checked}
        gone = {v for v in {*checked, *(p for ps in peers.values() for p in ps)}
                if not self._vif_present(v)}
        whole = {vif: spec for vif, spec in checked.items()
                 if vif not in gone and not gone & set(peers[vif])}
        if checked and not whole:
            raise BackendError(f"capturing frames on the vifs of {experiment}: "
                               f"{', '.join(sorted(gone))} not present")
        checked = whole
        if not checked:
            return []
        vifs = sorted(set(checked) | {p for vif in checked for p in peers[vif]})
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

    def capture_source(self, experiment: str, link: Link, node: str) -> CaptureSource:
        """The vif of `node`'s end of the link, from the state file: a
        packet socket there sees what the guest sends (as it reaches Dom0,
        before the link's shaping toward the peer) and what it receives (as
        it leaves the shaping toward the guest)."""
        state = self.state(experiment)
        end, peer = (link.a, link.b) if link.a.node == node else (link.b, link.a)
        key = _end_key(end.node, end.iface)
        vif = next((v for v, at in _vif_ends(state).items() if at == key), None)
        if vif is None:
            raise BackendError(f"{link} of {experiment}: no vif of {end} in the state "
                               "file; cannot capture it")
        return CaptureSource(vif, end.node, peer.node, vif_capture.open_socket,
                             vif_capture.receive, vif_capture.dropped)

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
                for _, argv in attach_argvs(raw, raw.domain_name):
                    total += self.runner.run(argv, timeout=XL_ATTACH_TIMEOUT_S).duration
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

    def restart(self, deployment: Deployment, node: str, plan: Plan,
                progress: Progress | None = None) -> int:
        """The node's domain destroyed (unless a crash did it already) and
        created again from its config, paused: new control keys, its vifs
        (the same names) on the same bridges, the experiment's current TDF,
        CPU cap and each vif's current shaping (changes made during the run
        included); unpaused; the vif tap started again to hold the new vifs.
        A Xen guest cannot reboot in place under selena: xl would create the
        new domain itself, with none of that set. On a failure the node is
        left down (its new domain destroyed) and the state keeps what exists."""
        say = progress or (lambda msg: log.info("%s", msg))
        guest = next((g for g in plan.guests if g.node == node), None)
        if guest is None or node not in deployment.domids:
            raise BackendError(f"no node named {node!r} in experiment {deployment.experiment}")
        with self._locked(say):
            state = self.state(deployment.experiment)
            old = state.domains.get(guest.domain_name)
            if old is not None and self._domain_gone(guest.domain_name, old) is False:
                self.runner.run(["xl", "destroy", str(old)])
            with self._state_lock:
                state.domains.pop(guest.domain_name, None)
                self._save(state)
            self._wait_vifs_gone(guest)
            shaping = [argv for vif in guest.vifs if (spec := state.shaping.get(vif.name))
                       for argv in shaping_commands(vif.name, spec_link(spec), state.tdf)]
            act = _Exec(self, state)
            try:
                self._guest_steps(act, plan, guest, None, tdf=state.tdf, shaping=shaping)
                domid = state.domains[guest.domain_name]
                self._align_restarted(state, guest.domain_name, domid, say)
                old_tap = state.tap_pid
                self._unpause([domid])
                # The tap's sockets were bound to the old vifs: a new tap holds
                # every vif before the old one goes, so no vif is left untapped.
                self._start_tap(state, plan)
                if old_tap and old_tap != state.tap_pid:
                    self._stop_tap(dataclasses.replace(state, tap_pid=old_tap))
            except BaseException:
                created = state.domains.get(guest.domain_name)
                # Off the record only once destroyed: otherwise the teardown
                # (or `selena destroy`) still finds it.
                if created is not None and self.runner.run(
                        ["xl", "destroy", str(created)], check=False).returncode == 0:
                    with self._state_lock:
                        state.domains.pop(guest.domain_name, None)
                        self._save(state)
                raise
        deployment.domids[node] = domid
        say(f"{deployment.experiment}: {node} restarted as domain {domid} (was "
            f"{old if old is not None else 'gone'}) at TDF {units.tdf_text(state.tdf)}")
        return domid

    def _align_restarted(self, state: DeployState, name: str, domid: int,
                         say: Progress) -> None:
        """Start a restarted node's clock (its domain has never run) at
        another guest's virtual time and wall clock: a new domain's clock
        reads real time until its TDF is set, so it would be ahead of the
        others by the real time the run has gained on virtual time (and any
        pause). The first other guest that still exists is the reference;
        with none left there is nothing to agree with."""
        for ref_name, ref in sorted(state.domains.items()):
            if ref_name == name:
                continue
            argv = ["selena-tdf", "align", str(domid), str(ref)]
            result = self.runner.run(argv, check=False)
            if result.returncode == 0:
                say(f"{name}'s clock started at {ref_name}'s: {result.stdout.strip()}")
                return
            if re.search(rf"no such domain: {ref}\b", result.stderr):
                continue        # crashed or destroyed: the next one
            if result.returncode == 2 and "usage:" in result.stderr:
                raise _tdf_tool_too_old("cannot align a restarted guest's clock")
            raise CommandError(argv, result.returncode, result.stderr)
        say(f"{name}: no other guest left to take the time from; its clock starts from "
            "real time")

    def _vif_present(self, vif: str) -> bool:
        """The vif exists in Dom0 now (a crashed or destroyed guest's go)."""
        return (self.host_root / "sys/class/net" / vif).exists()

    def _wait_vifs_gone(self, guest: GuestPlan) -> None:
        """The old domain's vifs removed (libxl's hotplug scripts run after
        the destroy returns on some hosts): the new ones take their names."""
        deadline = time.monotonic() + VIF_GONE_S
        left = [vif.name for vif in guest.vifs]
        while left := [v for v in left if self._vif_present(v)]:
            if time.monotonic() > deadline:
                raise BackendError(f"{guest.node}'s old vifs ({', '.join(left)}) were still "
                                   f"there {VIF_GONE_S:g} s after its domain was destroyed")
            time.sleep(0.1)

    # -- teardown ------------------------------------------------------------------

    def destroy(self, experiment: str, pool: bool = False, force: bool = False) -> None:
        """Remove an experiment; with pool=True its guests go to the warm pool
        (vifs detached, control keys removed, paused) instead of being destroyed.
        An experiment whose run (another process, or another backend object)
        is still alive is refused unless force."""
        path = self._state_path(experiment)
        with self._locked():
            if not path.exists():
                raise BackendError(f"no experiment named {experiment!r} is deployed")
            took = self._claim_run(experiment, force=force, action="destroyed",
                                   fix="stop it, or destroy with --force / force=True")
            try:
                self._teardown(DeployState.load(path), pool=pool)
            except BaseException:
                if took:
                    self._release_run(experiment)
                raise
            self._release_run(experiment)

    def clean(self, force: bool = False, progress: Progress | None = None) -> list[str]:
        """Remove every selena-tagged object on this host: each experiment it
        can, then whatever still carries a tag (crashed deploys, lost or corrupt
        state files). Experiments whose run is alive are skipped (and said so)
        unless force. Every step's failure is collected and raised together at
        the end, as a CleanupError, after all the others were tried."""
        say = progress or (lambda msg: log.info("%s", msg))
        removed: list[str] = []
        failures: list[str] = []
        live: set[str] = set()
        with self._locked(progress):
            for path in sorted(self.state_dir.glob("*.json")):
                experiment = path.stem
                if not EXPERIMENT_RE.fullmatch(experiment):
                    failures.append(f"{path}: not a state file of selena (its name is not "
                                    "an experiment name); left alone")
                    continue
                try:
                    took = self._claim_run(experiment, force=force, action="cleaned",
                                           fix="selena clean --force removes it")
                except ExperimentInUse as exc:
                    live.add(experiment)
                    say(f"experiment {experiment}: its run (pid {_pid_text(exc.pid)}) is "
                        "still alive; skipped (selena clean --force removes it)")
                    continue
                except (OSError, BackendError) as exc:
                    failures.append(f"experiment {experiment}: run lock: {exc}")
                    continue
                try:
                    self._clean_one(path, removed, failures)
                finally:
                    if took or self._owns_run(experiment):
                        self._release_run(experiment)
            self._sweep_run_files(live, failures, force)
            self._sweep_tags(removed, failures, live)
        if failures:
            raise CleanupError(removed, failures)
        return removed

    def _clean_one(self, path: Path, removed: list[str], failures: list[str]) -> None:
        try:
            state = DeployState.load(path)
        except StateFileError as exc:
            failures.append(str(exc))
            path.unlink(missing_ok=True)    # its objects are swept by tag below
            return
        names = list(state.domains) + list(state.bridges)
        try:
            self._teardown(state)
            removed += names
        except (BackendError, CommandError, ControlError, OSError) as exc:
            failures.append(f"experiment {state.experiment}: {exc}")
            removed += [n for n in names
                        if n not in state.domains and n not in state.bridges]

    def _sweep_tags(self, removed: list[str], failures: list[str], live: set[str]) -> None:
        """Objects whose state file was lost or corrupt: trust only the tags,
        and leave those of experiments whose run is alive."""
        domains: dict[str, tuple[int, str]] = {}
        self._sweep(removed, failures, "", lambda: domains.update(
            self._tagged_domains_marked(failures)), what="listing the domains (xl list)")
        for name, (domid, marker) in domains.items():
            if marker not in live:
                self._sweep(removed, failures, name,
                            functools.partial(self._destroy_domain, name, domid, None))
        ovs: dict[str, str] = {}
        self._sweep(removed, failures, "", lambda: ovs.update(self._tagged_ovs_bridges()),
                    what="listing the OVS bridges (ovs-vsctl list-br)")
        for bridge, tag in ovs.items():
            if tag not in live:
                self._sweep(removed, failures, bridge, functools.partial(
                    self.runner.run, ["ovs-vsctl", "--if-exists", "del-br", bridge]))
        linux: dict[str, str] = {}
        self._sweep(removed, failures, "", lambda: linux.update(self._tagged_linux_bridges()),
                    what="listing the Linux bridges (ip link show type bridge)")
        for bridge, tag in linux.items():
            if tag not in live:
                self._sweep(removed, failures, bridge,
                            functools.partial(self.runner.run, ["ip", "link", "del", bridge]))

    def _sweep_run_files(self, live: set[str], failures: list[str], force: bool) -> None:
        """Run-lock files without a state file: one still held is a live run
        (its tagged objects are spared, `live`, unless force); the others are
        removed."""
        for run in sorted(self.state_dir.glob("*.run")):
            experiment = run.stem
            if experiment in live or self._owns_run(experiment) or \
                    not EXPERIMENT_RE.fullmatch(experiment) or \
                    self._state_path(experiment).exists():
                continue
            try:
                if self._claim_run(experiment, force=False, action="", fix=""):
                    self._release_run(experiment)
            except ExperimentInUse:
                if not force:
                    live.add(experiment)
            except OSError as exc:
                failures.append(f"run lock {run}: {exc}")

    @staticmethod
    def _sweep(removed: list[str], failures: list[str], name: str,
               remove: Callable[[], object], what: str = "") -> None:
        """One step of clean; `name` goes into removed when it worked."""
        try:
            remove()
            if name:
                removed.append(name)
        except (BackendError, CommandError, ControlError, OSError) as exc:
            failures.append(f"{what or name}: {exc}")

    def _teardown(self, state: DeployState, pool: bool = False) -> None:
        errors: list[str] = []
        try:
            self._stop_tap(state)
        except OSError as exc:
            errors.append(f"stopping the vif tap (pid {state.tap_pid}): {exc}")
        for name, domid in list(state.domains.items()):
            try:
                key = state.pool_keys.get(name)
                if pool and key and self._is_ours(name, domid, state.experiment):
                    self._release_to_pool(name, domid, key)
                else:
                    self._destroy_domain(name, domid, state.experiment)
                del state.domains[name]
            except (BackendError, CommandError, ControlError) as exc:
                errors.append(str(exc))
        for bridge, kind in list(state.bridges.items()):
            try:
                if kind == "ovs":
                    if self._ovs_tag(bridge) == state.experiment:
                        self.runner.run(["ovs-vsctl", "--if-exists", "del-br", bridge])
                elif self._linux_bridge_tag(bridge) == state.experiment:
                    self.runner.run(["ip", "link", "del", bridge])
                del state.bridges[bridge]
            except (BackendError, CommandError) as exc:
                errors.append(str(exc))
        if errors:
            # Keep what could not be removed on record, so destroy can be retried.
            self._save(state)
            raise BackendError("cleanup incomplete:\n  " + "\n  ".join(errors))
        self._state_path(state.experiment).unlink(missing_ok=True)
        # The xl configs and the vif tap's logs written for this experiment
        # (the directory stayed behind while a log was in it).
        cfg_dir = self.state_dir / state.experiment
        if cfg_dir.is_dir():
            for made in [*cfg_dir.glob("*.cfg"), *cfg_dir.glob("vif-tap.log*")]:
                made.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            cfg_dir.rmdir()

    def _marker(self, domid: int) -> str | None:
        """The domain's experiment marker; None when it has none (or it is not
        readable: not selena's) or the domain is gone (ENOENT)."""
        try:
            value = self.xenstore().read_or_none(f"/local/domain/{domid}/{MARKER}")
        except XenstoreError as exc:
            if exc.code == "EACCES":
                return None
            raise
        return None if value is None else value.decode(errors="replace").strip()

    def _domain_gone(self, name: str, domid: int) -> bool | None:
        """Whether the hypervisor says the domain is gone: True (xl's not-found
        answer, or `xl list` without it), False (it has that domid), None (the
        name now belongs to another domid). Any other failure is raised: a
        transient libxl error must not pass for "already destroyed"."""
        found = self.runner.run(["xl", "domid", name], check=False)
        if found.returncode == 0:
            return False if found.stdout.strip() == str(domid) else None
        if _xl_not_found(found.stderr, name):
            return True
        try:
            listing = self.runner.run(["xl", "list"]).stdout
        except CommandError as exc:
            raise BackendError(f"cannot tell whether domain {name} ({domid}) still exists: "
                               f"`xl domid` said {found.stderr.strip()[-300:]!r}, and "
                               f"{exc}") from None
        rows = {tuple(line.split()[:2]) for line in listing.splitlines()[1:]}
        if (name, str(domid)) in rows:
            raise BackendError(f"`xl domid {name}` failed ({found.stderr.strip()[-300:]!r}) "
                               f"but `xl list` shows it as domain {domid}")
        return True

    def _is_ours(self, name: str, domid: int, experiment: str | None) -> bool:
        """Is the domain still the one selena created (name, domid and marker)?
        False when the hypervisor says it is gone; raises when it cannot tell."""
        if not name.startswith("selena-"):
            return False
        if self._domain_gone(name, domid) is not False:
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
        return {name: domid for name, (domid, _) in self._tagged_domains_marked().items()}

    def _tagged_domains_marked(self, failures: list[str] | None = None
                               ) -> dict[str, tuple[int, str]]:
        """selena's domains: name -> (domid, marker). With `failures`, a marker
        that cannot be read is reported there and its domain left out."""
        listing = self.runner.run(["xl", "list"]).stdout.splitlines()[1:]
        tagged = {}
        for line in listing:
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("selena-") and parts[1].isdigit():
                domid = int(parts[1])
                try:
                    marker = self._marker(domid)
                except ControlError as exc:
                    if failures is None:
                        raise
                    failures.append(f"{parts[0]}: reading its marker: {exc}")
                    continue
                if marker is not None:
                    tagged[parts[0]] = (domid, marker)
        return tagged

    def _tagged_ovs_bridges(self) -> dict[str, str]:
        """OVS bridges carrying selena's tag: bridge -> experiment. No OVS
        installed means none; any other failure is raised."""
        # Ask each bridge for its tag rather than trusting `find` semantics for
        # a missing map key: a foreign bridge must never look tagged.
        try:
            out = self.runner.run(["ovs-vsctl", "list-br"])
        except CommandError as exc:
            if exc.returncode is None and not isinstance(exc, CommandTimeout):
                return {}       # ovs-vsctl cannot start: not installed
            raise
        found = {}
        for bridge in (ln.strip() for ln in out.stdout.splitlines()):
            tag = self._ovs_tag(bridge) if bridge else None
            if tag is not None:
                found[bridge] = tag
        return found

    def _ovs_tag(self, bridge: str) -> str | None:
        """The bridge's experiment tag; None if it has none or does not exist."""
        out = self.runner.run(["ovs-vsctl", "br-get-external-id", bridge,
                               "selena-experiment"], check=False)
        if out.returncode != 0:
            if "no bridge named" in out.stderr:
                return None
            raise BackendError(f"cannot read the tag of OVS bridge {bridge}: "
                               f"{out.stderr.strip()[-300:] or f'exit {out.returncode}'}")
        return out.stdout.strip().strip('"') or None

    def _tagged_linux_bridges(self) -> dict[str, str]:
        """Linux bridges carrying selena's alias: bridge -> experiment."""
        out = self.runner.run(["ip", "-o", "link", "show", "type", "bridge"])
        found = {}
        for line in out.stdout.splitlines():
            match = re.match(r"\d+:\s+([^:@\s]+)", line)
            alias = re.search(r"\balias (\S+)", line)
            if match and alias and alias.group(1).startswith(LINUX_BRIDGE_ALIAS):
                found[match.group(1)] = alias.group(1)[len(LINUX_BRIDGE_ALIAS):]
        return found

    def _linux_bridge_tag(self, bridge: str) -> str | None:
        """The bridge's experiment tag; None if it has none or does not exist."""
        out = self.runner.run(["ip", "-o", "link", "show", "dev", bridge], check=False)
        if out.returncode != 0:
            if "does not exist" in out.stderr:
                return None
            raise BackendError(f"cannot read the alias of Linux bridge {bridge}: "
                               f"{out.stderr.strip()[-300:] or f'exit {out.returncode}'}")
        alias = re.search(r"\balias (\S+)", out.stdout)
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
                state = DeployState.load(path)
                entry: dict[str, object] = {**asdict(state),
                                            "frozen": self._frozen(state.domains.values())}
            except StateFileError as exc:
                entry = {"experiment": path.stem, "error": str(exc)}
            if EXPERIMENT_RE.fullmatch(path.stem):
                entry["run_pid"] = self.run_owner(path.stem)
            states.append(entry)
        return states

    def run_owner(self, experiment: str) -> int | None:
        """The pid of the live run that owns the experiment (this process's
        if this object deployed it; -1 if its owner has not written its pid
        yet), or None if nobody does (detached, or its run died)."""
        if self._owns_run(experiment):
            return os.getpid()
        path = self._run_path(experiment)
        try:
            handle = open(path)     # noqa: SIM115 - closed below
        except FileNotFoundError:
            return None
        with handle:
            try:
                # A shared lock only tests: it never keeps an owner out.
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _holder(handle) or -1
            return None

    def deployed(self, experiment: str) -> Deployment:
        return self.state(experiment).deployment()

    def frozen(self, deployment: Deployment) -> bool:
        return self._frozen(deployment.domids.values())

    def _frozen(self, domids: Iterable[int]) -> bool:
        """The hypervisor's answer for one guest: a freeze and a thaw take
        them all at once."""
        domid = min(domids, default=None)
        if domid is None:
            return False
        try:
            out = self.runner.run(["selena-tdf", "status", str(domid)], check=False).stdout
        except CommandError:
            return False        # no tool to ask: nothing selena could have frozen either
        return re.search(r"^frozen yes$", out, re.M) is not None

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
        within this backend). Waits at most `lock_timeout` seconds for it."""
        with self._host_lock:
            if self._host_lock_depth == 0:
                self._host_lock_file = self._take_host_lock(say)
            self._host_lock_depth += 1
            try:
                yield
            finally:
                self._host_lock_depth -= 1
                if self._host_lock_depth == 0:
                    handle = self._host_lock_file
                    self._host_lock_file = None
                    if handle is not None:
                        handle.close()

    def _take_host_lock(self, say: Progress | None) -> IO[str]:
        path = self.state_dir / ".lock"
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a+")  # noqa: SIM115 - held across the caller's yield
        except OSError as exc:
            # A user who is not root, before any Dom0 tool could say so.
            fix = (": deploy, destroy and clean need root in Dom0 (sudo)"
                   if isinstance(exc, PermissionError) else "")
            raise HostNotReady(f"cannot open selena's host lock {path}: "
                               f"{exc.strerror}{fix}") from None
        try:
            if not _try_flock(handle):
                (say or log.warning)("another selena deploy, destroy or clean is running "
                                     f"on this host (pid {_pid_text(_holder(handle))}); "
                                     f"waiting for {path}")
                deadline = time.monotonic() + self.lock_timeout
                while not _try_flock(handle):
                    if time.monotonic() >= deadline:
                        raise HostLockTimeout(
                            f"{path} is still held by pid {_pid_text(_holder(handle))} "
                            f"after {self.lock_timeout:g} s: if that selena hung, stop "
                            "it, then run this again")
                    time.sleep(HOST_LOCK_POLL_S)
            _write_pid(handle)
        except BaseException:
            handle.close()
            raise
        return handle

    # -- run locks: who owns an experiment -----------------------------------------

    def _run_path(self, experiment: str) -> Path:
        return self._state_path(experiment).with_suffix(".run")

    def _owns_run(self, experiment: str) -> bool:
        return experiment in self._runs

    def _claim_run(self, experiment: str, *, force: bool, action: str, fix: str) -> bool:
        """Take the experiment's run lock unless this object holds it already.
        True if taken now; False if held already, or held by another live run
        and force. Without force, a live run raises ExperimentInUse.

        The lock is an flock on <state_dir>/<experiment>.run, whose content is
        the owner's pid: the kernel drops it when the owner dies, however it
        dies, so a held lock always means a live owner."""
        with self._runs_lock:
            if experiment in self._runs:
                return False
            path = self._run_path(experiment)
            self.state_dir.mkdir(parents=True, exist_ok=True)
            tries = RUN_LOCK_TRIES
            while True:
                handle = open(path, "a+")  # noqa: SIM115 - kept open while the run lives
                if not _try_flock(handle):
                    pid = _holder(handle)
                    handle.close()
                    tries -= 1
                    if pid is None and tries > 0:
                        # No pid: an owner about to write it, or run_owner()
                        # testing the lock for an instant. Ask again.
                        time.sleep(HOST_LOCK_POLL_S / 4)
                        continue
                    if force:
                        return False
                    raise ExperimentInUse(experiment, pid, action, fix)
                # Whoever unlinks the file holds its lock: a lock on an unlinked
                # file is no lock, so take the one the path names now.
                try:
                    same = os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    break
                handle.close()
            _write_pid(handle)
            self._runs[experiment] = handle
            return True

    def _release_run(self, experiment: str) -> None:
        with self._runs_lock:
            handle = self._runs.pop(experiment, None)
            if handle is None:
                return
            with contextlib.suppress(OSError):
                self._run_path(experiment).unlink()
            handle.close()


def _try_flock(handle: IO[str]) -> bool:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(handle: IO[str]) -> int | None:
    """The pid a lock's holder wrote into it (None if none yet)."""
    try:
        handle.seek(0)
        text = handle.read(32).strip()
    except (OSError, ValueError):
        return None
    return int(text) if text.isdigit() else None


def _write_pid(handle: IO[str]) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()


class _Exec:
    """Runs deploy steps for real, recording each domain as soon as it exists."""

    def __init__(self, backend: XlBackend, state: DeployState):
        self.backend = backend
        self.state = state
        # Set when the deploy fails or is interrupted: no more vif attaches.
        self.stop = threading.Event()

    def run(self, argv: Sequence[str], check: bool = True) -> None:
        slow = tuple(argv[:2]) == ("xl", "create")
        if slow:
            self.backend.runner.run(argv, check=check, timeout=XL_CREATE_TIMEOUT_S)
        else:
            self.backend.runner.run(argv, check=check)

    def comment(self, text: str) -> None:
        log.debug("%s", text.strip())

    def write_file(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def write_keys(self, keys: list[Key]) -> None:
        xs = self.backend.xenstore()
        for key in keys:
            xs.write(key.path, key.fresh_value())
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

    def attach(self, guest: GuestPlan, vif: VifPlan, argv: list[str]) -> None:
        where = (f"{guest.node}'s interface {vif.index} (vif {vif.name} on bridge "
                 f"{vif.bridge})")
        if self.stop.is_set():
            raise BackendError(f"{where} not attached: the deploy is stopping")
        try:
            self.backend.runner.run(argv, timeout=XL_ATTACH_TIMEOUT_S)
        except CommandError as exc:
            raise BackendError(f"attaching {where} failed: {exc} (the hotplug script's own "
                               "messages are in /var/log/xen/xen-hotplug.log)") from exc


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
            if key.random_bytes:
                # Drawn by the shell that runs the plan, as selena draws it.
                self.lines.append(
                    f'xenstore-write {self._word(key.path)} '
                    f'"$(od -An -vtx1 -N{key.random_bytes} /dev/urandom | tr -d \' \\n\')"')
            else:
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

    def attach(self, guest: GuestPlan, vif: VifPlan, argv: list[str]) -> None:
        self.run(argv)

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



def _end_key(node: str, index: int) -> str:
    return f"{node} {index}"


def _vif_ends(state: DeployState) -> dict[str, str]:
    """vif -> its link end; a state file written before vif_ends has only
    the labels, then "h1 eth0" for interface 0."""
    if state.vif_ends:
        return state.vif_ends
    return {vif: label.replace(" eth", " ", 1) for vif, label in state.vif_nodes.items()}


def _link_vifs(state: DeployState, link: Link) -> list[str]:
    """The Dom0 vifs of both ends of a link (by the state file's labels)."""
    ends = {_end_key(e.node, e.iface) for e in (link.a, link.b)}
    vifs = sorted(vif for vif, end in _vif_ends(state).items() if end in ends)
    if len(vifs) != len(ends):
        raise BackendError(f"{link} of {state.experiment}: its vifs are not in the state "
                           f"file (found {', '.join(vifs) or 'none'})")
    return vifs


def shaping_spec(link: Link) -> dict[str, float | None]:
    """A link's shaping in its own (virtual) terms, as the state file keeps
    it per vif (prio as 1.0: the file holds numbers)."""
    spec: dict[str, float | None] = {"rate_bps": link.rate_bps, "delay_s": link.delay_s,
                                     "jitter_s": link.jitter_s, "loss": link.loss,
                                     "queue": link.queue_packets}
    if link.prio:
        spec["prio"] = 1.0
    return spec


def spec_link(spec: dict[str, float | None]) -> Link:
    """The link a state file's shaping entry describes (no ends)."""
    queue = spec.get("queue")
    return Link(Endpoint("", 0), Endpoint("", 0), rate_bps=spec.get("rate_bps"),
                delay_s=spec.get("delay_s") or 0.0, jitter_s=spec.get("jitter_s") or 0.0,
                loss=spec.get("loss") or 0.0,
                queue_packets=None if queue is None else int(queue),
                prio=bool(spec.get("prio")))


def _qdisc_shape(spec: dict[str, float | None]) -> tuple[bool, bool, bool]:
    """Which qdiscs a vif's shaping has (htb, netem, prio): while it stays
    the same, the qdiscs are changed in place."""
    link = spec_link(spec)
    return (link.rate_bps is not None,
            bool(netem_args(link.delay_s, link.jitter_s, link.loss, link.queue_packets)),
            link.prio)


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
        stats.sent_bytes = max(stats.sent_bytes, int(entry.get("bytes", 0)))
        stats.drops += int(entry.get("drops", 0))
        stats.overlimits += int(entry.get("overlimits", 0))
        stats.backlog_bytes = max(stats.backlog_bytes, int(entry.get("backlog", 0)))
    return found
