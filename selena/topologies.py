"""Built-in parametrised topologies (Mininet's `--topo` names)."""

from __future__ import annotations

from selena.model import Node, Topology


def _host_ip(i: int) -> str:
    """Host i (from 1) in 10.0.0.0/8: one L2 subnet across switches."""
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}/8"


def _at_least(what: str, value: int, low: int) -> None:
    if value < low:
        raise ValueError(f"{what} must be >= {low}, got {value}")


def _hosts(topo: Topology, count: int, start: int = 1) -> list[Node]:
    return [topo.add_host(f"h{i}", ip=_host_ip(i)) for i in range(start, start + count)]


def star(n: int, name: str = "star", tdf: float = 1.0, **link: object) -> Topology:
    """n hosts on one switch (Mininet's `single`)."""
    _at_least("star n", n, 1)
    topo = Topology(name, tdf=tdf)
    s = topo.add_switch("s1")
    for h in _hosts(topo, n):
        topo.add_link(h, s, **link)  # type: ignore[arg-type]
    return topo


def linear(n: int, name: str = "linear", tdf: float = 1.0, **link: object) -> Topology:
    """n switches in a line, one host on each."""
    _at_least("linear n", n, 1)
    topo = Topology(name, tdf=tdf)
    switches = [topo.add_switch(f"s{i}") for i in range(1, n + 1)]
    for h, s in zip(_hosts(topo, n), switches, strict=True):
        topo.add_link(h, s, **link)  # type: ignore[arg-type]
    for a, b in zip(switches, switches[1:], strict=False):
        topo.add_link(a, b, **link)  # type: ignore[arg-type]
    return topo


def tree(depth: int, fanout: int, name: str = "tree", tdf: float = 1.0,
         **link: object) -> Topology:
    """A switch tree of the given depth; fanout hosts under each leaf switch."""
    _at_least("tree depth", depth, 1)
    _at_least("tree fanout", fanout, 1)
    topo = Topology(name, tdf=tdf)
    counter = {"s": 0, "h": 0}

    def build(level: int) -> Node:
        if level == depth:
            counter["h"] += 1
            return topo.add_host(f"h{counter['h']}", ip=_host_ip(counter["h"]))
        counter["s"] += 1
        switch = topo.add_switch(f"s{counter['s']}")
        for _ in range(fanout):
            topo.add_link(switch, build(level + 1), **link)  # type: ignore[arg-type]
        return switch

    build(0)
    return topo


def fat_tree(k: int, name: str = "fattree", tdf: float = 1.0, **link: object) -> Topology:
    """A k-ary fat tree: (k/2)^2 core, k pods of k/2 aggregation + k/2 edge, k^3/4 hosts."""
    if k < 2 or k % 2:
        raise ValueError(f"fat tree k must be even and >= 2, got {k}")
    half = k // 2
    topo = Topology(name, tdf=tdf)
    cores = [topo.add_switch(f"c{i}") for i in range(half * half)]
    host = 0
    for pod in range(k):
        aggs = [topo.add_switch(f"a{pod}_{i}") for i in range(half)]
        edges = [topo.add_switch(f"e{pod}_{i}") for i in range(half)]
        for i, agg in enumerate(aggs):
            for edge in edges:
                topo.add_link(agg, edge, **link)  # type: ignore[arg-type]
            for j in range(half):
                topo.add_link(agg, cores[i * half + j], **link)  # type: ignore[arg-type]
        for edge in edges:
            for _ in range(half):
                host += 1
                h = topo.add_host(f"h{host}", ip=_host_ip(host))
                topo.add_link(h, edge, **link)  # type: ignore[arg-type]
    return topo
