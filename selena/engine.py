"""The scenario engine: commands in deployed guests, in the guests' virtual
time. The experiment lifecycle (selena.experiment) creates one per run and
exposes its API; scenarios never build it themselves.

Virtual time starts when the engine starts (all guests already running) and
advances at 1/TDF of Dom0's real clock, which is exactly how the patched
hypervisor advances every guest's clock. The clock keeps its segments, so a
TDF change leaves virtual time continuous.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selena import transfer
from selena.control.channel import CommandHandle, CommandResult
from selena.control.interface import CommandChannel
from selena.control.protocol import CommandSpec
from selena.errors import ControlError, ScenarioError
from selena.metrics import Metric, make_metric
from selena.relay import OutputFollower, SharedRelay, relayed
from selena.transfer import Transfer

if TYPE_CHECKING:
    from selena.openflow import Switches

log = logging.getLogger(__name__)

# Real seconds allowed beyond a command's own (virtual) timeout before the
# controller stops waiting: boot-time scheduling noise under emulation.
WAIT_SLACK_S = 60.0
# Real seconds a failed or interrupted step's siblings get to end (Engine._steps).
STEPS_SETTLE_S = 10.0
# A foreground command (exp.cmd) with no timeout of its own is killed after
# this many virtual seconds (Experiment(command_timeout=...) changes it;
# timeout=0 or math.inf on a call means none). Background commands
# (exp.start) run until they end, are killed or the experiment stops.
DEFAULT_COMMAND_TIMEOUT_S = 600.0
# The longest timeout a command may have (virtual seconds): about three years,
# far inside the agent's 64-bit nanoseconds.
MAX_TIMEOUT_S = 1e8
# At the end of a run: how long (real seconds, plus TDF x this in virtual)
# to wait for a command killed because the scenario left it running.
STRAGGLER_WAIT_S = 30.0
# At the end of a run: the most real seconds spent waiting, in all, for what
# `at` scheduled and for commands left running; then the run ends anyway
# (callbacks not done are reported, commands not collected recorded lost),
# so the teardown is never held up without limit (Experiment(finish_limit=)).
FINISH_LIMIT_S = 600.0

# A record's origin when the scenario's own code ran it (exp.cmd, exp.start);
# SELENA Listing-2 actions record theirs (selena.compat: "pushCmd", ...).
SCENARIO = "scenario"

# How long (virtual seconds) wait_listening waits for a port by default, and
# how often the guest looks: a server's socket listens milliseconds after it
# starts on an idle host, seconds later on a loaded one.
LISTEN_TIMEOUT_S = 30.0
LISTEN_POLL_S = 0.05

# Where a finished command's output goes as it completes (the bundle being
# written): called with its record and its stdout and stderr.
OutputSink = Callable[["Recorded", bytes, bytes], None]


class VirtualClock:
    """Virtual seconds since the start, at 1/TDF of a real clock, with the TDF
    changeable: each change opens a new segment at the current instant."""

    def __init__(self, tdf: float, clock: Callable[[], float] = time.monotonic,
                 reason: str | None = None):
        self._clock = clock
        self._cond = threading.Condition()
        start = clock()
        # (real start, virtual start, tdf) of each segment, in order.
        self._segments: list[tuple[float, float, float]] = [(start, 0.0, tdf)]
        # Why a segment began, by its index (the adaptive controller's reasons).
        self._reasons: dict[int, str] = {0: reason} if reason else {}
        self._stopped = False
        self._frozen: float | None = None     # virtual seconds where time stands still

    @property
    def tdf(self) -> float:
        return self._segments[-1][2]

    @property
    def started(self) -> float:
        return self._segments[0][0]

    def now(self) -> float:
        if self._frozen is not None:
            return self._frozen
        real0, virtual0, tdf = self._segments[-1]
        return virtual0 + (self._clock() - real0) / tdf

    @property
    def frozen(self) -> bool:
        return self._frozen is not None

    def freeze(self, at: float | None = None) -> float:
        """The guests' time stood still from `at` (a real instant, default
        now): virtual time stays where it was until thaw(); returns it."""
        with self._cond:
            if self._frozen is None:
                real = self._clock() if at is None else max(at, self._segments[-1][0])
                real0, virtual0, tdf = self._segments[-1]
                self._frozen = virtual0 + (real - real0) / tdf
            return self._frozen

    def thaw(self, at: float | None = None) -> float:
        """Virtual time goes on from `at` (default now), from where freeze()
        stopped it, at the same TDF: none is lost. A new segment of the
        timeline (same TDF) starts there."""
        with self._cond:
            if self._frozen is None:
                return self.now()
            virtual = self._frozen
            real = self._clock() if at is None else max(at, self._segments[-1][0])
            self._segments.append((real, virtual, self.tdf))
            self._frozen = None
            self._cond.notify_all()
            return virtual

    def real_elapsed(self) -> float:
        return self._clock() - self.started

    def set_tdf(self, tdf: float, at: float | None = None,
                reason: str | None = None) -> tuple[float, float]:
        """Change the rate from `at` (a real instant of the underlying clock,
        not before the last change; default now) on, for `reason` (kept in
        the timeline); returns (real seconds since the start, virtual
        seconds) of the change."""
        with self._cond:
            real = self._clock() if at is None else max(at, self._segments[-1][0])
            real0, virtual0, old = self._segments[-1]
            virtual = virtual0 + (real - real0) / old
            self._segments.append((real, virtual, tdf))
            if reason:
                self._reasons[len(self._segments) - 1] = reason
            self._cond.notify_all()
        return real - self.started, virtual

    def timeline(self) -> list[dict[str, Any]]:
        """Each segment: its TDF and where it starts, in real and virtual
        seconds, and why it began where that was given."""
        start = self.started
        out: list[dict[str, Any]] = []
        for i, (real, virtual, tdf) in enumerate(list(self._segments)):
            seg: dict[str, Any] = {"tdf": tdf, "real_s": real - start, "virtual_s": virtual}
            if i in self._reasons:
                seg["reason"] = self._reasons[i]
            out.append(seg)
        return out

    def stop(self) -> None:
        """The run is over: every sleeper wakes and raises ScenarioError, so a
        callback still waiting for its time never holds up the process."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def sleep_until(self, virtual: float) -> None:
        """Block until virtual time reaches `virtual` (re-timed on TDF changes)."""
        with self._cond:
            while True:
                if self._stopped:
                    raise ScenarioError("the run has ended: no more waiting for virtual time")
                remaining = virtual - self.now()
                if remaining <= 0:
                    return
                self._cond.wait(remaining * self.tdf)


