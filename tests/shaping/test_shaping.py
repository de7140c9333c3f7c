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
