"""The few helpers of Mininet's util module that custom files use."""

from __future__ import annotations

from collections.abc import Iterable

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
