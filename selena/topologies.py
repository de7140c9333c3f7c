"""Built-in parametrised topologies, with Mininet's names, parameters and
defaults (`mn --topo NAME[,ARGS]`), plus the k-ary fat tree.

Hosts are h1..hN with 10.0.0.N/8 on eth0, as in Mininet; switches are plain
Open vSwitch guests (standalone learning bridges). `link` keyword arguments
(rate, delay, jitter, loss, queue) go to every link.
"""

from __future__ import annotations

from typing import Unpack

from selena.model import LinkOptions, Node, Topology


def _host_ip(i: int) -> str:
    """Host i (from 1) in 10.0.0.0/8: one L2 subnet across switches."""
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}/8"


def _at_least(what: str, value: int, low: int) -> None:
    if value < low:
        raise ValueError(f"{what} must be >= {low}, got {value}")


def _hosts(topo: Topology, count: int, start: int = 1) -> list[Node]:
    return [topo.add_host(f"h{i}", ip=_host_ip(i)) for i in range(start, start + count)]


def single(k: int = 2, name: str = "single", tdf: float = 1.0,
           **link: Unpack[LinkOptions]) -> Topology:
    """k hosts on one switch (Mininet's `single`)."""
    _at_least("single k", k, 1)
    topo = Topology(name, tdf=tdf)
    s = topo.add_switch("s1")
    for h in _hosts(topo, k):
        topo.add_link(h, s, **link)
    return topo


def star(n: int, name: str = "star", tdf: float = 1.0, **link: Unpack[LinkOptions]) -> Topology:
    """n hosts on one switch (`single` by another name)."""
    _at_least("star n", n, 1)
    return single(n, name=name, tdf=tdf, **link)


def minimal(name: str = "minimal", tdf: float = 1.0, **link: Unpack[LinkOptions]) -> Topology:
    """Two hosts on one switch (Mininet's default topology)."""
    return single(2, name=name, tdf=tdf, **link)


def reversed_single(k: int = 2, name: str = "reversed", tdf: float = 1.0,
                    **link: Unpack[LinkOptions]) -> Topology:
    """k hosts on one switch with the port order reversed: h1 on the
    switch's last port (Mininet's `reversed`)."""
    _at_least("reversed k", k, 1)
    topo = Topology(name, tdf=tdf)
    s = topo.add_switch("s1")
    for i, h in enumerate(_hosts(topo, k), start=1):
        s.add_interface(k - i)
        topo.add_link(h, (s, k - i), **link)
    return topo


def linear(k: int = 2, n: int = 1, name: str = "linear", tdf: float = 1.0,
           **link: Unpack[LinkOptions]) -> Topology:
    """k switches in a line with n hosts on each (Mininet's `linear`); hosts
    are h1..hk for n=1 and h<j>s<i> otherwise."""
    _at_least("linear k", k, 1)
    _at_least("linear n", n, 1)
    topo = Topology(name, tdf=tdf)
    previous = None
    count = 0
    for i in range(1, k + 1):
        switch = topo.add_switch(f"s{i}")
        for j in range(1, n + 1):
            count += 1
            host = topo.add_host(f"h{i}" if n == 1 else f"h{j}s{i}", ip=_host_ip(count))
            topo.add_link(host, switch, **link)
        if previous is not None:
            topo.add_link(switch, previous, **link)
        previous = switch
    return topo


def tree(depth: int = 1, fanout: int = 2, name: str = "tree", tdf: float = 1.0,
         **link: Unpack[LinkOptions]) -> Topology:
    """A switch tree of the given depth; fanout hosts under each leaf switch
    (Mininet's `tree`)."""
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
            topo.add_link(switch, build(level + 1), **link)
        return switch

    build(0)
    return topo


def torus(x: int, y: int, n: int = 1, name: str = "torus", tdf: float = 1.0,
          **link: Unpack[LinkOptions]) -> Topology:
    """An x by y grid of switches wrapped at the edges, n hosts on each
    (Mininet's `torus`). It has loops, so its switches run the rapid spanning
    tree protocol (Mininet needs `--switch lxbr,stp=1` for the same)."""
    _at_least("torus x", x, 3)
    _at_least("torus y", y, 3)
    _at_least("torus n", n, 1)
    topo = Topology(name, tdf=tdf)
    switches: dict[tuple[int, int], Node] = {}
    count = 0
    for i in range(1, x + 1):
        for j in range(1, y + 1):
            switch = topo.add_switch(f"s{i}x{j}")
            switch.stp = True
            switches[i, j] = switch
            for h in range(1, n + 1):
                count += 1
                host = topo.add_host(f"h{i}x{j}" if n == 1 else f"h{i}x{j}_{h}",
                                     ip=_host_ip(count))
                topo.add_link(host, switch, **link)
    for i in range(1, x + 1):
        for j in range(1, y + 1):
            topo.add_link(switches[i, j], switches[i, j % y + 1], **link)
            topo.add_link(switches[i, j], switches[i % x + 1, j], **link)
    return topo


