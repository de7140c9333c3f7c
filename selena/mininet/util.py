"""The few helpers of Mininet's util module that custom files use."""

from __future__ import annotations

import os
import select
from collections.abc import Iterable, Iterator, Mapping

from selena.errors import ArgumentError
from selena.mininet.log import output
from selena.mininet.net import NodeHandle
from selena.mininet.topo import Customized
from selena.model import caller_location


def custom(cls: object, **params: object) -> Customized:
    """Mininet's custom(TCLink, bw=10): a class whose params every node or
    link made with it gets, over its own options (Mininet(link=...,
    host=...), or a cls= of addHost/addLink)."""
    return Customized(cls, dict(params))


def irange(start: int, end: int) -> range:
    """Mininet's inclusive range: irange(1, 3) is 1, 2, 3."""
    return range(start, end + 1)


def natural(text: str) -> list[object]:
    from selena.mininet.topo import natural as key

    return key(text)


def dumpNodeConnections(nodes: Iterable[object]) -> None:  # noqa: N802 - Mininet's name
    """Each node's links, as `h1 h1-eth0:s1-eth1`."""
    for node in nodes:
        net = getattr(node, "net", None)
        name = str(node)
        if net is None:
            output(f"{name}\n")
            continue
        topo = net.topo
        ends = []
        for port, (other, other_port) in sorted(topo.ports.get(name, {}).items()):
            ends.append(f"{name}-eth{port}:{other}-eth{other_port}")
        output(f"{name} {' '.join(ends)}\n")


def dumpNetConnections(net: object) -> None:  # noqa: N802
    dumpNodeConnections(getattr(net, "hosts", []) + getattr(net, "switches", []))


def waitListening(client: object = None, server: object = "127.0.0.1",  # noqa: N802
                  port: int = 80, timeout: float | None = None) -> bool:
    """Mininet's waitListening: True once `server` listens on TCP `port`,
    False when `timeout` (virtual seconds; None: none) passed first. selena
    asks inside the server's guest, not with telnet from the client: `server`
    is a node of a started net, or the address of one of its hosts with
    `client=` a node of that net (127.0.0.1: the client itself)."""
    node = _listener(client, server)
    exp = node.net._started("waitListening")
    return bool(exp.engine.listening(node.name, port, timeout=timeout))


def _listener(client: object, server: object) -> NodeHandle:
    if isinstance(server, NodeHandle):
        return server
    if isinstance(server, str) and isinstance(client, NodeHandle):
        if server in ("127.0.0.1", "localhost"):
            return client
        for host in client.net.hosts:
            if host.IP() == server:
                return host
        raise ArgumentError(caller_location(), f"waitListening: no host of net "
                                               f"{client.net.name} has the address {server!r}; "
                                               "give server= the node itself")
    raise ArgumentError(caller_location(), "waitListening: selena asks the server's guest "
                                           "itself: give server= a node of the started net "
                                           "(or client= a node and server= an address in "
                                           "its net)")


def pmonitor(popens: Mapping[object, object], timeoutms: int = 500, readline: bool = True,
             readmax: int = 1024) -> Iterator[tuple[object, str]]:
    """Mininet's pmonitor: from a dict of host: popen, (host, line) as each
    line of a popen's stdout comes (its newline kept; readline=False: what
    came, up to readmax bytes), (None, '') when nothing came in timeoutms
    (real ms); ends when every popen's output has ended. The lines are the
    guests' as the control channel collects them (selena.mininet.process)."""
    poller = select.poll()
    watched: dict[int, tuple[object, bytearray]] = {}
    for host, popen in popens.items():
        stdout = getattr(popen, "stdout", None)
        if stdout is None or not hasattr(stdout, "fileno"):
            raise ArgumentError(caller_location(), f"pmonitor: {host}'s {popen!r} is not a "
                                                   "popen of a node (give node.popen(...))")
        fd = stdout.fileno()
        poller.register(fd, select.POLLIN)
        watched[fd] = (host, bytearray())
    while watched:
        ready = poller.poll(timeoutms)
        if not ready:
            yield None, ""
        for fd, _event in ready:
            host, pending = watched[fd]
            # Read the pipe itself: a buffered readline could keep a line
            # back where poll no longer sees it.
            data = os.read(fd, 65536)
            pending += data
            while pending:
                end = pending.find(b"\n") + 1 if readline else min(len(pending), readmax)
                if not end and data:
                    break               # the rest of the line is still to come
                end = end or len(pending)
                piece = bytes(pending[:end])
                del pending[:end]
                yield host, piece.decode(errors="replace")
            if not data:
                poller.unregister(fd)
                del watched[fd]
