"""The few helpers of Mininet's util module that custom files use."""

from __future__ import annotations

from collections.abc import Iterable

from selena.mininet.log import output
from selena.mininet.topo import Customized


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
