"""The Dom0 Xenstore client against sockets on the host: pipelined requests
against a server that answers only once it holds them all, and error
handling of a batch against the fake xenstored."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from selena.control.xenstore import (
    HEADER,
    XS_ERROR,
    XS_READ,
    XS_WATCH_EVENT,
    XenstoreConnection,
)
from selena.errors import ControlError, XenstoreError


def _poll_until_done(conn: XenstoreConnection, writer: threading.Thread) -> None:
    """Read until a timer thread's write has its reply. The reply comes after
    the watch event a test waited for: closing first would fail the writer's
    thread (a warning in whichever test runs next)."""
    while writer.is_alive():
        conn.poll(0.05)


def test_read_many_has_every_request_in_flight_at_once(tmp_path):
    """The server replies to nothing until it has all three requests: a client
    waiting for each reply before sending the next would time out."""
    path = str(tmp_path / "xs.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            requests: list[tuple[int, int, bytes]] = []
            buf = b""
            while len(requests) < 3:
                buf += conn.recv(4096)
                while len(buf) >= HEADER.size:
                    kind, req_id, _tx, length = HEADER.unpack(buf[:HEADER.size])
                    if len(buf) < HEADER.size + length:
                        break
                    key = buf[HEADER.size:HEADER.size + length].rstrip(b"\0")
                    requests.append((kind, req_id, key))
                    buf = buf[HEADER.size + length:]
            for _kind, req_id, key in requests:
                if key == b"/missing":
                    reply = (XS_ERROR, b"ENOENT\0")
                else:
                    reply = (XS_READ, b"value of " + key)
                conn.sendall(HEADER.pack(reply[0], req_id, 0, len(reply[1])) + reply[1])
            conn.recv(1)            # until the client closes

    threading.Thread(target=serve, daemon=True).start()
    with XenstoreConnection(path, timeout=2) as xs:
        assert xs.read_many(["/a", "/missing", "/b"]) == [b"value of /a", None,
                                                          b"value of /b"]
    server.close()


def test_a_batch_raises_the_first_real_error_after_every_reply(xenstored):
    xenstored.add_domain(5)
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    guest = XenstoreConnection(xenstored.listen(5), timeout=5)
    try:
        dom0.write("/local/domain/0/secret", "x")
        dom0.write("/local/domain/5/mine", "y")
        with pytest.raises(XenstoreError) as raised:
            guest.read_many(["/local/domain/5/mine", "/local/domain/0/secret",
                             "/local/domain/5/gone"])
        assert raised.value.code == "EACCES" and raised.value.path == "/local/domain/0/secret"
        # Nothing of the failed batch is left waiting: the next request works.
        assert guest.read("/local/domain/5/mine") == b"y"
        dom0.rm_many(["/local/domain/5/mine", "/local/domain/5/never-was"])
        assert dom0.read_or_none("/local/domain/5/mine") is None
    finally:
        guest.close()
        dom0.close()


def test_an_oversize_reply_fails_its_request_not_the_connection(xenstored):
    """oxenstored (and the fake) answer a listing of any size: 300 keys with
    15-digit names is over 4096 bytes. That request fails with E2BIG; the
    connection, its watches and requests from other threads carry on."""
    xenstored.add_domain(5)
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    try:
        base = "/local/domain/5/big"
        for i in range(300):
            dom0.write(f"{base}/{10**14 + i}", "")
        dom0.write("/local/domain/5/small", "ok")
        events: list[str] = []
        dom0.watch("/local/domain/5/small", "tok", lambda path, _tok: events.append(path))
        errors: list[BaseException] = []

        def other_caller() -> None:
            try:
                for _ in range(200):
                    assert dom0.read("/local/domain/5/small") == b"ok"
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=other_caller)
        thread.start()
        for _ in range(5):
            with pytest.raises(XenstoreError) as raised:
                dom0.directory(base)
            assert raised.value.code == "E2BIG" and raised.value.path == base
            assert "over the Xenstore limit of 4096" in str(raised.value)
        thread.join(timeout=20)
        assert not thread.is_alive() and errors == []
        assert dom0.read("/local/domain/5/small") == b"ok"
        dom0.write("/local/domain/5/small", "again")
        deadline = time.monotonic() + 5
        while len(events) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(events) >= 2, events        # registration and the write
    finally:
        dom0.close()


def test_an_oversize_reply_from_a_raw_server_is_drained(tmp_path):
    """A server sends a 5000-byte reply to the first request and an oversize
    watch event, then answers the second request normally: the first fails
    with E2BIG, the event is dropped, the second gets its own reply."""
    path = str(tmp_path / "xs.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            buf = b""
            for answer in (b"x" * 5000, b"small"):
                while len(buf) < HEADER.size or \
                        len(buf) < HEADER.size + HEADER.unpack(buf[:HEADER.size])[3]:
                    buf += conn.recv(4096)
                _kind, req_id, _tx, length = HEADER.unpack(buf[:HEADER.size])
                buf = buf[HEADER.size + length:]
                conn.sendall(HEADER.pack(XS_READ, req_id, 0, len(answer)) + answer)
                if len(answer) > 4096:
                    event = b"p" * 6000 + b"\0tok\0"
                    conn.sendall(HEADER.pack(XS_WATCH_EVENT, 0, 0, len(event)) + event)
            conn.recv(1)            # until the client closes

    threading.Thread(target=serve, daemon=True).start()
    with XenstoreConnection(path, timeout=2) as xs:
        with pytest.raises(XenstoreError) as raised:
            xs.read("/big")
        assert raised.value.code == "E2BIG" and "5000 bytes" in str(raised.value)
        assert xs.read("/after") == b"small"
    server.close()


def _serve_once(path: str, answer) -> socket.socket:
    """A one-connection server calling answer(conn, kind, req_id, payload) for
    each request it reads."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            buf = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                while len(buf) >= HEADER.size:
                    kind, req_id, _tx, length = HEADER.unpack(buf[:HEADER.size])
                    if len(buf) < HEADER.size + length:
                        break
                    answer(conn, kind, req_id, buf[HEADER.size:HEADER.size + length])
                    buf = buf[HEADER.size + length:]

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_watch_events_run_on_the_polling_thread_without_a_reader(xenstored):
    """No reader thread: the thread in poll() reads the socket, so a watch
    event reaches it with no hand-off between threads."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    try:
        seen: list[tuple[str, str]] = []
        dom0.watch("/local/domain/0/w", "tok", lambda p, _t: seen.append(
            (p, threading.current_thread().name)))
        assert not any(t.name == "xenstore-reader" for t in threading.enumerate())
        before = dom0.watch_events()
        dom0.write("/local/domain/0/w/x", "1")
        deadline = time.monotonic() + 5
        while not any(p.endswith("/w/x") for p, _ in seen) and time.monotonic() < deadline:
            dom0.poll(1.0, since=before)
        me = threading.current_thread().name
        assert any(p == "/local/domain/0/w/x" and name == me for p, name in seen)
    finally:
        dom0.close()


def test_poll_returns_on_wake_and_requests_from_other_threads_proceed(xenstored):
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    try:
        dom0.write("/local/domain/0/k", "v")
        results: list[bytes] = []
        errors: list[BaseException] = []

        def reader() -> None:
            try:
                for _ in range(200):
                    results.append(dom0.read("/local/domain/0/k"))
            except BaseException as exc:  # noqa: BLE001 - reported by the assert below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        # This thread polls (leads) meanwhile; replies to the readers go
        # through whichever thread is reading.
        while any(t.is_alive() for t in threads):
            dom0.poll(0.05)
        assert not errors and results == [b"v"] * 800
        waker = threading.Timer(0.2, dom0.wake)
        waker.start()
        begin = time.monotonic()
        dom0.poll(10.0)
        assert time.monotonic() - begin < 5.0
    finally:
        dom0.close()


def test_a_request_from_a_watch_callback_is_refused(xenstored):
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    try:
        failures: list[BaseException] = []

        def callback(_path: str, _token: str) -> None:
            try:
                dom0.read("/local/domain/0")
            except ControlError as exc:
                failures.append(exc)

        before = dom0.watch_events()
        dom0.watch("/local/domain/0/cb", "tok", callback)   # fires once at registration
        dom0.poll(2.0, since=before)
        assert failures and "deadlock" in str(failures[0])
    finally:
        dom0.close()


def test_a_lost_connection_fails_waiters_and_later_requests(tmp_path):
    def answer(conn, kind, req_id, payload):
        conn.shutdown(socket.SHUT_RDWR)     # no reply: the server goes away

    server = _serve_once(str(tmp_path / "xs.sock"), answer)
    with XenstoreConnection(str(tmp_path / "xs.sock"), timeout=5) as xs:
        with pytest.raises(ControlError, match="connection lost|closed"):
            xs.read("/a")
        with pytest.raises(ControlError, match="connection lost"):
            xs.read("/b")
    server.close()


def _replies(xs: XenstoreConnection, count: int, got: list) -> None:
    """Poll until `count` reply callbacks have run (nobody else reads)."""
    deadline = time.monotonic() + 5
    while len(got) < count and time.monotonic() < deadline:
        xs.poll(0.05)
    assert len(got) == count, got


def test_requests_sent_without_waiting_report_to_their_callback(xenstored):
    """write_nowait/rm_many_nowait return once sent; the thread reading the
    socket hands each reply to the callback: None when done, the refusal
    otherwise (a missing node to remove is no refusal), and the connection
    serves the next request."""
    xenstored.add_domain(5)
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    got: list = []
    try:
        xenstored.refuse_write = lambda _who, path: "EQUOTA" if path.endswith("/full") else None
        dom0.write_nowait("/local/domain/5/a", "1", got.append)
        dom0.write_nowait("/local/domain/5/full", "2", got.append)
        _replies(dom0, 2, got)
        assert got[0] is None
        assert isinstance(got[1], XenstoreError) and got[1].code == "EQUOTA"
        assert got[1].path == "/local/domain/5/full" and got[1].op == "write"
        assert dom0.read("/local/domain/5/a") == b"1"
        got.clear()
        dom0.rm_many_nowait(["/local/domain/5/a", "/local/domain/5/never-was"], got.append)
        _replies(dom0, 2, got)
        assert got == [None, None]
        assert dom0.read_or_none("/local/domain/5/a") is None
        with pytest.raises(XenstoreError, match="E2BIG"):
            dom0.write_nowait("/local/domain/5/big", "x" * 5000, got.append)
    finally:
        xenstored.refuse_write = None
        dom0.close()


def test_requests_sent_for_their_errors_only_report_nothing_else(xenstored):
    """errors_only: a request that succeeds (or removes a node already
    gone) costs no callback; a refused one still reports (as does one whose
    connection is lost: the test below)."""
    xenstored.add_domain(5)
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    got: list = []
    try:
        xenstored.refuse_write = lambda _who, path: "EQUOTA" if path.endswith("/full") else None
        dom0.write_nowait("/local/domain/5/a", "1", got.append, errors_only=True)
        dom0.rm_many_nowait(["/local/domain/5/never-was"], got.append, errors_only=True)
        dom0.write_nowait("/local/domain/5/full", "2", got.append, errors_only=True)
        _replies(dom0, 1, got)
        assert len(got) == 1 and isinstance(got[0], XenstoreError) and got[0].code == "EQUOTA"
        assert dom0.unanswered() == 0 and dom0.read("/local/domain/5/a") == b"1"
    finally:
        xenstored.refuse_write = None
        dom0.close()


def test_a_lost_connection_reports_to_the_callbacks_of_unanswered_requests(tmp_path):
    """Also to those that report errors only: a lost connection is one."""
    seen: list[int] = []

    def answer(conn, kind, req_id, payload):
        seen.append(req_id)
        if len(seen) == 2:              # both requests are in
            conn.shutdown(socket.SHUT_RDWR)

    server = _serve_once(str(tmp_path / "xs.sock"), answer)
    got: list = []
    with XenstoreConnection(str(tmp_path / "xs.sock"), timeout=5) as xs:
        xs.write_nowait("/a", "1", got.append)
        xs.write_nowait("/a2", "1", got.append, errors_only=True)
        _replies(xs, 2, got)
        assert all(isinstance(e, ControlError) and "connection lost" in str(e) for e in got)
        with pytest.raises(ControlError, match="connection lost"):
            xs.write_nowait("/b", "2", got.append)
    server.close()


def test_poll_does_not_return_for_an_event_its_callback_says_needs_no_work(xenstored):
    """A watch callback returning False (the control channel's own removals,
    `started` keys) costs the polling thread no return from poll()."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    try:
        seen: list[str] = []

        def callback(path: str, _token: str) -> bool:
            seen.append(path)
            return not path.endswith("/quiet")

        dom0.watch("/local/domain/0/f", "tok", callback)
        dom0.poll(0.5)                                  # the registration's event
        before = dom0.watch_events()
        quiet = threading.Timer(0.1, lambda: dom0.write("/local/domain/0/f/quiet", "1"))
        quiet.start()
        begin = time.monotonic()
        dom0.poll(1.0, since=before)
        quiet.join(5)
        assert time.monotonic() - begin >= 0.9           # the event did not end it
        assert "/local/domain/0/f/quiet" in seen and dom0.watch_events() == before
        loud = threading.Timer(0.1, lambda: dom0.write("/local/domain/0/f/loud", "1"))
        loud.start()
        begin = time.monotonic()
        dom0.poll(5.0, since=before)
        assert time.monotonic() - begin < 4 and dom0.watch_events() == before + 1
        _poll_until_done(dom0, loud)
    finally:
        dom0.close()


