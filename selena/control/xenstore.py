"""A persistent Xenstore connection speaking the wire protocol itself.

One socket to xenstored for the whole controller. No subprocess per
operation: `xenstore-write` costs a fork and exec each time, and the control
channel sends thousands of small requests.

No reader thread either: whichever thread is waiting for something from the
socket reads it (one at a time, "the leader"), hands replies to the threads
that asked for them and runs watch callbacks itself. The control channel's
pump waits in `poll()`, so a watch event and the pump's own reads reach it
without a thread wake-up in between; in a PV Dom0 under emulation each
wake-up is a context switch that costs more than the Python around it.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from selena.errors import ControlError, XenstoreError

log = logging.getLogger(__name__)

XS_DIRECTORY, XS_READ, XS_GET_PERMS, XS_WATCH, XS_UNWATCH = 1, 2, 3, 4, 5
XS_WRITE, XS_MKDIR, XS_RM, XS_SET_PERMS, XS_WATCH_EVENT, XS_ERROR = 11, 12, 13, 14, 15, 16
HEADER = struct.Struct("<IIII")        # type, req_id, tx_id, len
PAYLOAD_MAX = 4096
XENSTORE_PAYLOAD_MAX = PAYLOAD_MAX
# A reply past PAYLOAD_MAX is read whole and refused to its one request
# (oxenstored sends a directory listing of any size); one past this is taken
# for a broken stream instead, since reading it would take too long.
DRAIN_MAX = 16 * 1024 * 1024
_OVERSIZE = -2                         # _Pending.type: the reply was too large
SOCKET_PATHS = ("/run/xenstored/socket", "/var/run/xenstored/socket")
RECV_SIZE = 65536
# A thread blocked in recv() looks at its deadline this often. poll(wakeable=
# False) blocks in recv() only while its deadline is at least this far, so
# that deadline holds; what is left is waited for in select().
RECV_TIMEOUT_S = 0.25
# _pipeline(tolerate=...): every Xenstore error is returned in its reply's place.
ANY_ERROR = "*"
# Deferred requests (housekeeping nobody waits for) wait for the next send to
# ride along with, at most this many.
QUEUE_MAX = 32

# (path, token); runs on whichever thread is reading the socket, so it must
# not make Xenstore requests of its own that wait for their replies.
# Returning False says the event needs no work: poll() does not return for it.
WatchCallback = Callable[[str, str], "bool | None"]
# The outcome of a request sent without waiting (None: done; else the
# XenstoreError or ControlError); runs where a WatchCallback does.
ReplyCallback = Callable[[ControlError | None], None]


def default_socket() -> str:
    env = os.environ.get("SELENA_XENSTORE_SOCKET")
    if env:
        return env
    for path in SOCKET_PATHS:
        if Path(path).exists():
            return path
    raise ControlError("no xenstored socket (tried " + ", ".join(SOCKET_PATHS)
                       + "); is this Dom0 with xenstored running?")


class _Pending:
    __slots__ = ("done", "type", "payload", "length", "on_reply", "op", "path", "quiet")

    def __init__(self, on_reply: ReplyCallback | None = None, op: str = "",
                 path: str = "", quiet: bool = False) -> None:
        self.done = False
        self.type = 0
        self.payload = b""
        self.length = 0
        # Set for a request nobody waits on (send_nowait): the reader calls it.
        self.on_reply = on_reply
        # on_reply hears of errors only (no call per request that succeeded).
        self.quiet = quiet
        self.op = op
        self.path = path


class XenstoreConnection:
    """Thread-safe; requests may come from any thread except a watch callback."""

    def __init__(self, path: str | None = None, timeout: float = 30.0):
        self.path = path or default_socket()
        self.timeout = timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect(self.path)
        except OSError as exc:
            self._sock.close()
            raise ControlError(f"cannot connect to xenstored at {self.path}: {exc}") from None
        # A leader blocked in recv() for a reply looks at its deadline this
        # often (_read_some).
        every = min(RECV_TIMEOUT_S, max(timeout, 0.01))
        self._recv_every = every
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                              struct.pack("ll", int(every), int(every % 1 * 1e6)))
        # wake() interrupts a leader blocked in select() for poll().
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        # Waited on and notified holding _lock; taken as `with self._lock`, a
        # C call, not the Condition's Python-level __enter__ (hot: several
        # times per message).
        self._io = threading.Condition(self._lock)
        self._leader: threading.Thread | None = None
        self._followers = 0             # threads waiting in _follow()
        self._buffer = bytearray()
        self._pending: dict[int, _Pending] = {}
        self._watches: dict[str, WatchCallback] = {}
        self._watch_events = 0          # dispatched so far: poll() returns on a change
        # Frames of deferred requests (send_nowait(defer=True)), sent with the
        # next request or by flush(); and since when the oldest waits.
        self._queued: list[bytes] = []
        self._queued_since: float | None = None
        self._wakes = 0
        self._in_callback = threading.local()
        self._next_id = 1
        self._closed = False
        self._error: str | None = None

    # -- operations ----------------------------------------------------------------

    def read(self, path: str) -> bytes:
        return self._request(XS_READ, "read", path, _z(path))

    def read_or_none(self, path: str) -> bytes | None:
        try:
            return self.read(path)
        except XenstoreError as exc:
            if exc.code == "ENOENT":
                return None
            raise

    def write(self, path: str, value: bytes | str) -> None:
        data = value.encode() if isinstance(value, str) else value
        self._request(XS_WRITE, "write", path, _z(path) + data)

    def mkdir(self, path: str) -> None:
        self._request(XS_MKDIR, "mkdir", path, _z(path))

    def rm(self, path: str) -> None:
        """Remove a node and its children; a missing node is not an error."""
        try:
            self._request(XS_RM, "rm", path, _z(path))
        except XenstoreError as exc:
            if exc.code != "ENOENT":
                raise

    def directory(self, path: str) -> list[str]:
        reply = self._request(XS_DIRECTORY, "directory", path, _z(path))
        return [p.decode() for p in reply.split(b"\0") if p]

    def set_perms(self, path: str, perms: list[str]) -> None:
        """perms like ["n0", "r5"]: owner 0 with no default access, read for 5."""
        payload = _z(path) + b"".join(_z(p) for p in perms)
        self._request(XS_SET_PERMS, "set-perms", path, payload)

    def get_perms(self, path: str) -> list[str]:
        reply = self._request(XS_GET_PERMS, "get-perms", path, _z(path))
        return [p.decode() for p in reply.split(b"\0") if p]

    def watch(self, path: str, token: str, callback: WatchCallback) -> None:
        """Xenstore fires a watch once at registration, then on every change at
        or below `path` (including removals)."""
        with self._lock:
            self._watches[token] = callback
        try:
            self._request(XS_WATCH, "watch", path, _z(path) + _z(token))
        except BaseException:
            with self._lock:
                self._watches.pop(token, None)
            raise

    def unwatch(self, path: str, token: str) -> None:
        try:
            self._request(XS_UNWATCH, "unwatch", path, _z(path) + _z(token))
        finally:
            with self._lock:
                self._watches.pop(token, None)

    def watch_events(self) -> int:
        """How many watch events were dispatched so far (for poll's `since`)."""
        with self._lock:
            return self._watch_events

    def poll(self, timeout: float, since: int | None = None, wakeable: bool = True) -> None:
        """Read and dispatch what xenstored sends for up to `timeout` seconds.
        Returns once a watch event was dispatched (by this thread or another
        one) after `since` (a watch_events() reading; default: now), after
        wake(), on timeout, or when the connection is lost (the next request
        then raises).

        wakeable=False: the thread waits in a blocking recv() alone (one
        system call per wake-up, not select()'s two) while its deadline is
        RECV_TIMEOUT_S or more away; a wake() from another thread then
        takes effect within that time. One from a reply or watch callback
        on this thread, as a refused write's, takes effect at once."""
        self.poll_until(time.monotonic() + timeout, since, wakeable)

    def poll_until(self, deadline: float, since: int | None = None,
                   wakeable: bool = True) -> None:
        """poll() until `deadline` (time.monotonic()) rather than for a
        timeout: a caller that has just read the clock saves a read (in a
        PV Dom0 each one is a system call)."""
        with self._lock:
            seen = self._watch_events if since is None else since
            wakes = self._wakes
            while self._leader is not None:
                if self._watch_events != seen or self._wakes != wakes or self._error:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._follow(remaining)
            if self._watch_events != seen or self._wakes != wakes or self._error:
                return
            self._leader = threading.current_thread()
        try:
            while self._read_some(deadline, wakeable, select_within=self._recv_every):
                with self._lock:
                    if self._watch_events != seen or self._wakes != wakes:
                        return
        finally:
            self._resign()

    def wake(self) -> None:
        """Make a poll() in another thread return now."""
        with self._lock:
            self._wakes += 1
            self._io.notify_all()
        try:
            self._wake_w.send(b"w")
        except OSError:
            pass    # closed, or its buffer is full: a wake-up is already pending

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._io.notify_all()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.wake()
        # A leader still in select() sees the shutdown and fails every waiter;
        # the sockets are closed once nobody reads them.
        deadline = time.monotonic() + 5
        with self._lock:
            while self._leader is not None and time.monotonic() < deadline:
                self._follow(0.1)
        self._sock.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> XenstoreConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- wire ----------------------------------------------------------------------

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        """Read several keys with all requests in flight at once (one round
        trip's wait rather than one per key); a missing key reads as None."""
        if not paths:
            return []
        replies = self._pipeline([(XS_READ, "read", path, _z(path)) for path in paths],
                                 tolerate="ENOENT")
        return [None if isinstance(reply, XenstoreError) else reply for reply in replies]

    def read_each(self, paths: Sequence[str]) -> list[bytes | None | XenstoreError]:
        """read_many() where each key's error is its own: returned in its
        place (a missing key reads as None), not raised for the batch."""
        if not paths:
            return []
        replies = self._pipeline([(XS_READ, "read", path, _z(path)) for path in paths],
                                 tolerate=ANY_ERROR)
        return [None if isinstance(reply, XenstoreError) and reply.code == "ENOENT" else reply
                for reply in replies]

    def write_nowait(self, path: str, value: bytes | str, on_reply: ReplyCallback,
                     errors_only: bool = False) -> None:
        """write() without waiting for the reply: the thread that reads it
        calls `on_reply` (None, or the error; errors_only: the error alone).
        The caller is spared a wake-up by the reading thread per request, the
        dearest part of a request from a thread other than the pump's.
        Raises at once only what is known before sending (the connection
        lost, a payload over the limit)."""
        data = value.encode() if isinstance(value, str) else value
        self._send_nowait([(XS_WRITE, "write", path, _z(path) + data)], on_reply,
                          errors_only=errors_only)

    def rm_many_nowait(self, paths: Sequence[str], on_reply: ReplyCallback,
                       defer: bool = False, errors_only: bool = False) -> None:
        """rm_many() without waiting: `on_reply` once per path (a missing
        node is no error), as in write_nowait(). defer: not sent on its own
        but with the next request (any thread's) or by flush(), one system
        call fewer; see queued_since()."""
        def tolerant(error: ControlError | None) -> None:
            if isinstance(error, XenstoreError) and error.code == "ENOENT":
                if errors_only:
                    return
                error = None
            on_reply(error)
        self._send_nowait([(XS_RM, "rm", path, _z(path)) for path in paths], tolerant, defer,
                          errors_only)

    def queued_since(self) -> float | None:
        """time.monotonic() when the oldest deferred request was queued; None
        when none waits."""
        with self._lock:
            return self._queued_since

    def flush(self) -> None:
        """Send the deferred requests now."""
        with self._lock:
            frames = self._take_queued()
        if frames:
            try:
                with self._send_lock:
                    self._sock.sendall(b"".join(frames))
            except OSError as exc:
                raise ControlError(f"xenstore: sending deferred requests: {exc}") from None

    def _check_sendable(self, requests: Sequence[tuple[int, str, str, bytes]]) -> None:
        """Refuse, before anything is sent, what could never be answered."""
        if getattr(self._in_callback, "active", False):
            raise ControlError("a Xenstore request from a watch callback would deadlock")
        _check_sizes(requests)

    def _register(self, xs_type: int, payload: bytes, pending: _Pending) -> tuple[int, bytes]:
        """A new request id for `pending` and the request's frame (holding _lock)."""
        req_id = self._next_id
        self._next_id = (self._next_id % 0xFFFFFFF0) + 1
        self._pending[req_id] = pending
        return req_id, HEADER.pack(xs_type, req_id, 0, len(payload)) + payload

    def _take_queued(self) -> list[bytes]:
        # Holding _lock.
        frames, self._queued, self._queued_since = self._queued, [], None
        return frames

    def _send_nowait(self, requests: Sequence[tuple[int, str, str, bytes]],
                     on_reply: ReplyCallback, defer: bool = False,
                     errors_only: bool = False) -> None:
        """Every request in one send; their replies go to `on_reply` (its
        errors alone: errors_only). Allowed from a callback: nothing waits."""
        _check_sizes(requests)
        frames, ids = [], []
        with self._lock:
            if self._error:
                raise ControlError(f"xenstore connection lost: {self._error}")
            for xs_type, op, path, payload in requests:
                req_id, frame = self._register(xs_type, payload,
                                               _Pending(on_reply, op, path, errors_only))
                ids.append(req_id)
                frames.append(frame)
            if defer and len(self._queued) + len(frames) <= QUEUE_MAX:
                self._queued += frames
                if self._queued_since is None:
                    self._queued_since = time.monotonic()
                return
            frames = self._take_queued() + frames
        try:
            with self._send_lock:
                self._sock.sendall(b"".join(frames))
        except OSError as exc:
            with self._lock:
                for req_id in ids:
                    self._pending.pop(req_id, None)
            raise ControlError(f"xenstore {requests[0][1]} {requests[0][2]}: {exc}") from None

    def rm_many(self, paths: Sequence[str]) -> None:
        """rm() of several nodes, all requests in flight at once."""
        if not paths:
            return
        self._pipeline([(XS_RM, "rm", path, _z(path)) for path in paths], tolerate="ENOENT")

    def _request(self, xs_type: int, op: str, path: str, payload: bytes) -> bytes:
        reply = self._pipeline([(xs_type, op, path, payload)])[0]
        assert isinstance(reply, bytes)
        return reply

    def _pipeline(self, requests: Sequence[tuple[int, str, str, bytes]],
                  tolerate: str | None = None) -> list[bytes | XenstoreError]:
        """Send every request, then wait for every reply. xenstored answers a
        connection's requests in order; an error with code `tolerate` (any
        error: ANY_ERROR) is returned in its place, any other is raised once
        all replies are in (so no reply is left to arrive for a request
        nobody waits on)."""
        self._check_sendable(requests)
        sent: list[tuple[int, _Pending, str, str]] = []
        with self._lock:
            if self._error:
                raise ControlError(f"xenstore connection lost: {self._error}")
            frames = self._take_queued()        # deferred requests ride along
            for xs_type, op, path, payload in requests:
                pending = _Pending()
                req_id, frame = self._register(xs_type, payload, pending)
                sent.append((req_id, pending, op, path))
                frames.append(frame)
        try:
            try:
                with self._send_lock:
                    self._sock.sendall(b"".join(frames))
            except OSError as exc:
                raise ControlError(f"xenstore {sent[0][2]} {sent[0][3]}: {exc}") from None
            deadline = time.monotonic() + self.timeout
            for _req_id, pending, op, path in sent:
                self._wait(pending, deadline, op, path)
            replies: list[bytes | XenstoreError] = []
            failure: Exception | None = None
            for _req_id, pending, op, path in sent:
                reply = self._reply(pending, op, path)
                if isinstance(reply, XenstoreError) and tolerate not in (reply.code, ANY_ERROR) \
                        and failure is None:
                    failure = reply
                replies.append(reply)
            if failure is not None:
                raise failure
            return replies
        finally:
            with self._lock:
                for req_id, *_ in sent:
                    self._pending.pop(req_id, None)

    def _reply(self, pending: _Pending, op: str, path: str) -> bytes | XenstoreError:
        """A request's answer: its payload, or the error xenstored (or the
        size limit) gave; a lost connection is raised."""
        if pending.type == -1:
            raise ControlError(f"xenstore {op} {path}: connection lost: {self._error}")
        if pending.type == _OVERSIZE:
            return XenstoreError("E2BIG", op, path,
                                 f"reply of {pending.length} bytes is over the Xenstore "
                                 f"limit of {PAYLOAD_MAX}; refused")
        if pending.type == XS_ERROR:
            return XenstoreError(pending.payload.rstrip(b"\0").decode(errors="replace"),
                                 op, path)
        return pending.payload

    def _wait(self, pending: _Pending, deadline: float, op: str, path: str) -> None:
        """Until `pending` has its reply: as a follower while another thread
        reads the socket, as the leader otherwise."""
        # Known without reading the clock again: the deadline was set just
        # before, and _read_some() returns False at it (or on a lost
        # connection, which is looked at first).
        timed_out = False
        while True:
            with self._lock:
                while not pending.done and self._leader is not None and not self._error:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        timed_out = True
                        break
                    self._follow(remaining)
                if pending.done:
                    return
                if self._error:
                    raise ControlError(f"xenstore {op} {path}: connection lost: {self._error}")
                if self._leader is not None or timed_out:
                    raise ControlError(f"xenstore {op} {path}: no reply within "
                                       f"{self.timeout:g} s")
                self._leader = threading.current_thread()
            try:
                while not pending.done:
                    if not self._read_some(deadline, wakeable=False):
                        timed_out = True
                        break
            finally:
                self._resign()

    def _follow(self, timeout: float) -> None:
        """Wait, holding _io, for the leader to hand something over."""
        self._followers += 1
        try:
            self._io.wait(timeout)
        finally:
            self._followers -= 1

    def _wake_followers(self) -> None:
        # Holding _io. Usually nobody follows (the pump reads its own
        # replies), and a notify costs Python calls even then.
        if self._followers:
            self._io.notify_all()

    def _resign(self) -> None:
        with self._lock:
            self._leader = None
            self._wake_followers()

    def _read_some(self, deadline: float, wakeable: bool, select_within: float = 0.0) -> bool:
        """As the leader: wait for bytes until `deadline`, then dispatch every
        whole message they complete. False on timeout, a wake-up (wakeable)
        or a lost connection. select_within: wait as if wakeable when the
        deadline is closer than that (the blocking receive would overrun
        it by up to its timeout)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        try:
            if wakeable or remaining < select_within:
                # poll, not select: select() refuses descriptors above 1023,
                # which a long-lived process with many files reaches.
                poller = select.poll()
                poller.register(self._sock, select.POLLIN)
                poller.register(self._wake_r, select.POLLIN)
                ready = {fd for fd, _ in poller.poll(max(0, int(remaining * 1000) + 1))}
                if self._wake_r.fileno() in ready:
                    self._drain_wakes()
                    return False
                if self._sock.fileno() not in ready:
                    return False
                data = self._sock.recv(RECV_SIZE)
            else:
                # Waiting for a reply: no wake-up to watch for, so a blocking
                # recv alone (one system call, not select's two), which the
                # socket's receive timeout bounds to check the deadline.
                try:
                    data = self._sock.recv(RECV_SIZE)
                except (BlockingIOError, TimeoutError):
                    return time.monotonic() < deadline
            if not data:
                raise ConnectionError("xenstored closed the connection")
        except (OSError, ValueError, ConnectionError) as exc:
            self._lost(exc)
            return False
        self._buffer += data
        try:
            self._dispatch_buffered()
        except ConnectionError as exc:
            self._lost(exc)
            return False
        return True

    def read_ready(self) -> None:
        """Dispatch, without waiting, whatever xenstored has sent: for a
        connection nobody waits on (requests sent with write_nowait, their
        replies read now and then by a thread with other work). Returns at
        once if another thread reads the socket."""
        with self._lock:
            if self._leader is not None or self._error:
                return
            self._leader = threading.current_thread()
        try:
            while True:
                try:
                    data = self._sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
                    if not data:
                        raise ConnectionError("xenstored closed the connection")
                except (BlockingIOError, InterruptedError):
                    return
                except (OSError, ValueError, ConnectionError) as exc:
                    self._lost(exc)
                    return
                self._buffer += data
                try:
                    self._dispatch_buffered()
                except ConnectionError as exc:
                    self._lost(exc)
                    return
                if len(data) < RECV_SIZE:
                    return                  # all there was
        finally:
            self._resign()

    def unanswered(self) -> int:
        """Requests sent whose replies have not been read yet."""
        return len(self._pending)

    def _drain_wakes(self) -> None:
        try:
            while self._wake_r.recv(256):
                pass
        except (BlockingIOError, OSError):
            pass

    def _dispatch_buffered(self) -> None:
        buf = self._buffer
        size, unpack = HEADER.size, HEADER.unpack_from     # per message: kept local
        while len(buf) >= size:
            xs_type, req_id, _tx, length = unpack(buf)
            if length > DRAIN_MAX:
                raise ConnectionError(f"reply of {length} bytes: the stream is broken")
            end = size + length
            if len(buf) < end:
                return
            oversize = length > PAYLOAD_MAX
            payload = b"" if oversize else bytes(buf[size:end])
            del buf[:end]
            if oversize:
                # What a guest wrote can make xenstored answer past the limit
                # (a listing of its directory): that fails one request, read
                # whole so the stream stays in step, not the connection.
                log.warning("xenstore reply of %d bytes to request %d refused (limit %d)",
                            length, req_id, PAYLOAD_MAX)
                if xs_type == XS_WATCH_EVENT:
                    continue
            elif xs_type == XS_WATCH_EVENT:
                self._dispatch_watch(payload)
                continue
            with self._lock:
                pending = self._pending.get(req_id)
                if pending is None:
                    log.warning("xenstore reply to unknown request %d dropped", req_id)
                    continue
                if pending.on_reply is None:
                    if oversize:
                        pending.type, pending.length = _OVERSIZE, length
                    else:
                        pending.type, pending.payload = xs_type, payload
                    pending.done = True
                    if self._followers:         # _wake_followers(), inline: hot
                        self._io.notify_all()
                    continue
                del self._pending[req_id]       # nobody waits: the callback is all
            if pending.quiet and xs_type != XS_ERROR and not oversize:
                continue                        # a success nobody hears of
            if oversize:
                error: ControlError | None = XenstoreError(
                    "E2BIG", pending.op, pending.path,
                    f"reply of {length} bytes is over the Xenstore limit of {PAYLOAD_MAX}")
            elif xs_type == XS_ERROR:
                error = XenstoreError(payload.rstrip(b"\0").decode(errors="replace"),
                                      pending.op, pending.path)
            else:
                error = None
            self._reply_callback(pending, error)

    def _lost(self, exc: BaseException) -> None:
        with self._lock:
            self._error = "closed" if self._closed else str(exc)
            unanswered = [p for p in self._pending.values() if p.on_reply is not None]
            for req_id in [r for r, p in self._pending.items() if p.on_reply is not None]:
                del self._pending[req_id]
            for pending in self._pending.values():
                pending.type, pending.done = -1, True
            self._io.notify_all()
        for pending in unanswered:
            self._reply_callback(pending, ControlError(
                f"xenstore {pending.op} {pending.path}: connection lost: {self._error}"))

    def _reply_callback(self, pending: _Pending, error: ControlError | None) -> None:
        assert pending.on_reply is not None
        self._in_callback.active = True
        try:
            pending.on_reply(error)
        except Exception:  # a broken callback must not stop the reading
            log.exception("reply callback for %s %s failed", pending.op, pending.path)
        finally:
            self._in_callback.active = False

    def _dispatch_watch(self, payload: bytes) -> None:
        parts = payload.split(b"\0")
        if len(parts) < 2:
            log.warning("malformed watch event %r dropped", payload[:80])
            self._count_watch_event()
            return
        path, token = parts[0].decode(errors="replace"), parts[1].decode(errors="replace")
        with self._lock:
            callback = self._watches.get(token)
        if callback is None:
            self._count_watch_event()
            return
        self._in_callback.active = True
        try:
            needs_work = callback(path, token) is not False
        except Exception:  # a broken callback must not stop the reading
            log.exception("watch callback for %s failed", token)
            needs_work = True
        finally:
            self._in_callback.active = False
        # Counted after the callback: a poll() that returns for this event
        # finds what the callback recorded.
        if needs_work:
            self._count_watch_event()

    def _count_watch_event(self) -> None:
        with self._lock:
            self._watch_events += 1
            self._wake_followers()


def _check_sizes(requests: Sequence[tuple[int, str, str, bytes]]) -> None:
    for _type, op, path, payload in requests:
        if len(payload) > PAYLOAD_MAX:
            raise XenstoreError("E2BIG", op, path)


def _z(text: str) -> bytes:
    return text.encode() + b"\0"
