"""Built-in topologies with Mininet's names, parameters and defaults, the
`--topo` and `--link` specs, and clear errors for impossible parameters."""

import pytest

from selena import topologies
from selena.errors import ScenarioError
from selena.specs import parse_link_spec, parse_topo_spec


def _count(topo):
    hosts = sum(1 for n in topo.nodes.values() if n.kind.value == "host")
    return hosts, len(topo.nodes) - hosts, len(topo.links)


@pytest.mark.parametrize("topo,expected", [
    (topologies.star(3), (3, 1, 3)),
    (topologies.linear(3), (3, 3, 5)),
    (topologies.linear(3, 2), (6, 3, 8)),
    (topologies.tree(2, 2), (4, 3, 6)),
    (topologies.torus(3, 3), (9, 9, 27)),
    (topologies.fat_tree(4), (16, 20, 48)),
    (topologies.fat_tree(4, pods=2), (8, 10, 24)),   # SELENA's half of k=4
    (topologies.fat_tree(6, pods=2), (18, 15, 54)),
])
def test_sizes(topo, expected):
    assert _count(topo) == expected


@pytest.mark.parametrize("spec,expected", [
    ("minimal", (2, 1, 2)),
    ("single", (2, 1, 2)),          # Mininet's defaults when no size is given
    ("linear", (2, 2, 3)),
    ("tree", (2, 1, 2)),
    ("reversed", (2, 1, 2)),
    ("single,4", (4, 1, 4)),
    ("linear,3", (3, 3, 5)),
    ("linear,k=3,n=2", (6, 3, 8)),
    ("tree,depth=2,fanout=3", (9, 4, 12)),
    ("tree,2,fanout=3", (9, 4, 12)),
    ("torus,3,4", (12, 12, 36)),
    ("fattree,4", (16, 20, 48)),
    ("fattree,4,pods=2", (8, 10, 24)),
])
def test_mininet_specs_and_defaults(spec, expected):
    assert _count(parse_topo_spec(spec)) == expected


def test_mininet_names_hosts_and_switches_the_same_way():
    assert set(parse_topo_spec("linear,2,2").nodes) == {"s1", "s2", "h1s1", "h2s1", "h1s2",
                                                         "h2s2"}
    assert "h2x3" in parse_topo_spec("torus,3,3").nodes
    # reversed: h1 on the switch's last port
    topo = parse_topo_spec("reversed,3")
    h1_link = next(link for link in topo.links if link.a.node == "h1")
    assert h1_link.b.iface == 2
    assert topo.nodes["h1"].interfaces[0].ip == "10.0.0.1/8"


@pytest.mark.parametrize("spec,message", [
    ("linear,0", "linear k must be >= 1, got 0"),
    ("single,0", "single k must be >= 1, got 0"),
    ("tree,0,2", "tree depth must be >= 1, got 0"),
    ("tree,2,0", "tree fanout must be >= 1, got 0"),
    ("fattree,3", "fat tree k must be even and >= 2, got 3"),
    ("fattree,4,5", "fat tree pods must be between 1 and k=4, got 5"),
    ("torus,2,3", "torus x must be >= 3, got 2"),
    ("torus", "missing arguments (usage: torus,x,y,n=1)"),
    ("tree,depth=x", "'depth=x' is not an integer (usage: tree,depth=1,fanout=2)"),
    ("tree,width=3", "tree has no parameter 'width' (usage: tree,depth=1,fanout=2)"),
    ("tree,depth=2,3", "a positional argument after a keyword one"),
    ("tree,2,depth=3", "depth given twice"),
    ("single,1,2,3", "too many arguments (usage: single,k=2)"),
    ("ring,3", "unknown topology 'ring' (have minimal, single,k=2, reversed,k=2, "
               "linear,k=2,n=1, tree,depth=1,fanout=2, torus,x,y,n=1, star,n, fattree,k=4,[pods])"),
])
def test_impossible_parameters_are_named(spec, message):
    with pytest.raises(ScenarioError) as info:
        parse_topo_spec(spec)
    assert str(info.value) == f"--topo {spec!r}: {message}"


def test_link_specs_have_mininets_meanings():
    link = parse_link_spec("tc,bw=10,delay=5ms,jitter=1ms,loss=1,max_queue_size=100")
    assert link == {"rate": 10e6, "delay": "5ms", "jitter": "1ms", "loss": "1%",
                    "queue": 100}
    topo = parse_topo_spec("single,2", link)
    assert all(lk.rate_bps == 10e6 and lk.delay_s == 0.005 and lk.loss == 0.01
               and lk.queue_packets == 100 for lk in topo.links)
    assert parse_link_spec("tc") == {} and parse_link_spec("default") == {}
    # mn's other link classes and TCLink's use_htb were refused as "not KEY=VALUE"
    # and "unknown parameter".
    assert parse_link_spec("tcu,bw=5") == {"rate": 5e6}
    assert parse_link_spec("ovs") == {}
    assert parse_link_spec("tc,bw=10,use_htb=True") == {"rate": 10e6}


