"""The command channel: what the lifecycle, the engine, guest shaping and the
switch set-up use to run commands in a running experiment's nodes, whatever
carries them. Every backend returns one from `Backend.command_channel()`:
the xl backend the Xenstore controller to the guest agents
(selena.control.channel.Controller), the Mininet baseline a channel into
its hosts' namespaces (selena.backends.mininet.NamespaceChannel).

A channel hands out a CommandHandle per submitted command and completes it,
exactly once, with a CommandResult (`handle.complete(result)`); callers
wait on the handle from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from selena.control.protocol import CommandSpec, CommandState, printable
from selena.errors import ControlError
from selena.relay import OutputFollower

# What Dom0 keeps of one command's stdout, and again of its stderr: beyond it
# chunks are still read and acknowledged (so the guest never stalls) but
# dropped, and the result counts what was dropped (`yes` in a guest once put
# 27 MB into Dom0 in 7 s).
DEFAULT_OUTPUT_CAP = 16 * 1024 * 1024


# Output kept and a follower's registration and end (CommandHandle.follow)
# exclude each other, so a follower gets every byte once; one lock for every
# handle (none to make per command), held for a bytearray append.
_FOLLOWING = threading.Lock()


def _held_lock() -> Any:
    lock = threading.Lock()
    lock.acquire()
    return lock


class _Latch:
    """threading.Event's is_set/set/wait on a bare lock, held until set: a
    command's end is set once and looked at several times per command, and
    an Event's construction and set() run a Condition's Python code (three
    caught AttributeErrors to build one), dear under emulation."""

    __slots__ = ("_flag", "_gate")

    def __init__(self) -> None:
        self._flag = False
        self._gate = _held_lock()

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        if self._flag:
            return
        self._flag = True
        self._pass_gate()

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        if self._gate.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            self._pass_gate()           # the next waiter's turn
        return self._flag

    def _pass_gate(self) -> None:
        try:
            self._gate.release()
        except RuntimeError:
            pass                        # open already (set twice at once)


@dataclass
class CommandResult:
    guest: str
    id: str
    command: str
    state: str                      # exited | killed | failed | lost
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None       # killed: kill|timeout|signal; failed/lost: why
    detail: str = ""
    start_ns: int | None = None     # guest CLOCK_REALTIME (virtual time)
    end_ns: int | None = None
    dur_ns: int | None = None       # guest CLOCK_MONOTONIC
    stdout: bytes = b""
    stderr: bytes = b""
    submitted: float = 0.0          # Dom0 wall clock (real time)
    finished: float = 0.0
    stdout_dropped: int = 0         # bytes past the output cap, not kept
    stderr_dropped: int = 0
    lost_bytes: int = 0             # output the guest could not hand over (e.g. EQUOTA)

    @property
    def ok(self) -> bool:
        # Output lost on the way is a failure, whatever the exit code.
        return self.state == "exited" and self.exit_code == 0 and not self.lost_bytes

    @property
    def truncated(self) -> bool:
        return bool(self.stdout_dropped or self.stderr_dropped)

    def summary(self) -> str:
        """One line; the guest's own words (reason, detail) with control
        characters escaped."""
        if self.lost_bytes:
            return f"{self._summary()}, {self.lost_bytes} output bytes lost in the guest"
        if self.truncated:
            return (f"{self._summary()}, output truncated ({self.stdout_dropped} stdout and "
                    f"{self.stderr_dropped} stderr bytes past the cap dropped)")
        return self._summary()

    def _summary(self) -> str:
        if self.state == "exited":
            return f"exited {self.exit_code}"
        reason = printable(self.reason or "")
        if self.state == "killed":
            return f"killed by signal {self.signal} ({reason})"
        return f"{self.state} ({reason}: {printable(self.detail)})" if self.detail else self.state


class _Both:
    """Two followers of one command, each handed every piece."""

    __slots__ = ("first", "second")

    def __init__(self, first: OutputFollower, second: OutputFollower):
        self.first = first
        self.second = second

    def __call__(self, stream: int, data: bytes) -> None:
        self.first(stream, data)
        self.second(stream, data)

@dataclass
class CommandHandle:
    """One submitted command: its channel completes it once, callers wait.
    Past `_result`, the fields are the Xenstore controller's bookkeeping
    (selena.control.channel), unused by other channels."""

    guest: str
    id: str
    spec: CommandSpec
    submitted: float
    _done: _Latch = field(default_factory=_Latch, repr=False)
    _result: CommandResult | None = field(default=None, repr=False)
    # Collected so far (pump thread only).
    _out: list[bytearray] = field(default_factory=lambda: [bytearray(), bytearray()],
                                  repr=False)
    _next: list[int] = field(default_factory=lambda: [0, 0], repr=False)
    _dropped: list[int] = field(default_factory=lambda: [0, 0], repr=False)
    _state: CommandState | None = field(default=None, repr=False)
    # Xenstore refused the spec's write (the reply comes to the pump).
    _send_error: ControlError | None = field(default=None, repr=False)
    # Rung when the command ends or when the caller waiting on it may take the
    # pump's role: a waiting caller sleeps on it. A bare lock, held while no
    # ring is pending (_ring releases it, the waiter's acquire consumes it),
    # not an Event: both ends are then C calls, where an Event's wait and set
    # run a Condition's Python code (dear under emulation, once per command).
    _bell: Any = field(default_factory=_held_lock, repr=False)
    # The channel's own wait (the Controller's: a waiting caller may read the
    # socket itself); None: wait on `_done` alone.
    _waiter: Callable[[CommandHandle, float | None], bool] | None = field(
        default=None, repr=False)
    _follower: OutputFollower | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def result(self) -> CommandResult | None:
        """The final result; None while the command runs."""
        return self._result

    def wait_done(self, timeout: float | None = None) -> bool:
        """Block until the command has ended (True) or `timeout` real seconds
        passed (False); None: no limit."""
        if self._waiter is not None and not self._done.is_set():
            return self._waiter(self, timeout)
        return self._done.wait(timeout)

    def follow(self, on_output: OutputFollower) -> None:
        """Call on_output(stream, data) (stream 0: stdout, 1: stderr) with
        the command's output as its channel keeps it: what it kept before
        this call at once, then as it comes (a channel that collects output
        only at the end hands it all then); at the end each stream's rest
        and an empty `data`, its end. Called on the channel's thread, so it
        must not block. A command may have several followers."""
        with _FOLLOWING:
            previous = self._follower
            self._follower = on_output if previous is None else _Both(previous, on_output)
            for stream, kept in enumerate(self._out):
                if kept:
                    on_output(stream, bytes(kept))
            if self._result is not None:
                self._hand_rest(on_output, self._result)
            elif self._done.is_set():       # ended without a result (a failed channel)
                on_output(0, b"")
                on_output(1, b"")

    def _keep(self, stream: int, data: bytes) -> None:
        """Output the channel collected while the command runs (its thread);
        an empty piece (a guest's empty chunk) is nothing, not an end."""
        if not data:
            return
        with _FOLLOWING:
            self._out[stream] += data
            if self._follower is not None:
                self._follower(stream, data)

    def complete(self, result: CommandResult) -> None:
        """The command has ended: its channel hands over the result (once)
        and every waiter wakes."""
        self._settle(result)
        self._ring()

    def _settle(self, result: CommandResult) -> None:
        """The result kept and the command marked done; its waiters are rung
        by the caller (complete, or a channel's pass once it has ended every
        command it serves)."""
        with _FOLLOWING:
            self._result = result
            if self._follower is not None:
                self._hand_rest(self._follower, result)
        self._done.set()

    def _hand_rest(self, on_output: OutputFollower, result: CommandResult) -> None:
        """The result's output past what was kept while it ran, and the end."""
        for stream, whole in enumerate((result.stdout, result.stderr)):
            rest = whole[len(self._out[stream]):]
            if rest:
                on_output(stream, rest)
            on_output(stream, b"")

    def _end(self) -> None:
        """Done without a result (the channel failed): waiters wake, a
        follower hears both streams end."""
        with _FOLLOWING:
            if self._follower is not None and self._result is None and not self._done.is_set():
                self._follower(0, b"")
                self._follower(1, b"")
            self._done.set()
        self._ring()

    def _ring(self) -> None:
        try:
            self._bell.release()
        except RuntimeError:
            pass                    # rung already, and not yet heard


@runtime_checkable
class CommandChannel(Protocol):
    """Runs commands in the nodes of one running experiment.

    Implementations subclass it to inherit `run` and `wait`; anything with
    these members passes isinstance() (runtime_checkable).
    tdf: the rate the nodes' time runs at (limits that follow it scale).
    output_cap: bytes of each command's stdout, and of its stderr, kept.
    """

    tdf: float
    output_cap: int

    def add_guest(self, name: str, where: int, /) -> None:
        """Attach node `name`; `where` is what the backend's Deployment maps
        it to (a Xen domain id, a namespace's process id)."""
        ...

    def wait_ready(self, timeout: float, nodes: Collection[str] | None = None) -> None:
        """Wait (real seconds) until every attached node (or those of
        `nodes`: a restarted one, beside others that may have crashed) can
        run commands; GuestLost (or a subclass of ControlError) names one
        that cannot."""
        ...

    def drop_guest(self, name: str, why: str, /) -> None:
        """Node `name` is going away (a restart): its running commands end
        lost with `why`, new ones are refused with it until add_guest
        attaches the node again. A channel that cannot raises ControlError."""
        raise ControlError(f"{name}: this channel cannot follow a node that restarts")

    def submit(self, guest_name: str, spec: CommandSpec) -> CommandHandle:
        """Start a command; its handle completes when it ends."""
        ...

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        """Send `signal` to a running command (nothing if it has ended)."""
        ...

    def set_tdf(self, tdf: float) -> None:
        """The nodes now run at `tdf`."""
        ...

    def close(self) -> None:
        """Detach: no more commands; what this channel opened is released."""
        ...

    def hold_heartbeats(self, held: bool) -> None:
        """The nodes' time stands still (held) or runs again: a channel that
        declares silent nodes lost must not count the standstill. One that
        watches no liveness has nothing to do."""
        return None

    def wait(self, handle: CommandHandle, timeout: float | None = None) -> CommandResult:
        """A command's result; ControlError if it has not ended after
        `timeout` real seconds (None: no limit)."""
        if not handle.wait_done(timeout):
            raise ControlError(f"command {handle.spec.describe()!r} on {handle.guest} still "
                               f"running after {timeout:g} s")
        result = handle.result
        if result is None:
            raise ControlError(f"command {handle.spec.describe()!r} on {handle.guest} ended "
                               "without a result")
        return result

    def run(self, guest_name: str, spec: CommandSpec,
            timeout: float | None = None) -> CommandResult:
        """Submit a command and wait for its result."""
        return self.wait(self.submit(guest_name, spec), timeout)
