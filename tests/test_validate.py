"""Validation: a table of bad inputs, each with the message it must produce."""

import re

import pytest

from selena.errors import TopologyError
from selena.hostinfo import HostInfo
from selena.model import Interface, Topology
from selena.validate import validate

HOST = HostInfo("xl", cpus=8, free_memory_mb=1024)


def two_hosts(**link):
    topo = Topology("exp", tdf=10)
    h1 = topo.add_host("h1", ip="10.0.1.2/24")
    h2 = topo.add_host("h2", ip="10.0.1.3/24")
    topo.add_link(h1, h2, **link)
    return topo


def test_a_sound_topology_passes():
    assert validate(two_hosts(rate="100Mbit", delay="10ms"), templates={"tiny-host"},
                    host=HOST) == []


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
    t.nodes["h1"].add_interface(3, ip="10.0.3.1/24")
    t.add_static_arp("h1", 3, "10.0.3.9", "02:00:00:00:00:09")


def _arp_missing_iface(t):
    t.add_static_arp("h1", 3, "10.0.1.9", "02:00:00:00:00:09")


def _arp_off_link(t):
    t.add_static_arp("h1", 0, "10.0.2.9", "02:00:00:00:00:09")


def _arp_wrong_mac(t):
    t.add_static_arp("h1", 0, "10.0.1.3", "02:00:00:00:00:09")


def _tdf_nan(t):
    t.tdf = float("nan")


def _name_newline(t):
    t.nodes["h1"].name = "h1\n"


def _name_empty(t):
    t.nodes["h1"].name = ""


def _template_quote(t):
    t.nodes["h1"].template = 'tiny"host'


def _ip6_not_v6(t):
    t.nodes["h1"].interfaces[0].ip6 = "10.0.9.1/24"


def _v6_subnets(t):
    t.nodes["h1"].interfaces[0].ip6 = "fd00:1::1/64"
    t.nodes["h2"].interfaces[0].ip6 = "fd00:2::2/64"


def _gateway6_without_v6(t):
    t.nodes["h1"].interfaces[0].gateway6 = "fd00::1"


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
    (_dup_mac, "MAC 02:00:00:00:00:01 is used by 2 interfaces: h1 eth0 at "),
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
    (_arp_missing_iface, "static ARP entry on h1 eth3: node h1 has no interface eth3"),
    (_arp_off_link, "static ARP entry on h1 eth0: 10.0.2.9 is outside the interface's subnet "
                    "10.0.1.0/24"),
    (_arp_wrong_mac, "static ARP entry on h1 eth0: MAC 02:00:00:00:00:09 for 10.0.1.3, but h2 "
                     "eth0, which holds 10.0.1.3, has MAC 02:"),
    (_tdf_nan, "TDF nan is not a finite number"),
    (_name_newline, "node 'h1\\n': name must be letters"),
    (_name_empty, "node '': name must be letters"),
    (_template_quote, "template name 'tiny\"host' must be lower-case"),
    (_ip6_not_v6, "node h1 eth0: ip6 10.0.9.1/24 is not an IPv6 address"),
    (_v6_subnets, "ends are in different subnets (fd00:1::/64 and fd00:2::/64)"),
    (_gateway6_without_v6, "gateway6 fd00::1 but no IPv6 address on the interface"),
    (_arp_bad_ip, "static ARP entry on h2 eth0: malformed IP address '10.0.1'"),
])
def test_bad_topologies_are_rejected_naming_the_item(mutate, message):
    topo = two_hosts()
    mutate(topo)
    with pytest.raises(TopologyError) as info:
        validate(topo, templates={"tiny-host"}, host=HOST)
    assert any(message in p for p in info.value.problems), info.value.problems


def test_a_duplicate_mac_names_each_interface_and_where_it_was_declared():
    topo = two_hosts()
    _dup_mac(topo)
    with pytest.raises(TopologyError) as info:
        validate(topo, templates={"tiny-host"}, host=HOST)
    [problem] = [p for p in info.value.problems if "MAC" in p]
    assert re.search(r"h1 eth0 at \S*test_validate.py:\d+, h2 eth0 at \S*test_validate.py:\d+; "
                     r"give each its own mac=", problem), problem


