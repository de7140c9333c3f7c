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
    ("torus,2,3", "torus x must be >= 3, got 2"),
    ("torus", "missing arguments (usage: torus,x,y,n=1)"),
    ("tree,depth=x", "'depth=x' is not an integer (usage: tree,depth=1,fanout=2)"),
    ("tree,width=3", "tree has no parameter 'width' (usage: tree,depth=1,fanout=2)"),
    ("tree,depth=2,3", "a positional argument after a keyword one"),
    ("tree,2,depth=3", "depth given twice"),
    ("single,1,2,3", "too many arguments (usage: single,k=2)"),
    ("ring,3", "unknown topology 'ring' (have minimal, single,k=2, reversed,k=2, "
               "linear,k=2,n=1, tree,depth=1,fanout=2, torus,x,y,n=1, star,n, fattree,k=4)"),
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


@pytest.mark.parametrize("spec,message", [
    ("tc,delay=5", "delay=5 has no unit; write e.g. delay=5ms"),
    ("tc,jitter=1", "jitter=1 has no unit"),
    ("tc,delay=5mss", "unknown unit 'mss'"),
    ("tc,bw=fast", "bad value for bw: 'fast'"),
    ("tc,loss=150", "loss 150 is not a percentage from 0 to 100"),
    ("tc,speed=10", "unknown parameter 'speed' (bw, delay, jitter, loss, max_queue_size)"),
    ("tc,bw", "'bw' is not KEY=VALUE"),
])
def test_bad_link_specs_are_named(spec, message):
    with pytest.raises(ScenarioError) as info:
        parse_link_spec(spec)
    assert str(info.value).startswith(f"--link {spec!r}: ")
    assert message in str(info.value)