@pytest.mark.parametrize("spec,message", [
    ("tc,delay=5", "delay=5 has no unit; write e.g. delay=5ms"),
    ("tc,jitter=1", "jitter=1 has no unit"),
    ("tc,delay=5mss", "unknown unit 'mss'"),
    ("tc,bw=fast", "bad value for bw: 'fast'"),
    ("tc,bw=-5", "bw -5 is out of range: Mininet's bw is in Mbit/s, from 0.001 to 400000"),
    ("tc,bw=nan", "bw nan is out of range"),
    ("tc,bw=0", "bw 0 is out of range"),
    ("tc,loss=150", "loss 150 is not a percentage from 0 to 100"),
    ("tc,speed=10", "unknown parameter 'speed' (bw, delay, jitter, loss, max_queue_size)"),
    ("tc,bw", "'bw' is not KEY=VALUE"),
    # Mininet keeps the last; it was kept here without a word too.
    ("tc,bw=5,delay=5ms,bw=10", "bw given twice (bw=5, bw=10): give each once"),
    ("tc,use_htb=maybe", "use_htb=maybe: True or False"),
    ("tc,bw=10,enable_red=True", "enable_red is not supported: selena's links queue "
                                 "drop-tail (max_queue_size), not RED"),
])
def test_bad_link_specs_are_named(spec, message):
    with pytest.raises(ScenarioError) as info:
        parse_link_spec(spec)
    assert str(info.value).startswith(f"--link {spec!r}: ")
    assert message in str(info.value)


def test_half_a_k4_fat_tree_uses_every_pod_switch_port_and_links_each_agg_to_both_cores():
    topo = topologies.fat_tree(4, pods=2)
    degree: dict[str, int] = {}
    for link in topo.links:
        for end in (link.a.node, link.b.node):
            degree[end] = degree.get(end, 0) + 1
    switches = [n for n in topo.nodes if not n.startswith("h")]
    assert sorted(switches) == ["a0_0", "a0_1", "a1_0", "a1_1", "c0", "c1",
                                "e0_0", "e0_1", "e1_0", "e1_1"]
    assert all(degree[s] == 4 for s in switches)     # 4-port switches, all used
    agg_core = {(link.a.node, link.b.node) for link in topo.links
                if link.b.node.startswith("c")}
    assert agg_core == {(a, c) for a in ("a0_0", "a0_1", "a1_0", "a1_1") for c in ("c0", "c1")}


def _walk(topo, src, dst_ip):
    """Follow the static flows from host src toward dst_ip; the nodes visited."""
    peer = {}
    for link in topo.links:
        peer[link.a.node, link.a.iface + 1] = link.b.node
        peer[link.b.node, link.b.iface + 1] = link.a.node
    node = next(b for (a, _), b in peer.items() if a == src)
    path = [src, node]
    while node.startswith(("e", "a", "c")) and len(path) < 10:
        (flow,) = [f for f in topo.nodes[node].flows if f",ip,nw_dst={dst_ip}," in f]
        node = peer[node, int(flow.rsplit("output:", 1)[1])]
        path.append(node)
    return path


def test_static_fat_tree_routing_reaches_every_host_and_gives_each_pair_its_own_links():
    topo = topologies.fat_tree(4, pods=2, routing="static")
    assert not any(n.stp for n in topo.nodes.values())
    for a in range(1, 9):
        for b in range(1, 9):
            if a != b:
                assert _walk(topo, f"h{a}", f"10.0.0.{b}")[-1] == f"h{b}"
    # SELENA's four cross-pod pairs, both ways: no directed link carries two
    used: list[tuple[str, str]] = []
    for a, b in [(1, 5), (2, 6), (3, 7), (4, 8)]:
        for src, dst in ((a, b), (b, a)):
            path = _walk(topo, f"h{src}", f"10.0.0.{dst}")
            assert len(path) == 7                      # through 5 switches, via a core
            used += list(zip(path, path[1:], strict=False))
    assert len(used) == len(set(used))
    # ARP follows IPv4: requests and replies reach their target without flooding
    e = topo.nodes["e0_0"]
    assert {f.replace(",arp,arp_tpa=", ",ip,nw_dst=") for f in e.flows if ",arp," in f} \
        == {f for f in e.flows if ",ip," in f}


def test_fat_tree_routing_must_be_named():
    with pytest.raises(ValueError, match="routing must be 'stp' or 'static'"):
        topologies.fat_tree(4, routing="ecmp")


def test_openflow_ports_name_each_neighbour_by_interface_index_plus_one():
    topo = topologies.linear(3)
    # s2: its host first (eth0), then s1 (eth1) and s3 (eth2)
    assert topo.openflow_ports("s2") == {"h2": 1, "s1": 2, "s3": 3}
    assert topo.openflow_ports(topo.nodes["h1"]) == {"s1": 1}
