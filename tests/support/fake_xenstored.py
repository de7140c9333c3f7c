"""A small in-process xenstored for host-side tests of the agent and the
controller: the wire protocol, per-connection domain ids, relative paths,
permissions (owner / default / per-domain, inheritance) and watches.

It is a test double only; the lab tests run against Debian's real oxenstored.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

HEADER = struct.Struct("<IIII")
XS_DIRECTORY, XS_READ, XS_GET_PERMS, XS_WATCH, XS_UNWATCH = 1, 2, 3, 4, 5
XS_WRITE, XS_MKDIR, XS_RM, XS_SET_PERMS, XS_WATCH_EVENT, XS_ERROR = 11, 12, 13, 14, 15, 16
# oxenstored's quota-maxsize: checked for Dom0's writes too (Quota.check with
# id -1 in store.ml's write), as a 2.2 KB command spec met in the lab.
MAX_VALUE = 2048


def _err(code: str) -> tuple[int, bytes]:
    return XS_ERROR, code.encode() + b"\0"


@dataclass
class Node:
    value: bytes = b""
    perms: list[str] = field(default_factory=lambda: ["n0"])
    children: dict[str, Node] = field(default_factory=dict)


class FakeXenstored:
    def __init__(self, directory: str):
        self.dir = directory
        self.root = Node()
        self.lock = threading.RLock()
        self.watches: list[tuple[Conn, str, str, bool]] = []   # conn, abs path, token, relative
        self.servers: list[socket.socket] = []
        self.conns: list[Conn] = []         # closed with the store: each holds a socket
        self.requests = 0
        # Every request in order: (domid, wire type, absolute path).
        self.log: list[tuple[int, int, str]] = []
        # Fault injection: (domid, path) -> an errno word to refuse that write
        # with (e.g. "EQUOTA", as oxenstored answers past a domain's quota).
        self.refuse_write: Callable[[int, str], str | None] | None = None

    # -- tree ----------------------------------------------------------------------

    def find(self, path: str) -> Node | None:
        node: Node | None = self.root
        for part in [p for p in path.split("/") if p]:
            node = node.children.get(part) if node is not None else None
        return node

    def can(self, domid: int, node: Node, want: str) -> bool:
        if domid == 0:
            return True
        owner = int(node.perms[0][1:])
        if owner == domid:
            return True
        for perm in node.perms[1:]:
            if int(perm[1:]) == domid:
                return perm[0] in (want, "b")
        return node.perms[0][0] in (want, "b")

    def create(self, domid: int, path: str) -> Node | str:
        parts = [p for p in path.split("/") if p]
        node = self.root
        for part in parts:
            child = node.children.get(part)
            if child is None:
                if not self.can(domid, node, "w"):
                    return "EACCES"
                perms = list(node.perms)
                if domid != 0:
                    perms[0] = perms[0][0] + str(domid)
                child = Node(perms=perms)
                node.children[part] = child
            node = child
        return node

    def fire(self, path: str) -> None:
        for conn, wpath, token, relative in list(self.watches):
            if path == wpath or path.startswith(wpath.rstrip("/") + "/") \
                    or wpath.startswith(path.rstrip("/") + "/"):
                shown = path
                if relative and path.startswith(conn.home + "/"):
                    shown = path[len(conn.home) + 1:]
                conn.event(shown, token)

    # -- serving -------------------------------------------------------------------

    def listen(self, domid: int) -> str:
        path = os.path.join(self.dir, f"xs-dom{domid}.sock")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(8)
        self.servers.append(server)

        def accept() -> None:
            while True:
                try:
                    sock, _ = server.accept()
                except OSError:
                    return
                conn = Conn(self, sock, domid)
                with self.lock:
                    self.conns.append(conn)
                conn.start()

        threading.Thread(target=accept, daemon=True).start()
        return path

    def close(self) -> None:
        # shutdown() wakes the accept() blocked in its thread (close() alone
        # does not on Linux: the thread and the store it holds would outlive
        # the test); the connections' sockets go with it, or a session of a
        # thousand tests runs out of descriptors select() can take.
        for server in self.servers:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()
        with self.lock:
            conns, self.conns, self.watches = self.conns, [], []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
            conn.sock.close()

    def add_domain(self, domid: int, name: str | None = None) -> None:
        """What libxl does: /local/domain/<id> owned by Dom0, readable by the
        guest, with the domain's id and name."""
        with self.lock:
            node = self.create(0, f"/local/domain/{domid}")
            assert isinstance(node, Node)
            node.perms = ["n0", f"r{domid}"]
            for key, value in (("domid", str(domid)), ("name", name)):
                if value is not None:
                    child = self.create(0, f"/local/domain/{domid}/{key}")
                    assert isinstance(child, Node)
                    child.value = value.encode()

    def remove_domain(self, domid: int) -> None:
        with self.lock:
            domains = self.find("/local/domain")
            if domains is not None:
                domains.children.pop(str(domid), None)
            self.fire(f"/local/domain/{domid}")


