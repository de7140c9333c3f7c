"""Validation: a table of bad inputs, each with the message it must produce."""

import pytest

from selena.errors import TopologyError
from selena.model import Interface, Topology
from selena.validate import validate


def two_hosts(**link):
    topo = Topology("exp", tdf=10)
    h1 = topo.add_host("h1", ip="10.0.1.2/24")
    h2 = topo.add_host("h2", ip="10.0.1.3/24")
    topo.add_link(h1, h2, **link)
    return topo


def test_a_sound_topology_passes():
    validate(two_hosts(rate="100Mbit", delay="10ms"), templates={"tiny-host"},
             host_free_mb=1024)


def _dup_name(t):
    t.add_host("h1", ip="10.0.1.9/24")


def _dup_ip(t):
    t.nodes["h2"].interfaces[0].ip = "10.0.1.2/24"


def _dup_mac(t):
    for n in t.nodes.values():
        n.interfaces[0].mac = "02:00:00:00:00:01"


def _bad_ip(t):
    t.nodes["h1"].interfaces[0].ip = "10.0.1.300/24"


def _no_prefix(t):
    t.nodes["h1"].interfaces[0].ip = "10.0.1.2"


def _bad_mac(t):
    t.nodes["h1"].interfaces[0].mac = "zz:00:00:00:00:01"


def _multicast_mac(t):
    t.nodes["h1"].interfaces[0].mac = "01:00:5e:00:00:01"


def _other_subnet(t):
    t.nodes["h2"].interfaces[0].ip = "10.0.2.3/24"


def _missing_iface(t):
    t.add_link(("h1", 5), "h2")


def _unknown_node(t):
    t.add_link("h1", "nowhere")


def _dup_link(t):
    t.add_link(("h1", 0), ("h2", 0))


def _gateway_outside(t):
    t.nodes["h1"].interfaces[0].gateway = "192.168.0.1"


def _dup_id(t):
    t.nodes["h2"].id = t.nodes["h1"].id


def _dup_iface(t):
    t.nodes["h1"].interfaces.append(Interface(0))


def _bad_cpus(t):
    t.nodes["h1"].cpus = "four"


def _bad_template(t):
    t.nodes["h1"].template = "windows-95"


def _too_much_memory(t):
    t.nodes["h1"].memory_mb = 4000


def _tdf(t):
    t.tdf = 0.5


def _tdf_decimals(t):
    t.tdf = 2.0005


def _huge_id(t):
    t.nodes["h1"].id = 123456


def _huge_iface(t):
    t.nodes["h1"].interfaces[0].index = 100


def _arp_bad_mac(t):
    t.add_static_arp("h1", 0, "10.0.1.9", "nonsense")


def _arp_unwired(t):
    t.add_static_arp("h1", 3, "10.0.1.9", "02:00:00:00:00:09")


def _arp_bad_ip(t):
    t.add_static_arp("h2", 0, "10.0.1", "02:00:00:00:00:09")


def _no_nodes(t):
    t.nodes.clear()
    t.links.clear()


@pytest.mark.parametrize("mutate,message", [
    (_no_nodes, "experiment exp: the topology has no nodes"),
    (_huge_id, "node h1: id 123456 out of range (0 to 99999)"),
    (_huge_iface, "node h1: interface index 100 out of range (0 to 99)"),
    (_dup_name, "node name 'h1' is used 2 times"),
    (_dup_ip, "IP 10.0.1.2 is used by 2 interfaces"),
    (_dup_mac, "MAC 02:00:00:00:00:01 is used by 2 interfaces"),
    (_bad_ip, "node h1 eth0: malformed IP '10.0.1.300/24'"),
    (_no_prefix, "node h1 eth0: IP 10.0.1.2 needs a prefix length"),
    (_bad_mac, "node h1 eth0: malformed MAC 'zz:00:00:00:00:01'"),
    (_multicast_mac, "MAC 01:00:5e:00:00:01 is multicast"),
    (_other_subnet, "link h1:eth0--h2:eth0: ends are in different subnets"),
    (_missing_iface, "node h1 has no interface eth5"),
    (_unknown_node, "unknown node 'nowhere'"),
    (_dup_link, "duplicate link h1:eth0--h2:eth0"),
    (_gateway_outside, "gateway 192.168.0.1 is outside 10.0.1.0/24"),
    (_dup_id, "node id 0 is used 2 times"),
    (_dup_iface, "node h1: interface eth0 defined 2 times"),
    (_bad_cpus, "node h1: cpu mask 'four'"),
    (_bad_template, "node h1: unknown template 'windows-95'"),
    (_too_much_memory, "guests need 4032 MB of memory in total; the host can give 1024 MB"),
    (_tdf, "TDF 0.5 is out of range"),
    (_tdf_decimals, "TDF 2.0005 has more than three decimals"),
    (_arp_bad_mac, "static ARP entry on h1 eth0: malformed MAC address 'nonsense'"),
    (_arp_unwired, "static ARP entry on h1 eth3: the interface is not attached"),
    (_arp_bad_ip, "static ARP entry on h2 eth0: malformed IP address '10.0.1'"),
])
def test_bad_topologies_are_rejected_naming_the_item(mutate, message):
    topo = two_hosts()
    mutate(topo)
    with pytest.raises(TopologyError) as info:
        validate(topo, templates={"tiny-host"}, host_free_mb=1024)
    assert any(message in p for p in info.value.problems), info.value.problems


@pytest.mark.parametrize("link,message", [
    ({"rate": "0.5kbit"}, "rate 500 bit/s out of range"),
    ({"rate": "1Tbit"}, "rate 1e+12 bit/s out of range"),
    ({"delay": "20s"}, "delay 20 s out of range"),
    ({"delay": "1ms", "jitter": "2ms"}, "jitter 0.002 s must be between 0 and the delay"),
    ({"loss": "150%"}, "loss 1.5 out of range"),
    ({"queue": 0}, "queue 0 packets out of range"),
])
def test_bad_link_parameters_are_rejected(link, message):
    with pytest.raises(TopologyError) as info:
        validate(two_hosts(**link))
    assert any(message in p for p in info.value.problems), info.value.problems


def test_all_problems_are_reported_at_once():
    topo = two_hosts(delay="20s")
    topo.tdf = 5000
    with pytest.raises(TopologyError) as info:
        validate(topo)
    assert len(info.value.problems) == 2
