"""Exact tc commands for link shaping at several TDFs and both placements."""

import pytest

from selena.model import Topology
from selena.shaping import Placement, shaping_commands


def link(**kw):
    topo = Topology("t")
    return topo.add_link(topo.add_host("a", ip="10.0.0.1/24"),
                         topo.add_host("b", ip="10.0.0.2/24"), **kw)


@pytest.mark.parametrize("tdf,rate,delay,jitter", [
    (1, "100000000bit", "10000us", "1000us"),
    (2.5, "40000000bit", "25000us", "2500us"),
    (10, "10000000bit", "100000us", "10000us"),
])
def test_dom0_placement_scales_time_but_not_queue_or_loss(tdf, rate, delay, jitter):
    cmds = shaping_commands("vif3.0", link(rate="100Mbit", delay="10ms", jitter="1ms",
                                           loss="1%", queue=50), tdf)
    assert cmds == [
        ["tc", "qdisc", "replace", "dev", "vif3.0", "root", "handle", "1:", "htb",
         "default", "1"],
        ["tc", "class", "replace", "dev", "vif3.0", "parent", "1:", "classid", "1:1", "htb",
         "rate", rate, "ceil", rate, "burst", cmds[1][-3], "cburst", cmds[1][-1]],
        ["tc", "qdisc", "replace", "dev", "vif3.0", "parent", "1:1", "handle", "10:",
         "netem", "limit", "50", "delay", delay, jitter, "loss", "1%"],
    ]


def test_guest_placement_is_not_scaled():
    cmds = shaping_commands("eth0", link(delay="10ms"), 10, Placement.GUEST)
    assert cmds == [["tc", "qdisc", "replace", "dev", "eth0", "root", "handle", "1:",
                     "netem", "delay", "10000us"]]


def test_an_unshaped_link_needs_no_commands():
    assert shaping_commands("vif1.0", link(), 10) == []


def test_burst_covers_a_full_frame_at_low_rates():
    cmds = shaping_commands("vif1.0", link(rate="1Mbit"), 10)
    assert cmds[1][cmds[1].index("burst") + 1] == "1600b"


def test_reshaping_changes_the_class_and_netem_but_leaves_the_htb_root():
    # The kernel's htb has no change operation: replacing its root with another
    # htb fails ("Change operation not supported"), so a TDF change must not.
    first = shaping_commands("vif1.0", link(rate="10Mbit", delay="5ms"), 2)
    again = shaping_commands("vif1.0", link(rate="10Mbit", delay="5ms"), 10, reshape=True)
    assert first[0][5:] == ["root", "handle", "1:", "htb", "default", "1"]
    assert [c[:3] for c in again] == [["tc", "class", "replace"], ["tc", "qdisc", "replace"]]
    assert "1000000bit" in again[0] and "50000us" in again[1]


def test_reshaping_a_delay_only_link_replaces_its_netem_root():
    assert shaping_commands("vif1.0", link(delay="5ms"), 10, reshape=True) == [
        ["tc", "qdisc", "replace", "dev", "vif1.0", "root", "handle", "1:",
         "netem", "delay", "50000us"]]


def test_a_priority_link_queues_by_ip_precedence_in_three_bands_each_with_the_netem():
    cmds = shaping_commands("vif3.0", link(rate="100Mbit", delay="0.02ms", queue=100,
                                           prio=True), 10)
    assert cmds[2] == ["tc", "qdisc", "replace", "dev", "vif3.0", "parent", "1:1", "handle",
                       "10:", "prio", "bands", "3", "priomap", *["2"] * 16]
    filters = [c for c in cmds if c[1] == "filter"]
    # Precedence 6-7 to band 1 (served first), 4-5 to band 2, IPv4 and IPv6.
    assert [(c[c.index("protocol") + 1], c[c.index("match") + 1:c.index("flowid")],
             c[-1]) for c in filters] == [
        ("ip", ["ip", "tos", "0xc0", "0xc0"], "10:1"),
        ("ipv6", ["ip6", "priority", "0xc0", "0xc0"], "10:1"),
        ("ip", ["ip", "tos", "0x80", "0xc0"], "10:2"),
        ("ipv6", ["ip6", "priority", "0x80", "0xc0"], "10:2")]
    assert all(c[:7] == ["tc", "filter", "replace", "dev", "vif3.0", "parent", "10:"]
               for c in filters)
    netems = [c for c in cmds if "netem" in c]
    assert [c[c.index("parent") + 1:c.index("netem")] for c in netems] == [
        ["10:1", "handle", "21:"], ["10:2", "handle", "22:"], ["10:3", "handle", "23:"]]
    # Each band has the link's (scaled) delay and queue limit.
    assert all(c[c.index("netem") + 1:] == ["limit", "100", "delay", "200us"] for c in netems)
    # A TDF change rescales the class and the bands' netems, nothing else.
    again = shaping_commands("vif3.0", link(rate="100Mbit", delay="0.02ms", queue=100,
                                            prio=True), 20, reshape=True)
    assert [c[1] for c in again] == ["class", "qdisc", "qdisc", "qdisc"]
    assert all(c[-1] == "400us" for c in again[1:])


def test_a_priority_link_needs_a_rate():
    from selena.errors import TopologyError
    from selena.validate import validate

    topo = Topology("t")
    topo.add_link(topo.add_host("a", ip="10.0.0.1/24"), topo.add_host("b", ip="10.0.0.2/24"),
                  delay="1ms", prio=True)
    with pytest.raises(TopologyError, match=r"link a:eth0--b:eth0: prio needs a rate"):
        validate(topo)


def test_dom0_image_has_a_module_for_every_qdisc_and_classifier_shaping_uses():
    from selena.lab.build import DOM0_MODULES

    cmds = shaping_commands("vif3.0", link(rate="100Mbit", delay="1ms", prio=True), 10)
    cmds += shaping_commands("vif3.1", link(delay="1ms", jitter="0.1ms"), 10)
    kinds = {c[c.index(k) + 1] for c in cmds for k in ("10:", "1:", "21:", "22:", "23:")
             if c[1] == "qdisc" and k in c and c.index(k) + 1 < len(c)
             and c[c.index(k) - 1] == "handle"}
    classifiers = {c[c.index("pref") + 2] for c in cmds if c[1] == "filter"}
    assert kinds == {"htb", "prio", "netem"} and classifiers == {"u32"}
    missing = [m for m in [f"sch_{k}" for k in kinds] + [f"cls_{c}" for c in classifiers]
               if m not in DOM0_MODULES]
    assert missing == [], f"Dom0 cannot load {missing}"