def test_deferred_removals_ride_along_with_the_next_request(xenstored):
    """rm_many_nowait(defer=True) sends nothing by itself: the removals go
    in the same send as the next request (ahead of it), or on flush()."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    got: list = []
    try:
        for key in ("a", "b", "c"):
            dom0.write(f"/local/domain/0/{key}", "1")
        with xenstored.lock:
            xenstored.log.clear()
        dom0.rm_many_nowait(["/local/domain/0/a", "/local/domain/0/b"], got.append, defer=True)
        assert dom0.queued_since() is not None
        time.sleep(0.2)
        with xenstored.lock:
            assert xenstored.log == []                  # nothing sent yet
        assert dom0.read("/local/domain/0/c") == b"1"
        assert dom0.queued_since() is None
        with xenstored.lock:
            assert [path for _who, _kind, path in xenstored.log] == [
                "/local/domain/0/a", "/local/domain/0/b", "/local/domain/0/c"]
        _replies(dom0, 2, got)
        assert got == [None, None] and dom0.read_or_none("/local/domain/0/a") is None
        got.clear()
        dom0.rm_many_nowait(["/local/domain/0/c"], got.append, defer=True)
        dom0.flush()
        _replies(dom0, 1, got)
        assert got == [None] and dom0.read_or_none("/local/domain/0/c") is None
    finally:
        dom0.close()


def test_a_request_nobody_answers_fails_at_its_timeout(tmp_path):
    """The thread waiting for a reply blocks in recv() (no select), bounded by
    the socket's receive timeout: the connection's timeout still holds, and
    the connection serves on."""
    answered: list[int] = []

    def answer(conn, kind, req_id, payload):
        if payload.startswith(b"/slow"):
            return                          # never answered
        answered.append(req_id)
        conn.sendall(HEADER.pack(XS_READ, req_id, 0, 2) + b"ok")

    server = _serve_once(str(tmp_path / "xs.sock"), answer)
    with XenstoreConnection(str(tmp_path / "xs.sock"), timeout=0.3) as xs:
        begin = time.monotonic()
        with pytest.raises(ControlError, match="no reply within 0.3 s"):
            xs.read("/slow")
        assert 0.25 <= time.monotonic() - begin < 2.0
        assert xs.read("/fast") == b"ok" and answered
    server.close()


def test_poll_without_wake_ups_keeps_its_deadline_and_still_sees_events(xenstored):
    """poll(wakeable=False), a caller's wait in the control channel: recv()
    alone while the deadline is far, select() for the rest, so a silent
    socket returns at the deadline, not up to a receive timeout later; an
    event still ends it at once."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    try:
        for timeout in (0.1, 0.6):
            begin = time.monotonic()
            dom0.poll(timeout, wakeable=False)
            took = time.monotonic() - begin
            # Late by a receive timeout (5 s) without select(); a loaded
            # machine (make test builds the lab beside) may add some tenths.
            assert timeout - 0.01 <= took < timeout + 1.0, (timeout, took)
        dom0.watch("/local/domain/0/w", "tok", lambda _p, _t: None)
        dom0.poll(0.5)                      # the watch's first firing
        before = dom0.watch_events()
        writer = threading.Timer(0.1, dom0.write, ("/local/domain/0/w/x", "1"))
        writer.start()
        begin = time.monotonic()
        dom0.poll(5.0, since=before, wakeable=False)
        assert time.monotonic() - begin < 1.0 and dom0.watch_events() > before
        _poll_until_done(dom0, writer)
    finally:
        dom0.close()