class Conn(threading.Thread):
    def __init__(self, xs: FakeXenstored, sock: socket.socket, domid: int):
        super().__init__(daemon=True)
        self.xs, self.sock, self.domid = xs, sock, domid
        self.home = f"/local/domain/{domid}"
        self.send_lock = threading.Lock()

    def send(self, xs_type: int, req_id: int, payload: bytes) -> None:
        with self.send_lock:
            try:
                self.sock.sendall(HEADER.pack(xs_type, req_id, 0, len(payload)) + payload)
            except OSError:
                pass

    def event(self, path: str, token: str) -> None:
        self.send(XS_WATCH_EVENT, 0, path.encode() + b"\0" + token.encode() + b"\0")

    def recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf

    def run(self) -> None:
        try:
            while True:
                xs_type, req_id, _tx, length = HEADER.unpack(self.recv(16))
                payload = self.recv(length) if length else b""
                with self.xs.lock:
                    self.xs.requests += 1
                    self.xs.log.append((self.domid, xs_type,
                                        self.absolute(payload.split(b"\0")[0].decode(
                                            errors="replace"))))
                    reply_type, reply = self.handle(xs_type, payload)
                self.send(reply_type, req_id, reply)
                if xs_type == XS_WATCH and reply_type != XS_ERROR:
                    path = payload.split(b"\0")[0].decode()
                    token = payload.split(b"\0")[1].decode()
                    self.event(path, token)   # xenstored fires once on registration
        except (ConnectionError, OSError):
            with self.xs.lock:
                self.xs.watches = [w for w in self.xs.watches if w[0] is not self]
                if self in self.xs.conns:
                    self.xs.conns.remove(self)
            self.sock.close()

    def absolute(self, path: str) -> str:
        return path if path.startswith("/") or path.startswith("@") else f"{self.home}/{path}"

    def handle(self, xs_type: int, payload: bytes) -> tuple[int, bytes]:
        xs = self.xs
        parts = payload.split(b"\0")
        path = self.absolute(parts[0].decode())
        node = xs.find(path)
        if xs_type in (XS_READ, XS_DIRECTORY, XS_GET_PERMS):
            return self._read(xs_type, node)
        if xs_type in (XS_WRITE, XS_MKDIR):
            value = payload[len(parts[0]) + 1:] if xs_type == XS_WRITE else b""
            return self._write(xs_type, path, node, value)
        if xs_type == XS_RM:
            return self._rm(path, node)
        if xs_type == XS_SET_PERMS:
            return self._set_perms(path, node, [p.decode() for p in parts[1:] if p])
        if xs_type == XS_WATCH:
            relative = not parts[0].startswith(b"/") and not parts[0].startswith(b"@")
            xs.watches.append((self, path, parts[1].decode(), relative))
            return XS_WATCH, b"OK\0"
        if xs_type == XS_UNWATCH:
            xs.watches = [w for w in xs.watches
                          if not (w[0] is self and w[1] == path and w[2] == parts[1].decode())]
            return XS_UNWATCH, b"OK\0"
        return _err("ENOSYS")

    def _read(self, xs_type: int, node: Node | None) -> tuple[int, bytes]:
        if node is None:
            return _err("ENOENT")
        if not self.xs.can(self.domid, node, "r"):
            return _err("EACCES")
        if xs_type == XS_READ:
            return XS_READ, node.value
        if xs_type == XS_DIRECTORY:
            return XS_DIRECTORY, b"".join(c.encode() + b"\0" for c in node.children)
        return XS_GET_PERMS, b"".join(p.encode() + b"\0" for p in node.perms)

    def _write(self, xs_type: int, path: str, node: Node | None,
               value: bytes) -> tuple[int, bytes]:
        xs = self.xs
        if len(value) > MAX_VALUE:
            return _err("E2BIG")
        refused = xs.refuse_write and xs.refuse_write(self.domid, path)
        if refused:
            return _err(refused)
        if node is not None and not xs.can(self.domid, node, "w"):
            return _err("EACCES")
        created = node if node is not None else xs.create(self.domid, path)
        if isinstance(created, str):
            return _err(created)
        if xs_type == XS_WRITE:
            created.value = value
        xs.fire(path)
        return xs_type, b"OK\0"

    def _rm(self, path: str, node: Node | None) -> tuple[int, bytes]:
        if node is None:
            return _err("ENOENT")
        parent_path, _, name = path.rstrip("/").rpartition("/")
        parent = self.xs.find(parent_path)
        if parent is None or not self.xs.can(self.domid, parent, "w"):
            return _err("EACCES")
        del parent.children[name]
        self.xs.fire(path)
        return XS_RM, b"OK\0"

    def _set_perms(self, path: str, node: Node | None, perms: list[str]) -> tuple[int, bytes]:
        if node is None:
            return _err("ENOENT")
        if self.domid != 0 and int(node.perms[0][1:]) != self.domid:
            return _err("EACCES")
        node.perms = perms
        self.xs.fire(path)
        return XS_SET_PERMS, b"OK\0"
