"""A persistent Xenstore connection speaking the wire protocol itself.

One socket to xenstored for the whole controller, a reader thread that
matches replies to requests by id and hands watch events to callbacks. No
subprocess per operation: `xenstore-write` costs a fork and exec each time,
and the control channel sends thousands of small requests.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from selena.errors import ControlError, XenstoreError

log = logging.getLogger(__name__)

XS_DIRECTORY, XS_READ, XS_GET_PERMS, XS_WATCH, XS_UNWATCH = 1, 2, 3, 4, 5
XS_WRITE, XS_MKDIR, XS_RM, XS_SET_PERMS, XS_WATCH_EVENT, XS_ERROR = 11, 12, 13, 14, 15, 16
HEADER = struct.Struct("<IIII")        # type, req_id, tx_id, len
PAYLOAD_MAX = 4096
XENSTORE_PAYLOAD_MAX = PAYLOAD_MAX
# A reply past PAYLOAD_MAX is drained and refused to its one request (oxenstored
# sends a directory listing of any size); one past this is taken for a broken
# stream instead, since draining it would take too long.
DRAIN_MAX = 16 * 1024 * 1024
_OVERSIZE = -2                         # _Pending.type: the reply was too large
SOCKET_PATHS = ("/run/xenstored/socket", "/var/run/xenstored/socket")

WatchCallback = Callable[[str, str], None]   # (path, token); runs on the reader thread


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
    __slots__ = ("done", "type", "payload", "length")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.type = 0
        self.payload = b""
        self.length = 0


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
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._watches: dict[str, WatchCallback] = {}
        self._next_id = 1
        self._closed = False
        self._error: str | None = None
        self._reader = threading.Thread(target=self._read_loop, name="xenstore-reader",
                                        daemon=True)
        self._reader.start()

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

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._reader.join(timeout=5)

    def __enter__(self) -> XenstoreConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- wire ----------------------------------------------------------------------

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        """Read several keys with all requests in flight at once (one round
        trip's wait rather than one per key); a missing key reads as None."""
        replies = self._pipeline([(XS_READ, "read", path, _z(path)) for path in paths],
                                 tolerate="ENOENT")
        return [None if isinstance(reply, XenstoreError) else reply for reply in replies]

    def rm_many(self, paths: Sequence[str]) -> None:
        """rm() of several nodes, all requests in flight at once."""
        self._pipeline([(XS_RM, "rm", path, _z(path)) for path in paths], tolerate="ENOENT")

    def _request(self, xs_type: int, op: str, path: str, payload: bytes) -> bytes:
        reply = self._pipeline([(xs_type, op, path, payload)])[0]
        assert isinstance(reply, bytes)
        return reply

    def _pipeline(self, requests: Sequence[tuple[int, str, str, bytes]],
                  tolerate: str | None = None) -> list[bytes | XenstoreError]:
        """Send every request, then wait for every reply. xenstored answers a
        connection's requests in order; an error with code `tolerate` is
        returned in its place, any other is raised once all replies are in
        (so no reply is left to arrive for a request nobody waits on)."""
        if threading.current_thread() is self._reader:
            raise ControlError("a Xenstore request from a watch callback would deadlock")
        for _type, op, path, payload in requests:
            if len(payload) > PAYLOAD_MAX:
                raise XenstoreError("E2BIG", op, path)
        sent: list[tuple[int, _Pending, str, str]] = []
        try:
            for xs_type, op, path, payload in requests:
                pending = _Pending()
                with self._lock:
                    if self._error:
                        raise ControlError(f"xenstore connection lost: {self._error}")
                    req_id = self._next_id
                    self._next_id = (self._next_id % 0xFFFFFFF0) + 1
                    self._pending[req_id] = pending
                sent.append((req_id, pending, op, path))
                try:
                    with self._send_lock:
                        self._sock.sendall(HEADER.pack(xs_type, req_id, 0, len(payload))
                                           + payload)
                except OSError as exc:
                    raise ControlError(f"xenstore {op} {path}: {exc}") from None
            replies: list[bytes | XenstoreError] = []
            failure: Exception | None = None
            for _req_id, pending, op, path in sent:
                if not pending.done.wait(self.timeout):
                    raise ControlError(f"xenstore {op} {path}: no reply within "
                                       f"{self.timeout:g} s")
                if pending.type == -1:
                    raise ControlError(f"xenstore {op} {path}: connection lost: {self._error}")
                if pending.type == _OVERSIZE:
                    error = XenstoreError(
                        "E2BIG", op, path,
                        f"reply of {pending.length} bytes is over the Xenstore limit of "
                        f"{PAYLOAD_MAX}; refused")
                    if error.code != tolerate and failure is None:
                        failure = error
                    replies.append(error)
                elif pending.type == XS_ERROR:
                    error = XenstoreError(pending.payload.rstrip(b"\0").decode(errors="replace"),
                                          op, path)
                    if error.code != tolerate and failure is None:
                        failure = error
                    replies.append(error)
                else:
                    replies.append(pending.payload)
            if failure is not None:
                raise failure
            return replies
        finally:
            with self._lock:
                for req_id, *_ in sent:
                    self._pending.pop(req_id, None)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("xenstored closed the connection")
            buf += chunk
        return bytes(buf)

    def _drain(self, n: int) -> None:
        while n > 0:
            chunk = self._sock.recv(min(n, 65536))
            if not chunk:
                raise ConnectionError("xenstored closed the connection")
            n -= len(chunk)

    def _read_loop(self) -> None:
        try:
            while True:
                xs_type, req_id, _tx, length = HEADER.unpack(self._recv_exact(HEADER.size))
                if length > DRAIN_MAX:
                    raise ConnectionError(f"reply of {length} bytes: the stream is broken")
                if length > PAYLOAD_MAX:
                    # What a guest wrote can make xenstored answer past the limit
                    # (a listing of its directory): that fails one request, not
                    # the connection every guest's control shares.
                    self._drain(length)
                    log.warning("xenstore reply of %d bytes to request %d refused "
                                "(limit %d)", length, req_id, PAYLOAD_MAX)
                    if xs_type == XS_WATCH_EVENT:
                        continue
                    with self._lock:
                        pending = self._pending.get(req_id)
                    if pending is not None:
                        pending.type, pending.length = _OVERSIZE, length
                        pending.done.set()
                    continue
                payload = self._recv_exact(length) if length else b""
                if xs_type == XS_WATCH_EVENT:
                    self._dispatch_watch(payload)
                    continue
                with self._lock:
                    pending = self._pending.get(req_id)
                if pending is None:
                    log.warning("xenstore reply to unknown request %d dropped", req_id)
                    continue
                pending.type, pending.payload = xs_type, payload
                pending.done.set()
        except (OSError, ConnectionError, struct.error) as exc:
            with self._lock:
                self._error = str(exc) if not self._closed else "closed"
                waiting = list(self._pending.values())
            for pending in waiting:
                pending.type = -1
                pending.done.set()

    def _dispatch_watch(self, payload: bytes) -> None:
        parts = payload.split(b"\0")
        if len(parts) < 2:
            log.warning("malformed watch event %r dropped", payload[:80])
            return
        path, token = parts[0].decode(errors="replace"), parts[1].decode(errors="replace")
        with self._lock:
            callback = self._watches.get(token)
        if callback is None:
            return
        try:
            callback(path, token)
        except Exception:  # a broken callback must not kill the reader
            log.exception("watch callback for %s failed", token)


def _z(text: str) -> bytes:
    return text.encode() + b"\0"
