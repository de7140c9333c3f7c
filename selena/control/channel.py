"""The controller side of the control channel: commands to guest agents and
their results back, over one Xenstore connection with watches.

The pump reacts to watch events on each guest's `out` directory and two
agent keys: it moves output chunks into memory, acknowledges them (the
agent's flow control), and completes commands. Callers submit commands and
wait on handles from any thread. The pump is a role, not a thread: a caller
waiting for its command takes it while nobody has it and reads the socket
itself, so its own result needs no wake-up by another thread; leaving, it
hands the role to another waiting caller. The pump thread takes the role
only when nobody waits (commands started and not waited for, housekeeping,
liveness).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from selena.control.interface import (
    DEFAULT_OUTPUT_CAP,
    CommandChannel,
    CommandHandle,
    CommandResult,
)
from selena.control.protocol import (
    PROTOCOL_VERSION,
    CommandSpec,
    CommandState,
    guest_text,
    net_failure,
    parse_end,
    parse_state,
    printable,
)
from selena.control.xenstore import XenstoreConnection
from selena.errors import (
    ControlError,
    GuestLost,
    GuestSetupError,
    ProtocolMismatch,
    XenstoreError,
)

log = logging.getLogger(__name__)

STREAMS = ("stdout", "stderr")


def _last_chunks(changed: set[str]) -> tuple[int, int]:
    """The highest chunk number of each stream among changed paths
    (`stdout/<n>`, `stderr/<n>`), -1 where none."""
    last = [-1, -1]
    for rest in changed:
        stream, _, index = rest.partition("/")
        # ASCII digits only: "²".isdigit() holds, and int() refuses it.
        if stream in STREAMS and index.isascii() and index.isdigit():
            i = STREAMS.index(stream)
            last[i] = max(last[i], int(index))
    return last[0], last[1]


# Chunks of one stream read in one pass: the agent keeps at most 16
# unacknowledged (PROTOCOL.md), so only a hostile guest claims more.
CHUNK_BATCH = 32
# Chunks of one stream read when no event said which exist (a directory
# event, a collapsed change set): the agent's window. Dom0 never lists a
# directory the guest owns (a guest can make the listing too large to answer);
# when every probed chunk is there it comes back for more.
CHUNK_PROBE = 16

# Distinct changed paths remembered per guest between two pump passes; past
# it they collapse into "re-read everything", so a guest creating and deleting
# keys of its own cannot grow Dom0's memory.
CHANGE_SET_LIMIT = 256

# Replies to specs left unread (on their own connection, nobody waits on
# them) before a pass reads them without waiting for the liveness check's.
SPEC_REPLIES_MAX = 128

# Real seconds a finished command's removal waits for another request to ride
# along with (one send fewer) before it is sent on its own.
HOUSEKEEPING_DELAY = 0.05
# Real seconds a waiting caller sleeps before it looks at the pump role
# again when nothing rang it (a role left vacant without a hand-over).
FOLLOWER_LOOK_S = 0.5


def _worth_a_pass(guest: _Guest, rel: str | None) -> bool:
    """Whether an event under `out` (rel to it) can give the pump work: not
    one about a command no longer active (our own removal of its keys) or a
    chunk already consumed (our own removal). Anything else, and what cannot
    be parsed, counts."""
    if rel is None:
        return True
    cid, _, rest = rel.partition("/")
    handle = guest.active.get(cid)
    if handle is None:
        return False
    stream, _, index = rest.partition("/")
    if stream in STREAMS and index.isascii() and index.isdigit():
        return int(index) >= handle._next[STREAMS.index(stream)]
    return True


def _note_change(guest: _Guest, rel: str | None) -> None:
    if None in guest.changed:
        return                          # everything is re-read anyway
    if rel is None or len(guest.changed) >= CHANGE_SET_LIMIT:
        guest.changed = {None}
    else:
        guest.changed.add(rel)


# Whether everything is to be re-read, the changed paths by command id, and
# the names of the end markers the events announced, by command id.
_Touched = tuple[bool, dict[str, set[str]], dict[str, str]]


def _touched(changed: set[str | None]) -> _Touched:
    """Whether everything is to be re-read, and the changed paths by command
    id (the rest of each path, "" for the command's own key); an end marker
    (`end/<name>`, the final state in its name: PROTOCOL.md) by command id
    apart."""
    touched: dict[str, set[str]] = {}
    ends: dict[str, str] = {}
    for rel in changed:
        if rel is not None:
            cid, _, rest = rel.partition("/")
            touched.setdefault(cid, set()).add(rest)
            if rest.startswith("end/"):
                ends[cid] = rest[4:]
    return None in changed, touched, ends


def _reads_state(everything: bool, what: set[str] | None) -> bool:
    """Whether a command's `state` is read in this pass (unless an end
    marker came: its name is the final state)."""
    return everything or (what is not None and ("" in what or "state" in what))


def _command_keys(guest: _Guest, handle: CommandHandle) -> list[str]:
    """What Dom0 removes once a command is done (PROTOCOL.md)."""
    return [f"{guest.base}/cmd/{handle.id}", f"{guest.base}/out/{handle.id}",
            f"{guest.base}/agent/started/{handle.id}"]


def base_path(domid: int | str) -> str:
    return f"/local/domain/{domid}/selena"


@dataclass
class _Guest:
    name: str
    domid: int
    base: str
    active: dict[str, CommandHandle] = field(default_factory=dict)
    # Paths (relative to base) that watch events reported changed; None in the
    # set means "re-read everything" (a watch fired on a directory).
    changed: set[str | None] = field(default_factory=lambda: {None})
    heartbeat: bytes | None = None
    heartbeat_seen: float = 0.0
    lost: str | None = None
    # Read when a console hint may be wanted: a domain gone has no name left.
    domain_name: str | None = None
    # agent/error may have changed (or was never read): read it next pass.
    error_changed: bool = True


def _lost_result(guest: _Guest, handle: CommandHandle, why: str) -> CommandResult:
    """A running command's end when its guest is lost or restarts: the
    output it had sent so far, and `why`."""
    return CommandResult(
        guest=guest.name, id=handle.id, command=handle.spec.describe(), state="lost",
        reason="lost", detail=why, stdout=bytes(handle._out[0]), stderr=bytes(handle._out[1]),
        submitted=handle.submitted, finished=time.time(), stdout_dropped=handle._dropped[0],
        stderr_dropped=handle._dropped[1])


class Controller(CommandChannel):
    """Runs commands in guests through their agents (the CommandChannel of
    the xl backend).

    lost_after: real seconds without a heartbeat change before a guest is
    declared lost (default max(10, 5 x TDF): the agent beats every guest second).
    output_cap: bytes of each command's stdout, and of its stderr, kept in Dom0.
    owns_xs: close() closes `xs` too (a connection of its own, see connect()).
    console_hint: given a lost guest's domain name, what its console says
    about why (the backend reads the console log), added to the loss's detail.
    clock: time.monotonic, or a clock on its time base: the pump's
    deadlines, read from it, go to the Xenstore client as they are.
    """

    def __init__(self, xs: XenstoreConnection, tdf: float = 1.0,
                 lost_after: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 output_cap: int = DEFAULT_OUTPUT_CAP, owns_xs: bool = False,
                 console_hint: Callable[[str], str | None] | None = None):
        if output_cap < 0:
            raise ValueError(f"output cap {output_cap} is negative")
        self.xs = xs
        self.owns_xs = owns_xs
        # Specs (and kills, so that none overtakes its spec) go out on a
        # connection of their own, whose replies nobody waits for, so they
        # do not wake the thread waiting on `xs` for events (a wake-up and a
        # thread switch per command). A pass reads them without waiting
        # (read_ready) with the liveness check, every second, or once
        # SPEC_REPLIES_MAX wait: a refused spec fails its command within
        # about a second.
        self._specs = XenstoreConnection(xs.path, timeout=xs.timeout)
        self.output_cap = output_cap
        self.console_hint = console_hint
        self.tdf = tdf
        self.lost_after = lost_after if lost_after is not None else max(10.0, 5.0 * tdf)
        self.clock = clock
        self._guests: dict[str, _Guest] = {}
        self._held = False      # guests frozen (Experiment.pause): no loss by heartbeat
        # Command ids: a random prefix per controller and a counter, rather
        # than a uuid4 per command (a getrandom system call each, dear in a
        # PV Dom0 under emulation).
        self._id_prefix = uuid.uuid4().hex[:8]
        self._ids = itertools.count()
        # `with self._lock` where nothing waits or notifies (a C call, where
        # the Condition's __enter__ is Python's: the pump takes it per event).
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._stop = False
        self._pump_error: BaseException | None = None
        # The pump's role (reading the socket, serving every guest) goes to a
        # thread waiting for a result when there is one (leader/follower): the
        # result it waits for then reaches it without a wake-up by another
        # thread, a context switch per command that is dear in a PV Dom0
        # under emulation. The pump thread takes the role only when nobody
        # waits (commands started and not waited for, housekeeping, liveness).
        self._pumping = False               # some thread has the role
        self._callers = 0                   # threads in wait_done()/wait()
        # Handles whose callers wait without the role, in arrival order: the
        # one handed the role when its holder leaves.
        self._followers: dict[str, CommandHandle] = {}
        # A follower handed the role (it has it once it wakes up).
        self._heir: CommandHandle | None = None
        # The role handed to the pump thread (it has it once it wakes up).
        self._pump_heir = False
        self._next_liveness = clock()
        # Passes that served a guest: commands per pass is how much of a
        # pass's fixed cost each command bears (bench-control prints it).
        self.passes_served = 0
        # Handles a pass ended, to ring once it is done (_pass); None outside
        # a pass. Only the thread with the pump's role runs a pass.
        self._rings: list[CommandHandle] | None = None
        self._pump = threading.Thread(target=self._pump_loop, name="selena-control",
                                      daemon=True)
        self._pump.start()

    @classmethod
    def connect(cls, path: str | None = None, timeout: float = 30.0,
                **kw: Any) -> Controller:
        """A controller on a Xenstore connection of its own (closed by
        close()): whatever happens to it, a backend's connection (teardown's)
        is not touched."""
        xs = XenstoreConnection(path, timeout=timeout)
        try:
            return cls(xs, owns_xs=True, **kw)
        except BaseException:
            xs.close()
            raise

    def set_tdf(self, tdf: float) -> None:
        """The guests now run at `tdf`: heartbeats come every guest second,
        so the real-time limit before a guest counts as lost follows."""
        if self.lost_after == max(10.0, 5.0 * self.tdf):
            self.lost_after = max(10.0, 5.0 * tdf)
        self.tdf = tdf

    def hold_heartbeats(self, held: bool) -> None:
        """While the guests are frozen (held) no heartbeat comes and none is
        missed; released, each guest's limit starts again from now."""
        with self._cond:
            self._held = held
            now = self.clock()
            for guest in self._guests.values():
                guest.heartbeat_seen = now

    # -- guests --------------------------------------------------------------------

    def add_guest(self, name: str, domid: int) -> None:
        guest = _Guest(name, domid, base_path(domid), heartbeat_seen=self.clock())
        if self.console_hint is not None:
            try:
                raw = self.xs.read_or_none(f"/local/domain/{domid}/name")
            except XenstoreError:
                raw = None
            guest.domain_name = raw.decode(errors="replace") if raw else None
        with self._cond:
            self._guests[name] = guest

        prefix = f"{guest.base}/out/"

        def mark(path: str, _token: str) -> bool:
            rel = path[len(prefix):] if path.startswith(prefix) else None
            with self._lock:
                # An event that cannot give work does not wake the pump's loop
                # (three of a `true`'s five events are such).
                if not _worth_a_pass(guest, rel):
                    return False
                _note_change(guest, rel)
            return True             # poll() returns: the pump's loop looks

        agent_error = f"{guest.base}/agent/error"

        def agent_changed(path: str, _token: str) -> bool:
            with self._cond:
                if path == agent_error:
                    guest.error_changed = True
            # poll() returns: wait_ready() re-reads the agent's state (it
            # changes when the agent starts, not per command).
            return True

        self.xs.watch(f"{guest.base}/out", f"selena-out-{name}", mark)
        # Two keys of the agent's directory, not all of it: neither its
        # heartbeat (every guest second) nor a command's `started` wakes Dom0.
        self.xs.watch(f"{guest.base}/agent/state", f"selena-agent-state-{name}", agent_changed)
        self.xs.watch(agent_error, f"selena-agent-{name}", agent_changed)

    def drop_guest(self, name: str, why: str, /) -> None:
        """Before its domain goes (a restart): the guest's watches removed,
        its running commands ended lost with `why`, and submits refused with
        it (GuestLost) until add_guest attaches the new domain."""
        guest = self._guest(name)
        for path, token in ((f"{guest.base}/out", f"selena-out-{name}"),
                            (f"{guest.base}/agent/state", f"selena-agent-state-{name}"),
                            (f"{guest.base}/agent/error", f"selena-agent-{name}")):
            try:
                self.xs.unwatch(path, token)
            except XenstoreError as exc:    # its keys may be gone already (a crash)
                log.debug("guest %s: unwatch %s: %s", name, path, exc)
        with self._cond:
            guest.lost = why
            handles = list(guest.active.values())
            guest.active.clear()
        for handle in handles:
            handle.complete(_lost_result(guest, handle, why))

    def wait_ready(self, timeout: float, nodes: Collection[str] | None = None) -> None:
        """Wait until every agent (or those of `nodes`) reports ready with
        our protocol version."""
        deadline = self.clock() + timeout
        pending = set(self._guests if nodes is None else nodes)
        while pending:
            # Counted before reading: an agent that changes its state meanwhile
            # makes poll() return at once. This thread reads the socket
            # itself (the idle pump thread stays off it).
            events = self.xs.watch_events()
            for name in sorted(pending):
                if self._agent_ready(self._guests[name]):
                    pending.discard(name)
            if not pending:
                return
            if self.clock() >= deadline:
                name = sorted(pending)[0]
                raise GuestLost(name, f"its agent was not ready after {timeout:g} s "
                                      f"(also not ready: {', '.join(sorted(pending)[1:]) or '-'})")
            self.xs.poll(0.5, since=events)

    def _agent_ready(self, guest: _Guest) -> bool:
        """Every value here is the guest's: one that is not text, or that makes
        the read fail, refuses that guest by name (no traceback)."""
        try:
            state = self.xs.read_or_none(f"{guest.base}/agent/state")
            if state is None:
                if self.xs.read_or_none(f"{guest.base}/version") is None:
                    raise GuestLost(guest.name, "its domain or control keys are gone")
                return False
            text = guest_text(state, "agent/state", guest.name)
            if text.startswith("failed"):
                raise ProtocolMismatch(f"guest {guest.name}: agent {printable(text)}")
            if text != "ready":
                return False
            version = guest_text(self.xs.read_or_none(f"{guest.base}/agent/version") or b"",
                                 "agent/version", guest.name)
            if version != str(PROTOCOL_VERSION):
                raise ProtocolMismatch(f"guest {guest.name}: agent speaks protocol "
                                       f"'{printable(version, 40)}', selena speaks "
                                       f"{PROTOCOL_VERSION}")
            net = guest_text(self.xs.read_or_none(f"{guest.base}/agent/net") or b"",
                             "agent/net", guest.name)
        except XenstoreError as exc:
            raise GuestLost(guest.name, f"cannot read its agent's keys: {exc}") from None
        if net.startswith("failed"):
            raise GuestSetupError(guest.name, net, *net_failure(net))
        return True

    # -- commands ------------------------------------------------------------------

    def submit(self, guest_name: str, spec: CommandSpec) -> CommandHandle:
        if self._pump_error is not None:
            raise ControlError(f"control channel failed: {self._pump_error}")
        if self._stop:
            raise ControlError("the control channel is closed")
        guest = self._guest(guest_name)
        if guest.lost:
            raise GuestLost(guest_name, guest.lost)
        text = spec.encode()
        handle = CommandHandle(guest_name, f"{self._id_prefix}{next(self._ids):08x}", spec,
                               time.time(), _waiter=self._wait_done)
        with self._cond:
            guest.active[handle.id] = handle

        def refused(error: ControlError | None) -> None:
            # On the pass reading the specs' replies: a refusal fails the
            # command in the next pass, as a refused acknowledgement does.
            with self._lock:
                handle._send_error = error
                _note_change(guest, handle.id)
            self.xs.wake()          # a reply, not an event: poll() would not return
        try:
            # Not waiting for the reply spares the caller a wake-up by the
            # pump per command (a context switch, dear in a PV Dom0), and the
            # reply on its own connection wakes nobody either.
            self._specs.write_nowait(f"{guest.base}/cmd/{handle.id}", text, refused,
                                     errors_only=True)
        except BaseException:
            with self._cond:                # never sent: nothing for the pump to serve
                guest.active.pop(handle.id, None)
            raise
        return handle

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        if handle.done:
            return
        guest = self._guest(handle.guest)
        self._specs.write(f"{guest.base}/cmd/{handle.id}/kill", str(int(signal)))

    def wait(self, handle: CommandHandle, timeout: float | None = None) -> CommandResult:
        """Wait for a command's final state; timeout in real seconds."""
        if not handle.wait_done(timeout):
            raise ControlError(f"command {handle.spec.describe()!r} on {handle.guest} still "
                               f"running after {timeout:g} s")
        if self._pump_error is not None and handle._result is None:
            raise ControlError(f"control channel failed: {self._pump_error}")
        assert handle._result is not None
        return handle._result

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self.xs.wake()
        self._pump.join(timeout=10)
        self._specs.close()
        if self.owns_xs:
            self.xs.close()

    def _guest(self, name: str) -> _Guest:
        try:
            return self._guests[name]
        except KeyError:
            raise ControlError(f"no guest named {name!r} is attached") from None

    # -- pump ----------------------------------------------------------------------

    def _wait_done(self, handle: CommandHandle, timeout: float | None) -> bool:
        """CommandHandle.wait_done() for this channel's commands: the caller
        reads the socket itself (the pump's role) while nobody else does,
        and otherwise sleeps until its command ends or the role is handed
        to it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._callers += 1
        try:
            while True:
                with self._lock:
                    if self._heir is handle:        # handed over: the role is ours
                        self._heir = None
                        lead = True
                    elif handle._done.is_set():
                        return True
                    else:
                        lead = not self._pumping and not self._stop \
                            and self._pump_error is None
                        if lead:
                            self._pumping = True
                    if lead:
                        self._followers.pop(handle.id, None)
                if lead:
                    self._lead(handle, deadline)
                    if not handle._done.is_set() and deadline is not None \
                            and time.monotonic() >= deadline:
                        return False
                    continue
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                with self._lock:
                    self._followers[handle.id] = handle
                    handle._bell.acquire(False)
                    # Cleared before looking again: an end or a hand-over
                    # from now on rings it.
                    if handle._done.is_set() or self._heir is handle or not (
                            self._pumping or self._stop or self._pump_error is not None):
                        continue
                # Bounded: a role left vacant without a hand-over (the pump
                # thread's, say) is looked at again.
                handle._bell.acquire(timeout=FOLLOWER_LOOK_S if left is None
                                     else min(left, FOLLOWER_LOOK_S))
        finally:
            with self._lock:
                self._callers -= 1
                self._followers.pop(handle.id, None)
                heir = self._heir is handle
                if heir:                    # interrupted before taking it up
                    self._heir = None
            if heir:
                self._leave_role(caller=True)

    def _lead(self, handle: CommandHandle, deadline: float | None) -> None:
        """Pump passes on the caller's thread until its command ends or its
        deadline passes; then the role goes to another waiting caller."""
        try:
            while not handle._done.is_set():
                now = self.clock()
                if deadline is not None and now >= deadline:
                    break
                self._pass(now, now + 1.0 if deadline is None else min(deadline, now + 1.0),
                           caller=True)
        except Exception as exc:
            self._pump_failed(exc)
        except BaseException:
            # Ctrl-C or a signal in the caller's thread: the caller's, not the
            # channel's failure. What the pass had taken from the guests is
            # looked at again by the next one.
            with self._lock:
                for guest in self._guests.values():
                    guest.changed, guest.error_changed = {None}, True
            raise
        finally:
            self._leave_role(caller=True)

    def _leave_role(self, caller: bool) -> bool:
        """Give up the pump's role. A caller leaving hands it to the one
        caller still waiting (one wake-up, and that one's own result then
        needs none), or with several waiting to the pump thread (a caller's
        tenure would end with each of its own results, a hand-over each
        time). The pump thread keeps it while any caller waits: its
        completing a command costs the one wake-up a hand-over would, and
        it is not handed back when more callers come. With nobody waiting
        the role is left vacant, the pump thread woken only if commands
        nobody waits for are running (a caller leaving): its own timer does
        the housekeeping, and the next caller the rest. True: the pump
        thread (caller False) keeps the role."""
        with self._lock:
            waiting = [other for other in self._followers.values()
                       if not other._done.is_set()]
            if waiting and not caller:
                return True
            if len(waiting) == 1:
                # Handed over, not left vacant: the thread leaving comes back
                # at once as a rule (its caller's next command), and would
                # take the role again before the one woken runs, which then
                # woke for nothing.
                self._heir = waiting[0]
                waiting[0]._ring()
                return False
            if waiting:
                self._pump_heir = True
                self._cond.notify_all()
                return False
            self._pumping = False
            if caller and (self._stop or any(g.active for g in self._guests.values())):
                self._cond.notify_all()
            return False

    def _pump_loop(self) -> None:
        """The pump thread: serves the guests while no caller waits, or while
        several do."""
        try:
            while True:
                with self._lock:                # the Condition's lock, a C call
                    if self._stop or self._pump_error is not None:
                        break
                    if self._pump_heir:         # handed over: the role is ours
                        self._pump_heir = False
                    elif self._pumping or self._callers > 0:
                        # The role's holder does the housekeeping and
                        # liveness; a caller leaving it with commands still
                        # running wakes this thread (_leave_role). The
                        # timeout only bounds a case that wake-up misses.
                        self._cond.wait(1.0)
                        continue
                    else:
                        self._pumping = True
                    waited = self._callers > 0
                    unattended = waited or any(g.active for g in self._guests.values())
                kept = True
                while kept:
                    try:
                        # With commands to serve it waits for their events;
                        # with none it looks at what came in, the housekeeping
                        # and liveness, and sleeps off the socket, so that a
                        # caller arriving finds the role free.
                        now = self.clock()
                        self._pass(now, now + 1.0 if unattended else now, caller=waited)
                    finally:
                        kept = self._leave_role(caller=False)
                    if kept:                    # several callers wait: on
                        waited = unattended = True
                        if self._stop or self._pump_error is not None:
                            with self._lock:
                                self._pump_heir = True      # the stop path's
                            break
                if kept:
                    continue
                if not unattended:
                    with self._cond:
                        if not self._stop and not self._callers:
                            self._cond.wait(self._idle_timeout())
            if self._pump_error is not None:
                return
            with self._cond:
                while self._pumping and not self._pump_heir:    # a caller's pass
                    self._cond.wait(0.05)
                self._pump_heir = False
                self._pumping = True
            try:
                self._specs.flush()     # the removals still waiting
            except ControlError as exc:
                log.warning("removing finished commands at close: %s", exc)
        except BaseException as exc:  # surfaced to every waiter, not swallowed
            self._pump_failed(exc)

    def _idle_timeout(self) -> float:
        """How long the idle pump thread sleeps: until the next liveness check
        or the deferred removals' time, whichever comes first."""
        now = self.clock()
        timeout = max(0.0, min(1.0, self._next_liveness - now))
        queued = self._specs.queued_since()
        if queued is not None:
            timeout = min(timeout, max(0.0, queued + HOUSEKEEPING_DELAY - now))
        return max(timeout, 0.001)

    def _pump_failed(self, exc: BaseException) -> None:
        log.error("control channel pump failed", exc_info=exc)
        self._pump_error = exc
        for guest in list(self._guests.values()):
            for handle in list(guest.active.values()):
                handle._end()

    def _pass(self, now: float, until: float, caller: bool = False) -> None:
        """One pass of the pump (by whichever thread has its role): serve the
        guests that events marked, or wait until `until` for events. `now`
        is the clock as the caller just read it: one read per pass (in a PV
        Dom0 each read is a system call).
        caller: for callers waiting for their commands (a caller's pass, or
        the pump thread's while several wait), which nothing but the reading
        or a deadline needs to interrupt (close() waits for the receive
        timeout at most): the thread waits in recv() alone
        (poll's wakeable=False), and neither the liveness check nor the
        removals waiting to ride along shorten its wait: both are done by
        the first pass they are due in (a second late at most; the limit
        for liveness is 10 s or more)."""
        # Read before looking for work: an event that comes in between
        # makes poll() return at once rather than after its timeout.
        events = self.xs.watch_events()
        with self._lock:
            work = [(g, g.changed, g.error_changed) for g in self._guests.values()
                    if (g.changed or g.error_changed) and g.active]
            for g, _, _ in work:
                g.changed, g.error_changed = set(), False
        if not work and now < self._next_liveness:
            queued = self._specs.queued_since()
            if queued is not None:
                # Removals of finished commands ride along with the next
                # spec (their connection's; the final state needs no read
                # on this one any more); after a short while idle they go
                # on their own.
                due = queued + HOUSEKEEPING_DELAY
                if due <= now:
                    self._specs.flush()
                    return
                if not caller:
                    until = min(until, due)
            # The pump reads the socket itself while it waits: watch
            # events reach it without a thread hand-off.
            if not caller:
                until = min(until, self._next_liveness)
            self.xs.poll_until(until, since=events, wakeable=not caller)
            return
        # The waiters of the commands this pass ends are woken at its end, as
        # this thread goes back to the socket (and lets go of the interpreter
        # lock), not one by one amid the pass: a waiter woken mid-pass would
        # wait for the lock this thread still holds, a second wake-up and a
        # thread switch per command.
        self.passes_served += 1
        rings: list[CommandHandle] = []
        self._rings = rings
        try:
            serve = [(guest, _touched(changed), error_changed)
                     for guest, changed, error_changed in work]
            states = self._read_states(serve)
            for guest, touched, error_changed in serve:
                if error_changed:
                    self._read_agent_error(guest)
                self._collect(guest, touched, states)
            liveness = now >= self._next_liveness
            if liveness or self._specs.unanswered() >= SPEC_REPLIES_MAX:
                # The specs' replies: a refusal marks its command for the
                # next pass. Not every pass: a system call each.
                self._specs.read_ready()
            if liveness:
                self._next_liveness = now + 1.0
                self._check_alive(list(self._guests.values()))
        finally:
            self._rings = None
            for handle in rings:
                handle._ring()

    def _read_states(self, serve: list[tuple[_Guest, _Touched, bool]]
                     ) -> dict[str, bytes | None | XenstoreError]:
        """The `state` of every command the events say may have ended, of
        every guest in this pass, in one pipelined batch (one round trip
        when several commands end together, not one each); each read's
        error stays its own command's (_collect_one raises it there)."""
        paths = []
        for guest, (everything, touched, ends), _ in serve:
            for handle in guest.active.values():
                if handle._send_error is None and handle.id not in ends \
                        and _reads_state(everything, touched.get(handle.id)):
                    paths.append(f"{guest.base}/out/{handle.id}/state")
                    if everything:      # the end marker's event may be what was lost
                        paths.append(f"{guest.base}/agent/started/{handle.id}")
        return dict(zip(paths, self.xs.read_each(paths), strict=True))

    def _collect(self, guest: _Guest, changes: _Touched,
                 states: dict[str, bytes | None | XenstoreError] | None = None) -> None:
        """Serve the guest's commands that `changes` (_touched) names;
        `states`: their state already read (_read_states), read here where
        missing."""
        everything, touched, ends = changes
        for handle in list(guest.active.values()):
            what = touched.get(handle.id, set())
            if not everything and not what:
                continue
            end_marker = ends.get(handle.id)
            read_state = end_marker is None and _reads_state(everything, what)
            # The last chunk each stream's events announced; None: not known
            # (a directory event, or the change set collapsed).
            last_seen = None if everything or "" in what else _last_chunks(what)
            # A chunk event for a chunk already consumed is our own removal.
            new_chunks = last_seen is None or any(
                last_seen[i] >= handle._next[i] for i in range(len(STREAMS)))
            try:
                if handle._send_error is not None:
                    raise handle._send_error
                self._collect_one(guest, handle, read_state, new_chunks, last_seen,
                                  states, end_marker, look_started=everything)
            except (ProtocolMismatch, ValueError) as exc:
                # What a guest writes into its own keys can fail only its own
                # command, never the pump that serves every guest.
                self._fail(guest, handle, str(exc))
            except XenstoreError as exc:
                if exc.code == "ENOENT" or exc.code == "EACCES":
                    self._lose(guest, f"its control keys vanished ({exc})")
                    return
                # E2BIG, EQUOTA...: Xenstore refused a request about this
                # command's keys (the guest's to fill); the connection is fine.
                self._fail(guest, handle, str(exc), reason="xenstore")

    def _collect_one(self, guest: _Guest, handle: CommandHandle, read_state: bool = True,
                     read_chunks: bool = True,
                     last_seen: tuple[int, int] | None = None,
                     states: dict[str, bytes | None | XenstoreError] | None = None,
                     end_marker: str | None = None, look_started: bool = False) -> None:
        """look_started: the events may have been lost (a collapsed change
        set), so an exited or killed command's final state, which only its
        end marker's event announces, is looked for where the agent keeps
        it too, agent/started/<id> (PROTOCOL.md)."""
        out = f"{guest.base}/out/{handle.id}"
        if end_marker is not None:
            # The final state, from the event's path: no read at all.
            handle._state = parse_end(end_marker)
        elif read_state:
            # `state` holds a failed command's final state (or any, from an
            # agent without end markers); absent, the command is queued or
            # running, or its final state is in started/<id>.
            raw = self._state_value(f"{out}/state", states)
            if raw is None and look_started:
                raw = self._state_value(f"{guest.base}/agent/started/{handle.id}", states)
            if raw is not None:
                handle._state = parse_state(raw.decode(errors="replace"))
        state = handle._state
        final = state is not None and state.final
        if not final and not read_chunks:
            return                              # our own removals
        # Once final, the counts say what is left: no read for a chunk that was
        # never written and no removal of one the final cleanup removes anyway
        # (each is a Xenstore round trip on the command's path to its result).
        batch = CHUNK_BATCH
        if final and state is not None and state.state != "failed":
            last = (state.stdout_chunks - 1, state.stderr_chunks - 1)
        elif last_seen is not None:
            last = last_seen
        else:
            # Not known which chunks exist: probe the next ones expected.
            batch = CHUNK_PROBE
            last = (handle._next[0] + batch - 1, handle._next[1] + batch - 1)
        # Every chunk read in one pipelined batch, and the consumed ones removed
        # in another: a guest flooding output costs the pump a few round trips
        # per pass, not two per chunk, so it delays other guests little.
        first = list(handle._next)
        wanted = [(i, n) for i in range(len(STREAMS))
                  for n in range(first[i], min(last[i], first[i] + batch - 1) + 1)]
        datas = self.xs.read_many([f"{out}/{STREAMS[i]}/{n}" for i, n in wanted])
        consumed = []
        for (i, n), data in zip(wanted, datas, strict=True):
            if data is None or n != handle._next[i]:
                continue                        # each stream stops at its first gap
            self._keep(guest, handle, i, data)
            consumed.append(f"{out}/{STREAMS[i]}/{n}")
            handle._next[i] += 1
        if any(last[i] >= handle._next[i] == first[i] + batch
               for i in range(len(STREAMS))):
            with self._cond:                    # a whole batch read: the rest next pass
                _note_change(guest, None)
        if consumed and not final:
            self.xs.rm_many(consumed)
            self.xs.write(f"{guest.base}/cmd/{handle.id}/ack",
                          f"{handle._next[0]} {handle._next[1]}")
        if state is None or not final:
            return
        if state.state != "failed" and (handle._next[0] < state.stdout_chunks
                                        or handle._next[1] < state.stderr_chunks):
            # Final state is written after every chunk; a missing one was lost.
            raise ProtocolMismatch(f"guest {guest.name}: command {handle.id} ended with "
                                   f"{state.stdout_chunks}/{state.stderr_chunks} chunks, "
                                   f"found {handle._next[0]}/{handle._next[1]}")
        self._finish(guest, handle, state)

    def _state_value(self, path: str,
                     states: dict[str, bytes | None | XenstoreError] | None) -> bytes | None:
        """A state key's value, from the pass's batch (_read_states) or read
        now; a Xenstore refusal is raised, as its command's."""
        raw = states[path] if states and path in states else self.xs.read_or_none(path)
        if isinstance(raw, XenstoreError):
            raise raw
        return raw

    def _keep(self, guest: _Guest, handle: CommandHandle, stream: int, data: bytes) -> None:
        room = max(0, self.output_cap - len(handle._out[stream]))
        if len(data) <= room:
            handle._keep(stream, data)
            return
        if not any(handle._dropped):
            log.warning("guest %s: command %r passed the output cap of %d bytes; the rest "
                        "is dropped", guest.name, handle.spec.describe(), self.output_cap)
        if room:
            handle._keep(stream, data[:room])
        handle._dropped[stream] += len(data) - room

    def _finish(self, guest: _Guest, handle: CommandHandle, state: CommandState) -> None:
        result = CommandResult(
            guest=guest.name, id=handle.id, command=handle.spec.describe(), state=state.state,
            exit_code=state.code, signal=state.signal, reason=state.reason,
            detail=state.detail, start_ns=state.start_ns, end_ns=state.end_ns,
            dur_ns=state.dur_ns, stdout=bytes(handle._out[0]), stderr=bytes(handle._out[1]),
            submitted=handle.submitted, finished=time.time(),
            stdout_dropped=handle._dropped[0], stderr_dropped=handle._dropped[1],
            lost_bytes=state.lost_bytes)
        # The waiter has its result before the keys are removed: removal is
        # housekeeping, not part of the command's round trip, and the pump
        # does not wait for its replies either (they come with later events).
        self._complete(guest, handle, result)

        def removed(error: ControlError | None) -> None:
            # The result stands; only housekeeping failed.
            log.warning("guest %s: removing command %s: %s", guest.name, handle.id, error)
        try:
            self._specs.rm_many_nowait(_command_keys(guest, handle), removed, defer=True,
                                       errors_only=True)
        except XenstoreError as exc:
            log.warning("guest %s: removing command %s: %s", guest.name, handle.id, exc)

    def _read_agent_error(self, guest: _Guest) -> None:
        """agent/error: `lost-state <id> <error>` when the agent could not write
        a command's final state (PROTOCOL.md); that command fails at once
        instead of running into its timeout."""
        try:
            raw = self.xs.read_or_none(f"{guest.base}/agent/error")
        except XenstoreError as exc:
            log.warning("guest %s: reading agent/error: %s", guest.name, exc)
            return
        if raw is None:
            return
        word, _, rest = raw.decode(errors="replace").partition(" ")
        cid, _, code = rest.partition(" ")
        handle = guest.active.get(cid) if word == "lost-state" else None
        if handle is None:
            return                          # an older loss, or nonsense: nothing waits
        self._fail(guest, handle, f"its agent could not write the final state "
                                  f"({printable(code, 40)})", reason="state-lost")

    def _fail(self, guest: _Guest, handle: CommandHandle, why: str,
              reason: str = "protocol") -> None:
        log.warning("guest %s: command %s failed: %s", guest.name, handle.id, printable(why))
        result = CommandResult(
            guest=guest.name, id=handle.id, command=handle.spec.describe(), state="failed",
            reason=reason, detail=why, stdout=bytes(handle._out[0]),
            stderr=bytes(handle._out[1]), submitted=handle.submitted, finished=time.time(),
            stdout_dropped=handle._dropped[0], stderr_dropped=handle._dropped[1])
        for path in _command_keys(guest, handle):
            try:
                self.xs.rm(path)
            except XenstoreError as exc:
                log.warning("guest %s: removing %s: %s", guest.name, path, exc)
        self._complete(guest, handle, result)

    def _complete(self, guest: _Guest, handle: CommandHandle, result: CommandResult) -> None:
        with self._lock:
            guest.active.pop(handle.id, None)
        rings = self._rings
        if rings is None:
            handle.complete(result)
            return
        # Done now, its waiter woken at the end of the pass (_pass).
        handle._settle(result)
        rings.append(handle)

    def _check_alive(self, guests: list[_Guest]) -> None:
        """Every guest's heartbeat in one pipelined batch (and the `version`
        of those without one, in a second): one round trip a second for all
        guests, not one per guest (under the lab's emulation a round trip
        takes 15-35 ms: one each for 50 guests would fill most of the
        second)."""
        guests = [guest for guest in guests if not guest.lost]
        beats = self.xs.read_each([f"{guest.base}/agent/heartbeat" for guest in guests])
        silent = [guest for guest, beat in zip(guests, beats, strict=True) if beat is None]
        versions = dict(zip((guest.name for guest in silent),
                            self.xs.read_each([f"{guest.base}/version" for guest in silent]),
                            strict=True))
        now = self.clock()
        for guest, beat in zip(guests, beats, strict=True):
            exists = True
            if beat is None:
                version = versions[guest.name]
                exists = version is not None
                if isinstance(version, XenstoreError):
                    exists = version.code != "EACCES"
            elif isinstance(beat, XenstoreError):
                exists = beat.code != "EACCES"
                beat = None
            if not exists:
                self._lose(guest, "its domain is gone")
            elif beat != guest.heartbeat:
                guest.heartbeat, guest.heartbeat_seen = beat, now
            elif self._held:        # frozen guests beat no more: not lost
                guest.heartbeat_seen = now
            elif guest.active and now - guest.heartbeat_seen > self.lost_after:
                self._lose(guest, f"no heartbeat for {now - guest.heartbeat_seen:.0f} s "
                                  f"(limit {self.lost_after:g} s)")

    def _lose(self, guest: _Guest, why: str) -> None:
        hint = None
        if self.console_hint is not None and guest.domain_name is not None:
            hint = self.console_hint(guest.domain_name)
        if hint:
            why = f"{why}; its console: {hint}"
        log.warning("guest %s lost: %s", guest.name, printable(why))
        guest.lost = why
        for handle in list(guest.active.values()):
            self._complete(guest, handle, _lost_result(guest, handle, why))
