"""The Dom0 Xenstore client against sockets on the host: pipelined requests
against a server that answers only once it holds them all, and error
handling of a batch against the fake xenstored."""

from __future__ import annotations

import socket
import threading

import pytest

from selena.control.xenstore import HEADER, XS_ERROR, XS_READ, XenstoreConnection
from selena.errors import XenstoreError


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
            requests = []
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