def test_read_ready_dispatches_what_came_without_waiting(xenstored):
    """read_ready(): the replies already sent are handed to their callbacks,
    and with nothing to read it returns at once (it never blocks)."""
    xenstored.add_domain(5)
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    got: list = []
    try:
        start = time.monotonic()
        dom0.read_ready()
        assert time.monotonic() - start < 1.0     # blocking: the 5 s timeout
        xenstored.refuse_write = lambda _who, path: "EQUOTA" if path.endswith("/full") else None
        dom0.write_nowait("/local/domain/5/a", "1", got.append)
        dom0.write_nowait("/local/domain/5/full", "2", got.append)
        assert dom0.unanswered() == 2
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            dom0.read_ready()
            time.sleep(0.01)
        assert got[0] is None
        assert isinstance(got[1], XenstoreError) and got[1].code == "EQUOTA"
        assert dom0.unanswered() == 0
        start = time.monotonic()
        dom0.read_ready()
        assert time.monotonic() - start < 1.0     # blocking: the 5 s timeout
    finally:
        xenstored.refuse_write = None
        dom0.close()


def test_a_connection_whose_descriptors_are_above_1023_still_waits_for_events(xenstored):
    """A long-lived process (a sweep, many captures) holds many files: the
    wait must not use select(), which refuses descriptors above 1023."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1100:
        pytest.fail(f"this host allows {hard} open files; the test needs 1100")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    fillers = [socket.socket() for _ in range(1030)]
    try:
        dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
        try:
            assert dom0._sock.fileno() > 1023
            dom0.watch("/local/domain/0/w", "tok", lambda _p, _t: None)
            dom0.poll(0.5)                  # the watch's first firing
            before = dom0.watch_events()
            writer = threading.Timer(0.1, dom0.write, ("/local/domain/0/w/x", "1"))
            writer.start()
            dom0.poll(5.0, since=before)
            assert dom0.watch_events() > before
            _poll_until_done(dom0, writer)
        finally:
            dom0.close()
    finally:
        for filler in fillers:
            filler.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
