"""SELENA-style descriptions (the paper's Listings 1 and 2) run unchanged."""

from pathlib import Path

import pytest

from selena.compat import NodeType, PushCmd, PushOFRule, SetArp, load_selena_file
from selena.errors import ScenarioError
from selena.validate import validate

LISTING = Path(__file__).resolve().parents[1] / "scenarios" / "paper_listing1.py"


def test_paper_listings_load_and_validate():
    script = load_selena_file(LISTING)
    topo = script.topology
    assert set(topo.nodes) == {"H1", "H2", "Switch"}
    h1 = topo.nodes["H1"]
    assert (h1.id, h1.vcpus, h1.cpus, h1.memory_mb) == (0, 1, "4,5,6,7", 512)
    assert h1.interfaces[0].ip == "10.0.1.2/24" and h1.interfaces[0].gateway == "10.0.1.1"
    assert topo.nodes["Switch"].template == NodeType.LINUX_OVS.value
    link = topo.links[0]
    assert (link.a.node, link.a.iface, link.b.node, link.b.iface) == ("H1", 0, "Switch", 0)
    # Mbit/s and ms, as in the paper
    assert link.rate_bps == 1e9 and link.delay_s == pytest.approx(0.0002)
    assert script.actions[0] == SetArp("H1", "eth1", "10.0.1.3", "fe:ff:ff:00:01:03")
    assert PushOFRule("Switch", "br0", "add-flow", "in_port=1,action=output:2") in script.actions
    assert script.actions[-1] == PushCmd("H1", ("netperf -H 10.0.1.3 -t TCP_STREAM -i10 -D1",))
    validate(topo, templates={"tiny-host", "ovs-switch"})


def test_unknown_node_id_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('pushCmd(7, ["true"])\n')
    with pytest.raises(ScenarioError, match="node id 7 is used before newNode"):
        load_selena_file(bad)


def test_syntax_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("newNode(0,\n")
    with pytest.raises(ScenarioError, match="broken.py:"):
        load_selena_file(bad)


def test_explicit_imports_describe_the_loaded_file_not_a_global(tmp_path):
    from selena import compat
    before = len(compat.DEFAULT.topology.nodes)
    f = tmp_path / "imports.py"
    f.write_text("from selena.compat import NodeType, newNode, newLink, pushCmd\n"
                 + LISTING.read_text())
    script = load_selena_file(f)
    assert set(script.topology.nodes) == {"H1", "H2", "Switch"}
    assert len(script.topology.links) == 2 and script.actions
    assert len(compat.DEFAULT.topology.nodes) == before
