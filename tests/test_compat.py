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
    assert topo.nodes["Switch"].template == NodeType.LINUX_OVS.value == "ovs-switch"
    assert h1.template == "tools-host"                  # netperf is in the host template
    # SELENA's conventions: interfaces are eth1, eth2... in the guest, and a
    # RANDOM MAC on a.b.c.d is fe:ff:ff:b:c:d (the MACs setArp names).
    assert h1.device(0) == "eth1" and topo.nodes["Switch"].device(1) == "eth2"
    assert topo.mac_of(topo.nodes["H2"], topo.nodes["H2"].interfaces[0]) == "fe:ff:ff:00:01:03"
    assert topo.nodes["Switch"].bare_bridge and not h1.bare_bridge
    assert [(a.node, a.iface, a.ip, a.mac) for a in topo.static_arp] == [
        ("H1", 0, "10.0.1.3", "fe:ff:ff:00:01:03"), ("H2", 0, "10.0.1.2", "fe:ff:ff:00:01:02")]
    assert topo.static_arp[0].defined_at.endswith("paper_listing1.py:36")
    link = topo.links[0]
    assert (link.a.node, link.a.iface, link.b.node, link.b.iface) == ("H1", 0, "Switch", 0)
    # Mbit/s and ms, as in the paper
    assert link.rate_bps == 1e9 and link.delay_s == pytest.approx(0.0002)
    assert script.actions[0] == SetArp("H1", "eth1", "10.0.1.3", "fe:ff:ff:00:01:03")
    assert PushOFRule("Switch", "br0", "add-flow", "in_port=1,action=output:2") in script.actions
    assert script.actions[-1] == PushCmd("H1", ("netperf -H 10.0.1.3 -t TCP_STREAM -i10 -D1",))
    validate(topo, templates={"tools-host", "ovs-switch"})


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


@pytest.mark.parametrize("body,message", [
    ('newNode(0, "a", "host", [])', "the type must be a NodeType member"),
    ('newNode("0", "a", NodeType.LINUX_HOST, [])', "the node id must be an integer"),
    ('newNode(0, "a", NodeType.LINUX_HOST, [(1000, "RANDOM", "10.0.0.1", "255.255.255.0", "")],'
     ' "two")', "vcpus must be an integer"),
    ('newNode(0, "a", NodeType.LINUX_HOST, [])\nnewNode(0, "b", NodeType.LINUX_HOST, [])',
     "node id 0 is already 'a'"),
    ('newNode(0, "a", NodeType.LINUX_HOST, [(1000, "RANDOM", "10.0.0.1", "255.255.255.0", "")])'
     '\nsetArp(0, "eth0", "10.0.0.2", "fe:ff:ff:00:00:02")',
     "node a has no interface 'eth0' (it has eth1; SELENA numbers a node's interfaces from eth1)"),
    ('newNode(0, "a", NodeType.LINUX_HOST, [])\npushCmd(0, "ls")',
     "the commands must be a list or a tuple"),
    ('newNode(0, "a", NodeType.LINUX_HOST, [])\npushOFRule(0, "br0", "add-flow", "x")',
     "node a is a host, not a switch"),
    ('newLink((0, 0), (1, 0), "1G", 0.2)', "the rate (Mbit/s) must be a number, got '1G'"),
    ('newLink((0, 0), (1, 0), 1000, 0.2)', "node id 0 is used before newNode"),
])
def test_listing_calls_check_their_arguments(tmp_path, body, message):
    bad = tmp_path / "bad.py"
    bad.write_text(body + "\n")
    with pytest.raises(ScenarioError) as info:
        load_selena_file(bad)
    assert message in str(info.value)


def test_a_debian_node_with_packages_in_the_papers_style():
    script = load_selena_file(LISTING.parent / "debian_listing.py")
    m1 = script.topology.nodes["m1"]
    assert (m1.template, m1.packages, m1.vcpus, m1.memory_mb) == \
        ("debian", ("memcached",), 2, 128)
    assert m1.device(0) == "eth1" and script.topology.nodes["H1"].template == "tools-host"
    assert [a.node for a in script.actions if isinstance(a, PushCmd)] == ["m1", "H1"]


def test_packages_on_a_node_type_without_a_debian_image_are_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('newNode(0, "a", NodeType.LINUX_HOST, [], packages=["memcached"])\n')
    with pytest.raises(ScenarioError, match=r'newNode\(0, .a., ...\): packages need '
                                            r"NodeType.DEBIAN_HOST .* not LINUX_HOST"):
        load_selena_file(bad)
    bad.write_text('newNode(0, "a", NodeType.DEBIAN_HOST, [], packages="memcached")\n')
    with pytest.raises(ScenarioError, match="the packages must be"):
        load_selena_file(bad)


# -- a listing's interfaces are named as its guests name them (eth1 first) ----------------

LISTING_MISTAKES = '''\
newNode(0, "H1", NodeType.LINUX_HOST, [(1000, "RANDOM", "10.0.1.2", "255.255.255.0", "")],
        1, "0", "64M")
newNode(1, "H2", NodeType.LINUX_HOST, [(1000, "RANDOM", "10.0.2.3", "255.255.255.0", ""),
        (1000, "01:00:00:00:00:01", "", "0.0.0.0", "")], 1, "0", "64M")
newLink((0, 0), (1, 0), 1000, 0.2)
newLink((0, 0), (1, 0), 1000, 0.2)
newLink((0, 0), (1, 1), 1000, 0.2)
newLink((0, 1), (1, 1), 1000, 0.2)
'''


def test_listing_problems_name_the_guests_devices_never_the_index(tmp_path):
    from selena.errors import TopologyError

    path = tmp_path / "mine.py"
    path.write_text(LISTING_MISTAKES)
    with pytest.raises(TopologyError) as info:
        validate(load_selena_file(path).topology)
    text = str(info.value)
    # newLink((0, 0), (1, 0)): interface 0 of each node, eth1 in both guests
    assert "mine.py:5: link H1:eth1--H2:eth1: ends are in different subnets" in text
    assert "duplicate link H1:eth1--H2:eth1 (2 times)" in text
    assert "interface H1:eth1 is attached to 3 links or hubs" in text
    # (0, 1): H1's second interface, which would be eth2; it has only eth1
    assert "mine.py:8: link H1:eth2--H2:eth2: node H1 has no interface eth2 (it has eth1)" \
        in text
    assert "node H2 eth2: MAC 01:00:00:00:00:01 is multicast" in text
    assert "eth0" not in text


def test_the_xl_backend_labels_a_listings_vifs_by_the_guests_devices(fake_xen, tmp_path):
    from selena.backends.xl import XlBackend
    from selena.plan import make_plan

    topo = load_selena_file(LISTING).topology
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0)
    backend.deploy(make_plan(topo))
    labels = sorted(backend.state("paper-listing1").vif_nodes.values())
    assert labels == ["H1 eth1", "H2 eth1", "Switch eth1", "Switch eth2"]


def test_advise_names_a_listings_busiest_link_by_the_guests_devices():
    from selena.advise import busiest_link

    topo = load_selena_file(LISTING).topology
    assert busiest_link(topo) == ("link H1:eth1--Switch:eth1", 1000.0)