@pytest.mark.parametrize("link,message", [
    ({"rate": "0.5kbit"}, "rate 500 bit/s out of range"),
    ({"rate": "1Tbit"}, "rate 1e+12 bit/s out of range"),
    ({"delay": "20s"}, "delay 20 s out of range"),
    ({"delay": "1ms", "jitter": "2ms"}, "jitter 0.002 s must be between 0 and the delay"),
    ({"loss": "150%"}, "loss 150% out of range"),
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


def test_problems_name_the_line_that_declared_the_item():
    topo = two_hosts(delay="20s")
    with pytest.raises(TopologyError) as info:
        validate(topo)
    (problem,) = info.value.problems
    line = next(i for i, text in enumerate(open(__file__), start=1)
                if "topo.add_link(h1, h2, **link)" in text)
    assert problem.startswith(f"tests/test_validate.py:{line}: link h1:eth0--h2:eth0: delay")


def test_many_problems_of_one_kind_are_grouped():
    topo = Topology("big", tdf=10)
    for i in range(1000):
        a = topo.add_host(f"a{i}", ip=f"10.{i // 250}.{i % 250}.1/24")
        b = topo.add_host(f"b{i}", ip=f"10.{i // 250}.{i % 250}.2/24")
        topo.add_link(a, b, delay="20s")
    topo.add_link("a0", "nowhere")
    with pytest.raises(TopologyError) as info:
        validate(topo)
    assert len(info.value.problems) == 1001
    shown = str(info.value).splitlines()
    assert len(shown) == 3                  # a screenful, not a thousand lines
    assert shown[0] == "1001 problem(s) in the topology:"
    assert shown[1].startswith("  1000 x delay out of range, e.g. tests/test_validate.py:")
    assert shown[1].endswith("; and 997 more")
    assert shown[2].endswith("link a0:eth1--nowhere:eth0: unknown node 'nowhere'")


def test_exact_tdfs_with_three_decimals_pass():
    for tdf in (1.001, 2.5, 999.999, 1000):
        topo = two_hosts()
        topo.tdf = tdf
        validate(topo)


@pytest.mark.parametrize("link,warning", [
    ({"loss": 1}, "loss=1 is a ratio, so 100% of packets are lost; for 1 percent write "
                  'loss="1%"'),
    ({"delay": 2}, 'delay 2 s one-way is unusually long; for milliseconds write delay="2ms"'),
    ({"rate": 5000}, 'rate 5000 bit/s is below 1 Mbit/s; a bare number is bit/s: for Mbit/s '
                     'write rate="5000Mbit"'),
])
def test_likely_unit_slips_warn_and_fail_with_strict(link, warning):
    topo = two_hosts(**link)
    warnings = validate(topo)
    assert [w.kind for w in warnings] == ["likely unit slip"]
    assert warning in warnings[0].message
    with pytest.raises(TopologyError, match="an error with --strict"):
        validate(topo, strict=True)
    assert validate(two_hosts(loss="1%", delay="2ms", rate="100Mbit")) == []
    with pytest.raises(TopologyError, match='rate 100 bit/s out of range .* write rate="100Mbit"'):
        validate(two_hosts(rate=100))
    # No such hint where Mbit/s would not make it a rate either.
    for rate in (-5, 0):
        with pytest.raises(TopologyError) as info:
            validate(two_hosts(rate=rate))
        assert [p for p in info.value.problems if "out of range" in p]
        assert not [p for p in info.value.problems if "Mbit\"" in p], info.value.problems


def test_a_cpu_mask_beyond_the_host_is_folded_with_a_warning():
    topo = two_hosts()
    topo.nodes["h1"].cpus = "4,5,6,7"
    (warning,) = validate(topo, host=HostInfo("xl", cpus=2))
    assert warning.message == ("node h1: cpu mask 4,5,6,7 names CPUs this host lacks (it has "
                               "2: 0-1); pinned to 0,1 instead (CPU n -> n mod 2)")
    assert validate(topo, host=HostInfo("xl", cpus=8)) == []
    from selena.plan import make_plan
    assert make_plan(topo, host_cpus=2).guest("h1").cpus == "0,1"
    assert make_plan(topo, host_cpus=8).guest("h1").cpus == "4,5,6,7"


def test_cpu_time_must_be_dilated_or_real():
    topo = two_hosts()
    topo.nodes["h1"].cpu_time = "slow"
    with pytest.raises(TopologyError, match="node h1: cpu_time 'slow': use 'dilated' or 'real'"):
        validate(topo)


def test_real_cpu_time_needs_a_cap_xen_can_express():
    topo = two_hosts()
    topo.tdf = 200
    topo.nodes["h1"].cpu_time = "real"
    with pytest.raises(TopologyError, match=r"node h1: cpu_time='real' with 1 vCPU\(s\) at TDF "
                       r"200 needs a cap of 0.50% .* \(TDF at most 100\)"):
        validate(topo)
    topo.nodes["h1"].vcpus = 4                    # 2% of a CPU for the domain: fine
    assert validate(topo) == []


def test_a_cpu_share_is_a_share_of_the_hosts_cpus_that_xen_can_cap():
    topo = two_hosts()
    topo.tdf = 10
    topo.nodes["h1"].cpu_share = 0.25
    assert validate(topo) == []                     # the host's CPUs unknown: not yet
    assert validate(topo, host=HostInfo("xl", cpus=8)) == []       # 20%: fine
    topo.tdf = 300
    with pytest.raises(TopologyError, match=r"node h1: cpu_share=0.25 of 8 CPUs at TDF 300 "
                       r"needs a cap of 0.67% of a CPU; Xen's smallest is 1% \(TDF at most "
                       r"200\)"):
        validate(topo, host=HostInfo("xl", cpus=8))
    topo.tdf = 40
    (warning,) = validate(topo, host=HostInfo("xl", cpus=2))
    assert warning.message == ("node h1: cpu_share=0.25 at TDF 40 needs 1.25% of a CPU; "
                               "Xen's cap is whole percent, so 1% (-20% CPU speed)")
    (warning,) = validate(topo, host=HostInfo("mininet", cpus=2))
    assert warning.message == ("node h1: cpu_share=0.25 is not applied by the Mininet baseline "
                               "(its hosts are processes): drop it to compare like with like")


@pytest.mark.parametrize("share,cpu_time,message", [
    (0.0, "dilated", "node h1: cpu_share 0 is not a share of the host's CPUs: give more than "
                     "0 and at most 1 (0.25: a quarter of them)"),
    (1.5, "dilated", "node h1: cpu_share 1.5 is not a share"),
    (-1.0, "dilated", "node h1: cpu_share -1 is not a share"),
    (0.5, "real", "node h1: cpu_time='real' and cpu_share=0.5 both cap its CPU time: give one"),
])
def test_a_cpu_share_out_of_range_or_beside_real_cpu_time_is_refused(share, cpu_time, message):
    topo = two_hosts()
    topo.nodes["h1"].cpu_share = share
    topo.nodes["h1"].cpu_time = cpu_time
    with pytest.raises(TopologyError, match=re.escape(message)):
        validate(topo, host=HOST)


def test_a_coarse_real_cpu_cap_is_a_warning():
    topo = two_hosts()
    topo.tdf = 64
    topo.nodes["h1"].cpu_time = "real"
    (warning,) = validate(topo)
    assert warning.message == ("node h1: cpu_time='real' at TDF 64 needs 1.56% of a CPU; "
                               "Xen's cap is whole percent, so 2% (+28% CPU speed)")
    topo.tdf = 10
    assert validate(topo) == []


# -- how many interfaces a guest takes ---------------------------------------------------


def _problems(topo, **kwargs):
    with pytest.raises(TopologyError) as info:
        validate(topo, **kwargs)
    return info.value


def test_the_interface_limit_follows_xenstore_and_the_grant_table():
    from selena.validate import MAX_SWITCH_PORTS, max_interfaces

    # 1 queue: Xenstore (1000 - 25 - 200) // 19 = 40, before grants' 32760 // 514 = 63;
    # queues (one per vCPU, up to 8) take grants and entries each.
    assert MAX_SWITCH_PORTS == max_interfaces(1) == 40
    assert [max_interfaces(v) for v in (2, 4, 8, 64)] == [31, 15, 7, 7]


@pytest.mark.parametrize("hosts", [100, 5000])
def test_a_switch_with_too_many_ports_is_one_problem_named_first(hosts):
    from selena.topologies import single

    error = _problems(single(hosts), host=HostInfo("xl", cpus=8, free_memory_mb=1_000_000))
    assert len(error.problems) == 1, error.problems[:5]
    assert error.problems[0].endswith(
        f"node s1: {hosts} interfaces on links; a Xen guest with 1 vCPU takes at most 40 "
        "(Xenstore's 1000 entries and 64 grant frames per domain): use several switches, "
        "e.g. a tree (--topo tree,DEPTH,FANOUT)")
    assert str(error).count("interfaces on links") == 1
    assert "\n" not in error.problems[0]


def test_the_limit_comes_first_before_other_real_problems():
    from selena.topologies import star

    topo = star(5000)
    topo.tdf = 0                        # an unrelated mistake, found in the same pass
    error = _problems(topo, host=HostInfo("xl", cpus=8, free_memory_mb=1024))
    kinds = [p.kind for p in error.details]
    assert kinds[0] == "too many interfaces"
    assert kinds.count("too many interfaces") == 1
    # nothing that follows from it: no index out of range, no repeated derived MAC
    assert set(kinds) == {"too many interfaces", "bad TDF", "not enough memory"}
    # the first line shown after the count
    assert "node s1: 5000 interfaces on links" in str(error).splitlines()[1]


def test_forty_ports_are_valid_and_the_limit_depends_on_vcpus():
    from selena.topologies import single

    validate(single(40))
    validate(single_with_vcpus(31, 2))
    error = _problems(single_with_vcpus(32, 2))
    assert "node s1: 32 interfaces on links; a Xen guest with 2 vCPUs takes at most 31" \
        in str(error)


def single_with_vcpus(hosts, vcpus):
    from selena.topologies import single

    topo = single(hosts)
    topo.nodes["s1"].vcpus = vcpus
    return topo


def test_a_host_with_too_many_links_is_told_to_take_fewer():
    topo = Topology("exp")
    router = topo.add_host("r1")
    for i in range(41):
        topo.add_link(router, topo.add_host(f"h{i}"))
    error = _problems(topo)
    assert "node r1: 41 interfaces on links; a Xen guest with 1 vCPU takes at most 40 " \
           "(Xenstore's 1000 entries and 64 grant frames per domain): give it fewer links" \
        in str(error)


def test_a_switch_of_40_ports_has_network_directives_that_fit_one_xenstore_value():
    from selena.control.protocol import SPEC_MAX_BYTES
    from selena.plan import make_plan
    from selena.topologies import single

    def net(hosts):
        return next(g for g in make_plan(single(hosts)).guests if g.node == "s1").net

    # Each port's name and queue length would take 2509 bytes; the default
    # queue lengths go once they would not fit (and only then: 3 ports keep them).
    big = net(40)
    assert len(big.encode()) <= SPEC_MAX_BYTES
    assert big.count("\nname ") + big.startswith("name ") == 40
    assert "txqueuelen" not in big
    assert net(3).count("txqueuelen") == 3


def test_network_directives_too_long_for_one_xenstore_value_are_named():
    # A router's name and address line per interface: 29 fit, 36 do not.
    validate(_router(29))
    error = _problems(_router(36))
    assert len(error.problems) == 1
    assert "node r1: its interface names, addresses, routes and static ARP entries take " \
           "2319 bytes, more than one Xenstore value holds (1920): give it fewer " \
           "interfaces, addresses or ARP entries" in error.problems[0]


def _router(interfaces):
    topo = Topology("exp")
    r = topo.add_host("r1")
    for i in range(interfaces):
        r.add_interface(i, f"10.{i}.0.1/24")
        topo.add_link((r, i), topo.add_host(f"h{i}", ip=f"10.{i}.0.2/24"))
    return topo


def test_more_nodes_than_xen_has_guest_domids_are_refused_before_anything(monkeypatch):
    """Xen's domids for guests end below DOMID_FIRST_RESERVED (0x7FF0): a
    topology of more nodes can never deploy, whatever the host's memory
    (`--topo linear,17000` is 34000). Mininet's namespaces have no such
    limit."""
    import selena.validate
    assert selena.validate.GUEST_DOMIDS_MAX == 0x7FF0 - 1
    monkeypatch.setattr(selena.validate, "GUEST_DOMIDS_MAX", 1)
    with pytest.raises(TopologyError) as info:
        validate(two_hosts(), templates={"tiny-host"}, host=HOST)
    assert str(info.value).splitlines()[1].strip() == (
        "experiment exp: 2 nodes, each a Xen guest; Xen runs at most 1 guests on a host: "
        "make the topology smaller")
    with pytest.raises(TopologyError, match="at most 1 guests"):
        validate(two_hosts())                   # nothing known of the host: Xen's limit
    validate(two_hosts(), host=HostInfo("mininet", cpus=2))
