"""Built-in topologies: sizes, and clear errors for impossible parameters."""

import pytest

from selena import topologies
from selena.errors import ScenarioError
from selena.loader import parse_topo_spec


def _count(topo):
    hosts = sum(1 for n in topo.nodes.values() if n.kind.value == "host")
    return hosts, len(topo.nodes) - hosts, len(topo.links)


@pytest.mark.parametrize("topo,expected", [
    (topologies.star(3), (3, 1, 3)),
    (topologies.linear(3), (3, 3, 5)),
    (topologies.tree(2, 2), (4, 3, 6)),
    (topologies.fat_tree(4), (16, 20, 48)),
])
def test_sizes(topo, expected):
    assert _count(topo) == expected


@pytest.mark.parametrize("spec,message", [
    ("linear,0", "linear n must be >= 1, got 0"),
    ("single,0", "star n must be >= 1, got 0"),
    ("tree,0,2", "tree depth must be >= 1, got 0"),
    ("tree,2,0", "tree fanout must be >= 1, got 0"),
    ("fattree,3", "fat tree k must be even and >= 2, got 3"),
])
def test_impossible_parameters_are_named(spec, message):
    with pytest.raises(ScenarioError, match=f"--topo '{spec}': {message}"):
        parse_topo_spec(spec, {})
