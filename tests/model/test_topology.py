import hashlib

from selena.model import Endpoint, Interface, NodeKind, Topology


def test_pythonic_api_builds_links_on_new_interfaces():
    topo = Topology("demo", tdf=10)
    h1 = topo.add_host("h1", ip="10.0.1.2/24")
    h2 = topo.add_host("h2", ip="10.0.1.3/24")
    s1 = topo.add_switch("s1")
    l1 = topo.add_link(h1, s1, rate="1Gbit", delay="0.2ms")
    l2 = topo.add_link(h2, s1, rate="1Gbit", delay="0.2ms", loss="1%", queue=100)
    assert l1.a == Endpoint("h1", 0) and l1.b == Endpoint("s1", 0)
    assert l2.b == Endpoint("s1", 1)
    assert [i.index for i in s1.interfaces] == [0, 1]
    assert l1.rate_bps == 1e9 and l1.delay_s == 0.0002
    assert l2.loss == 0.01 and l2.queue_packets == 100
    assert s1.kind is NodeKind.SWITCH and s1.template == "ovs-switch"
    assert h1.template == "tiny-host" and h1.memory_mb == 32   # its template needs no more
    assert s1.memory_mb == 256 and topo.add_host("h9", memory="64M").memory_mb == 64
    assert topo.add_host("h8", template="tools-host").memory_mb == 64


def test_a_second_link_on_a_host_gets_a_second_interface():
    topo = Topology("t")
    h = topo.add_host("h", ip="10.0.0.1/24")
    a, b = topo.add_switch("a"), topo.add_switch("b")
    topo.add_link(h, a)
    link = topo.add_link(h, b)
    assert link.a == Endpoint("h", 1)


def test_derived_macs_are_stable_and_explicit_ones_kept():
    topo = Topology("t")
    h = topo.add_host("h", ip="10.0.0.1/24")
    g = topo.add_host("g", ip="10.0.0.2/24", mac="02:00:00:00:00:AA")
    mac = topo.mac_of(h, h.interfaces[0])
    assert mac.startswith("02:") and mac.endswith(":00:00:00")
    assert mac == Topology("t").mac_of(h, h.interfaces[0])
    assert topo.mac_of(g, g.interfaces[0]) == "02:00:00:00:00:aa"


def test_derived_macs_are_unique_over_every_node_id_validation_accepts():
    """Ids 65536-99999 took the MACs of ids 0-34463 (only 16 bits were used),
    which validation then reported as a duplicate MAC nobody had written."""
    topo = Topology("t")
    macs = {topo.mac_of(topo.add_host(f"h{i}", id=i), Interface(0))
            for i in [*range(0, 1000), *range(65536, 66536), 99_999, 34_463]}
    assert len(macs) == 2002
    # Ids below 65536 keep the MACs they always had.
    exp = hashlib.sha256(b"t").digest()
    assert topo.mac_of(topo.nodes["h258"], Interface(0)) == \
        f"02:{exp[0]:02x}:{exp[1]:02x}:01:02:00"


def test_use_host_template_moves_only_hosts_on_the_default_and_their_default_memory():
    topo = Topology("t")
    topo.add_host("h1")
    topo.add_host("h2", memory=48)
    topo.add_host("h3", template="debian")
    topo.add_host("h4")
    topo.add_switch("s1")
    assert topo.use_host_template("tools-host", names=["h1", "h2", "h3"]) == ["h1", "h2"]
    got = {n.name: (n.template, n.memory_mb) for n in topo.nodes.values()}
    assert got == {"h1": ("tools-host", 64), "h2": ("tools-host", 48), "h3": ("debian", 128),
                   "h4": ("tiny-host", 32), "s1": ("ovs-switch", 256)}
    assert topo.use_host_template("tools-host") == ["h4"]


def test_mns_mac_and_arp_number_host_macs_and_give_every_host_the_others():
    topo = Topology("t")
    h1 = topo.add_host("h1", ip="10.0.0.1/8")
    topo.add_host("h2", ip="10.0.0.2/8", mac="02:00:00:00:00:aa")     # its own stays
    topo.add_host("h3", ip="fd00::3/64")                               # no IPv4: none
    topo.add_switch("s1")
    topo.add_host("h4", ip="10.0.1.4/24")
    assert topo.number_host_macs() == ["h1", "h4"]
    assert topo.mac_of(h1, h1.interface(0)) == "00:00:00:00:00:01"
    assert topo.nodes["h4"].interface(0).mac == "00:00:00:00:00:04"
    assert topo.static_arp_between_hosts() == 6                       # h1, h2, h4: 3 x 2
    entries = {(a.node, a.ip, a.mac) for a in topo.static_arp}
    assert ("h1", "10.0.0.2", "02:00:00:00:00:aa") in entries
    assert ("h2", "10.0.1.4", "00:00:00:00:00:04") in entries
    assert not any(a.node == "h3" or a.node == "s1" for a in topo.static_arp)