@dataclass
class Recorded:
    """A finished command and where in the scenario it came from. The engine
    keeps no output: `result` has empty stdout and stderr, their sizes are
    here, and the bytes went to the bundle (nodes/<node>/<n>.stdout)."""

    seq: int
    result: CommandResult
    at_virtual: float           # virtual seconds after the scenario started
    n: int = 0                  # its number among its node's commands (1, 2, ...)
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    origin: str = SCENARIO      # what ran it: the scenario's code or a listing action


@dataclass
class _Started:
    handle: CommandHandle
    virtual_start: float
    timeout: float | None       # virtual seconds; None: no limit
    origin: str = SCENARIO


class Engine:
    """The scenario API over one experiment's guests: commands, virtual-time
    scheduling, waiting, metrics and fault injection."""

    def __init__(self, controller: CommandChannel, domids: dict[str, int], clock: VirtualClock,
                 *, crash: Callable[[str], None] | None = None,
                 switches: Switches | None = None, out_dir: Path | None = None,
                 command_timeout: float | None = DEFAULT_COMMAND_TIMEOUT_S,
                 params: dict[str, object] | None = None, output: OutputSink | None = None,
                 shown: SharedRelay | None = None):
        self.controller = controller
        # Where every command's output goes as it comes (a run's show_output).
        self._shown = shown
        self.domids = dict(domids)
        self.clock = clock
        self.switches = switches
        # Where the results bundle goes: scenarios may write derived files here.
        self.out_dir = out_dir
        self.params = dict(params or {})
        self.command_timeout = command_timeout
        self._crash = crash
        self._output = output
        self._seq = 0
        self._per_node: dict[str, int] = {}
        self._lock = threading.Lock()
        self.records: list[Recorded] = []
        self.metrics: dict[str, Metric] = {}
        self.transfers: list[Transfer] = []     # files put into and got out of guests
        # Commands started and not yet recorded (recorded ones are dropped:
        # their handles hold the output).
        self._started: dict[str, _Started] = {}
        self._recorded: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="scenario")
        self._scheduled: list[Future] = []

    @property
    def tdf(self) -> float:
        return self.clock.tdf

    # -- time ----------------------------------------------------------------------

    def now(self) -> float:
        """Virtual seconds since the scenario started."""
        return self.clock.now()

    def sleep(self, virtual_seconds: float) -> None:
        _check_seconds(virtual_seconds, "sleep")
        self.clock.sleep_until(self.now() + max(0.0, virtual_seconds))

    def at(self, t: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run fn(*args) when virtual time reaches t (seconds after the start)."""
        _check_seconds(t, "at")

        def later() -> Any:
            self.clock.sleep_until(t)
            return fn(*args, **kwargs)

        future = self._pool.submit(later)
        self._scheduled.append(future)
        return future

    def parallel(self, *calls: Callable[[], Any]) -> list[Any]:
        """Run the callables at once; return their results in order."""
        futures = [self._pool.submit(c) for c in calls]
        return [f.result() for f in futures]

    # -- commands ------------------------------------------------------------------

    def cmd(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
            env: dict[str, str] | None = None, cwd: str | None = None,
            check: bool = False, origin: str = SCENARIO,
            on_output: OutputFollower | None = None) -> CommandResult:
        """Run a command in `node` and wait for it. A string runs in /bin/sh; a
        list is an argv. timeout is in virtual seconds, enforced by the guest
        (default: the experiment's command_timeout; 0 or math.inf: none).
        origin: what its record says ran it. on_output: called with (stream,
        bytes) as the output comes (0: stdout, 1: stderr; a thread of its
        own), all of it before cmd returns; the result still holds it all."""
        if timeout is None:
            timeout = self.command_timeout
        handle = self.start(node, command, timeout=timeout, env=env, cwd=cwd, origin=origin)
        if on_output is None:       # the common case, without a context manager's cost
            return self.wait(handle, check=check)
        with relayed(handle, on_output):
            return self.wait(handle, check=check)

    def start(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
              env: dict[str, str] | None = None, cwd: str | None = None,
              origin: str = SCENARIO, show: bool = True) -> CommandHandle:
        """Start a command in the background; wait() or kill() it later
        (timeout in virtual seconds; None, 0 or math.inf: none). show=False:
        the run's show_output does not get its output (its caller shows it)."""
        if node not in self.domids:
            raise ScenarioError(f"no node named {node!r} in this experiment "
                                f"(have {', '.join(sorted(self.domids))})")
        if isinstance(command, str):
            if not command.strip():
                raise ScenarioError(f"{node}: empty command")
        elif not command or not all(isinstance(a, str) for a in command):
            raise ScenarioError(f"{node}: a command is a string or a non-empty list of "
                                f"strings, got {command!r}")
        limit = _timeout(timeout)
        spec = CommandSpec(
            argv=() if isinstance(command, str) else tuple(command),
            shell=command if isinstance(command, str) else None,
            env=dict(env or {}), cwd=cwd,
            timeout_ns=round(limit * 1e9) if limit else 0)
        handle = self.controller.submit(node, spec)
        with self._lock:
            self._started[handle.id] = _Started(handle, self.now(), limit, origin)
        if show and self._shown is not None:
            handle.follow(self._shown.follower(node, handle.id))
        return handle

    def wait(self, handle: CommandHandle, *, check: bool = False) -> CommandResult:
        """Wait for a command started with start() (or cmd's own). The guest
        enforces a command's timeout on its own clock; Dom0 gives up only
        WAIT_SLACK_S real seconds after that virtual deadline has passed (it
        follows TDF changes). check: a command that did not exit 0 raises
        ScenarioError (it is recorded first)."""
        result = self._result(handle)
        self._record(handle, result)
        if check and not result.ok:
            raise ScenarioError(f"{handle.guest}: `{result.command}` {result.summary()}: "
                                f"{result.stderr.decode(errors='replace')[-300:]}")
        return result

    def _result(self, handle: CommandHandle) -> CommandResult:
        """wait()'s result, not recorded."""
        started = self._started.get(handle.id)
        timeout = started.timeout if started else None
        if timeout is None:
            return self.controller.wait(handle, None)
        else:
            assert started is not None
            deadline = started.virtual_start + timeout
            overdue_since: float | None = None
            while not handle.done:
                if self.now() < deadline:
                    overdue_since = None
                elif overdue_since is None:
                    overdue_since = time.monotonic()
                elif time.monotonic() - overdue_since > WAIT_SLACK_S:
                    break
                handle.wait_done(1.0)
            if not handle.done:
                raise ControlError(f"command {handle.spec.describe()!r} on {handle.guest} still "
                                   f"running {WAIT_SLACK_S:g} real s after its {timeout:g} s "
                                   "(virtual) timeout")
            return self.controller.wait(handle, None)

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        self.controller.kill(handle, signal)

    # -- files ---------------------------------------------------------------------

    def put(self, node: str, src: str | os.PathLike[str], dest: str, *,
            mode: int | None = None) -> Transfer:
        """Copy local file `src` to `dest` in `node` (selena.transfer.put).
        The bundle records the copy (meta.json's `files`: paths, size,
        sha256, virtual time), not the commands that carried it."""
        at = self.now()
        steps = self._steps(node)
        done = transfer.put(steps, node, src, dest, mode=mode)
        return self._transferred(dataclasses.replace(done, at_virtual=at))

    def get(self, node: str, src: str, dest: str | os.PathLike[str]) -> Transfer:
        """Copy file `src` of `node` to local `dest` (selena.transfer.get);
        recorded as put is."""
        at = self.now()
        done = transfer.get(self._steps(node), node, src, dest)
        return self._transferred(dataclasses.replace(done, at_virtual=at))

    def _steps(self, node: str) -> transfer.RunLines:
        """Shell lines in `node`, all at once, that are steps of selena's own
        (a copy's pieces): run and waited for as commands, recorded only if
        the run ends while one is under way."""
        def run(lines: Sequence[str]) -> list[CommandResult]:
            handles = [self.start(node, line) for line in lines]
            try:
                return [self._result(handle) for handle in handles]
            except BaseException:
                # The steps still in flight land before the caller cleans up
                # after them (put removes its part files): a piece written
                # after that removal would stay in the guest.
                deadline = time.monotonic() + STEPS_SETTLE_S
                for handle in handles:
                    handle.wait_done(max(0.0, deadline - time.monotonic()))
                raise
            finally:
                with self._lock:
                    for handle in handles:
                        if handle.done:
                            self._started.pop(handle.id, None)
        return run

    def _transferred(self, done: Transfer) -> Transfer:
        with self._lock:
            self.transfers.append(done)
        return done

    def wait_listening(self, node: str, port: int, *,
                       timeout: float | None = LISTEN_TIMEOUT_S) -> None:
        """Wait until something in `node` listens on TCP `port` (Mininet's
        waitListening, asked inside the guest): start a server in the
        background, wait for its port, then start its clients. A fixed sleep
        instead is too short on a loaded host and costs TDF times its length
        in real time on an idle one. timeout: virtual seconds (None, 0 or
        math.inf: none)."""
        if not self.listening(node, port, timeout=timeout):
            raise ScenarioError(f"{node}: nothing listened on TCP port {port} within "
                                f"{timeout:g} virtual s; start its server before waiting, "
                                "or give a longer timeout")

    def listening(self, node: str, port: int, *,
                  timeout: float | None = LISTEN_TIMEOUT_S) -> bool:
        """wait_listening's answer: True once the port listens, False when
        `timeout` passed first."""
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ScenarioError(f"wait_listening: port {port!r} is not a TCP port "
                                "(give an int from 1 to 65535)")
        result = self.cmd(node, listening_probe(port), timeout=_timeout(timeout) or 0)
        if result.ok:
            return True
        if result.state == "killed" and result.reason == "timeout":
            return False
        raise ScenarioError(f"{node}: waiting for TCP port {port} to listen: the wait "
                            f"{result.summary()}")

    def _record(self, handle: CommandHandle, result: CommandResult) -> None:
        with self._lock:
            if handle.id in self._recorded:
                return
            self._recorded.add(handle.id)
            started = self._started.pop(handle.id, None)
            self._seq += 1
            n = self._per_node[result.guest] = self._per_node.get(result.guest, 0) + 1
            rec = Recorded(self._seq, dataclasses.replace(result, stdout=b"", stderr=b""),
                           started.virtual_start if started else 0.0, n,
                           len(result.stdout), len(result.stderr),
                           started.origin if started else SCENARIO)
            self.records.append(rec)
            output = self._output
        # Written outside the lock (other commands keep finishing meanwhile);
        # the caller's CommandResult keeps the bytes, the engine does not.
        if output is not None:
            output(rec, result.stdout, result.stderr)

    # -- results and faults --------------------------------------------------------

    def record(self, name: str, value: float | Sequence[float], *,
               expected: float | None = None, unit: str = "") -> Metric:
        """A named result (a number or samples), with the value expected if the
        emulation were perfect; goes to metrics.json and the end-of-run summary.
        Recording a name again adds samples."""
        metric = make_metric(name, value, expected, unit)
        with self._lock:
            existing = self.metrics.get(name)
            if existing is None:
                self.metrics[name] = metric
            else:
                existing.samples += metric.samples
                existing.expected = metric.expected if metric.expected is not None \
                    else existing.expected
                metric = existing
        return metric

    def set_switch_model(self, node: str, profile: str | None) -> None:
        """Emulate another switch control plane on `node` from now on (None:
        Open vSwitch's own); its flow table is emptied."""
        if self.switches is None:
            raise ScenarioError("this experiment has no OpenFlow switches")
        self.switches.set_profile(node, profile)

    def domid(self, node: str) -> int:
        if node not in self.domids:
            raise ScenarioError(f"no node named {node!r} in this experiment")
        return self.domids[node]

    def crash(self, node: str) -> None:
        """Fault injection: destroy the node's domain as a power failure would."""
        if self._crash is None:
            raise ScenarioError("this backend cannot crash nodes")
        if node not in self.domids:
            raise ScenarioError(f"no node named {node!r} in this experiment")
        self._crash(node)

    def finish(self, *, raise_errors: bool = True, limit: float = FINISH_LIMIT_S) -> None:
        """End of the scenario: wait for what `at` scheduled, then record every
        command the scenario started and never waited for, killing those still
        running (SIGKILL), so the bundle holds them all; `limit` real seconds
        for all the waiting (then the rest is reported, not waited for)."""
        deadline = time.monotonic() + limit
        try:
            errors = self.wait_scheduled(deadline, limit)
            self.end_commands(deadline)
        finally:
            self.stop()
        if errors and raise_errors:
            raise errors[0]

    def wait_scheduled(self, deadline: float, limit: float = FINISH_LIMIT_S
                       ) -> list[BaseException]:
        """Wait (until `deadline`, time.monotonic) for the callbacks `at`
        scheduled; returns their errors, in order, and one for those not done
        by then (left to stop(), which cancels them). Interruptible."""
        pending = [f for f in self._scheduled if not f.done()]
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # Short waits: a signal handler in the main thread runs between them.
            _, not_done = concurrent.futures.wait(pending, timeout=min(remaining, 1.0))
            pending = list(not_done)
        errors: list[BaseException] = []
        for future in self._scheduled:
            if future.done() and not future.cancelled():
                error = future.exception()
                if error is not None:
                    errors.append(error)
        if pending:
            errors.append(ScenarioError(
                f"{len(pending)} `at` callback(s) not done when the end of the run had "
                f"waited {limit:g} real s for them (finish_limit); they were cancelled"))
        return errors

    def pending_scheduled(self) -> int:
        """How many callbacks `at` scheduled have not run (or not ended)."""
        return sum(1 for future in self._scheduled if not future.done())

    def end_commands(self, deadline: float | None, why: str | None = None) -> None:
        """Record every command started and not yet recorded, killing those
        still running (SIGKILL) and waiting for each until `deadline`
        (time.monotonic; None: no waiting, those not done are recorded lost,
        with `why` or "the end of the run was interrupted")."""
        with self._lock:
            left = list(self._started.values())
        for started in left:
            handle = started.handle
            if not handle.done:
                try:
                    self.controller.kill(handle, 9)
                except ControlError as exc:
                    log.warning("could not kill %s on %s: %s", handle.spec.describe(),
                                handle.guest, exc)
            wait = 0.0 if deadline is None else max(0.0, min(
                STRAGGLER_WAIT_S + STRAGGLER_WAIT_S * self.tdf / 10,
                deadline - time.monotonic()))
            try:
                if not handle.done and wait == 0.0:
                    raise ControlError("not waited for: " + (
                        "the end of the run was past its finish limit" if deadline is not None
                        else why or "the end of the run was interrupted"))
                result = self.controller.wait(handle, wait)
            except ControlError as exc:
                result = CommandResult(guest=handle.guest, id=handle.id,
                                       command=handle.spec.describe(), state="lost",
                                       reason="teardown", detail=str(exc),
                                       submitted=handle.submitted, finished=time.time())
            self._record(handle, result)

    def stop(self) -> None:
        """No more scenario activity: sleepers wake (and fail), callbacks not
        started are cancelled, nothing more is written to the bundle."""
        self.clock.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            self._output = None


def listening_probe(port: int) -> str:
    """A guest shell loop that ends once TCP `port` is in the LISTEN state
    (0A) in /proc/net/tcp or tcp6, where the local port is the hex after
    the first address: every Linux guest has them, busybox or not, and no
    tool (ss, netstat) is needed."""
    return (f"until grep -qsE '^ *[0-9]+: [0-9A-F]+:{port:04X} [0-9A-F]+:[0-9A-F]+ 0A ' "
            f"/proc/net/tcp /proc/net/tcp6; do sleep {LISTEN_POLL_S:g}; done")


def _check_seconds(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ScenarioError(f"{what}: {value!r} is not a number of virtual seconds")


def _timeout(timeout: float | None) -> float | None:
    """A command timeout in virtual seconds, None for none; refuses nonsense."""
    if timeout is None:
        return None
    _check_seconds(timeout, "timeout")
    if timeout < 0:
        raise ScenarioError(f"timeout {timeout!r} is negative")
    if timeout == 0 or math.isinf(timeout):
        return None
    if timeout > MAX_TIMEOUT_S:
        raise ScenarioError(f"timeout {timeout:g} s is longer than {MAX_TIMEOUT_S:g} s "
                            "(use math.inf for none)")
    return float(timeout)

