"""Two hosts through one Open vSwitch guest with no controller: the switch is
a standalone MAC-learning bridge (its kernel datapath forwards, its
ovs-vswitchd handles the misses).

    selena run scenarios/standalone_switch.py --tdf 5
"""

from selena.model import Topology

topology = Topology("ovsstandalone", tdf=5)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
s1 = topology.add_switch("s1")
topology.add_link(h1, s1, delay="1ms")
topology.add_link(h2, s1, delay="1ms")


def run(exp):
    exp.cmd("h1", "ping -c 5 -W 5 10.0.0.2", check=True)
    # The datapath's own counters: packets it forwarded from its flow cache
    # (hit) and those it sent up to ovs-vswitchd (missed) or could not (lost).
    exp.cmd("s1", "ovs-appctl dpctl/show | grep lookups", check=True)