def fat_tree(k: int = 4, pods: int | None = None, name: str = "fattree", tdf: float = 1.0,
             *, routing: str = "stp", **link: Unpack[LinkOptions]) -> Topology:
    """A k-ary fat tree: (k/2)^2 core, k pods of k/2 aggregation + k/2 edge,
    k^3/4 hosts.

    `pods` < k keeps that many pods and the same share of the core, each
    aggregation switch still linked to k/2 cores where there are that many:
    SELENA's evaluation used half of a k=4 tree (`pods=2`: 2 core, 8 pod
    switches, 8 hosts; every switch uses all 4 of its ports).

    Its many paths are loops for learning bridges. `routing="stp"`: the
    switches run the rapid spanning tree protocol, which leaves one tree
    (and its bottlenecks). `routing="static"`: no learning, every switch gets
    static flows (IPv4 and ARP by destination host), spread over the paths
    by the destination's number as in Al-Fares et al.'s two-level tables, so
    distinct destinations below one edge switch take distinct uplinks."""
    if k < 2 or k % 2:
        raise ValueError(f"fat tree k must be even and >= 2, got {k}")
    pods = k if pods is None else pods
    if not 1 <= pods <= k:
        raise ValueError(f"fat tree pods must be between 1 and k={k}, got {pods}")
    if routing not in ("stp", "static"):
        raise ValueError(f"fat tree routing must be 'stp' or 'static', got {routing!r}")
    half = k // 2
    topo = Topology(name, tdf=tdf)

    def switch(switch_name: str) -> Node:
        node = topo.add_switch(switch_name)
        node.stp = routing == "stp"
        return node

    cores = [switch(f"c{i}") for i in range(max(1, half * half * pods // k))]
    # next hops: toward a host below (by host number); up, spread over the
    # uplinks by the destination's number divided by a stride (edges: 1,
    # aggregation: k/2); and a core's down links into each pod
    down: dict[str, dict[int, Node]] = {}
    up: dict[str, tuple[list[Node], int]] = {}
    into_pod: dict[str, dict[int, list[Node]]] = {}
    host = 0
    for pod in range(pods):
        aggs = [switch(f"a{pod}_{i}") for i in range(half)]
        edges = [switch(f"e{pod}_{i}") for i in range(half)]
        for i, agg in enumerate(aggs):
            for edge in edges:
                topo.add_link(agg, edge, **link)
            up[agg.name] = ([cores[c] for c in
                             dict.fromkeys((i * half + j) % len(cores) for j in range(half))],
                            half)
            for core in up[agg.name][0]:
                topo.add_link(agg, core, **link)
                into_pod.setdefault(core.name, {}).setdefault(pod, []).append(agg)
        for edge in edges:
            up[edge.name] = (aggs, 1)
            for _ in range(half):
                host += 1
                h = topo.add_host(f"h{host}", ip=_host_ip(host))
                topo.add_link(h, edge, **link)
                for node in (edge, *aggs):
                    down.setdefault(node.name, {})[host] = edge if node is not edge else h
    if routing == "static":
        _fat_tree_flows(topo, host, half, down, up, into_pod)
    return topo


def _fat_tree_flows(topo: Topology, hosts: int, half: int, down: dict[str, dict[int, Node]],
                    up: dict[str, tuple[list[Node], int]],
                    into_pod: dict[str, dict[int, list[Node]]]
                    ) -> None:
    """Destination-based static flows for every switch of a fat tree."""
    for node in topo.nodes.values():
        if node.kind.value != "switch":
            continue
        port = topo.openflow_ports(node)
        for d in range(1, hosts + 1):
            pod = (d - 1) // (half * half)
            if node.name in into_pod:
                aggs = into_pod[node.name][pod]
                hop = aggs[(d - 1) % len(aggs)]
            elif d in down[node.name]:
                hop = down[node.name][d]
            else:
                uplinks, stride = up[node.name]
                hop = uplinks[((d - 1) // stride) % len(uplinks)]
            ip = _host_ip(d).split("/")[0]
            out = port[hop.name]
            node.flows += [f"priority=10,ip,nw_dst={ip},actions=output:{out}",
                           f"priority=10,arp,arp_tpa={ip},actions=output:{out}"]
