"""Two hosts over IPv6 (and IPv4): addresses, a default route and a static
neighbour entry from the topology, set up by the guest agents at boot.

    selena run scenarios/ipv6_pair.py --tdf 5
"""

from selena.model import Topology

topology = Topology("ipv6", tdf=5)
h1 = topology.add_host("h1", ip="10.0.6.1/24", ip6="fd00:6::1/64", gateway6="fd00:6::fe")
h2 = topology.add_host("h2", ip="10.0.6.2/24", ip6="fd00:6::2/64")
topology.add_link(h1, h2, delay="2ms")
# h1 knows h2's link-layer address without neighbour discovery (the paper's setArp).
topology.add_static_arp(h1, 0, "fd00:6::2", topology.mac_of(h2, h2.interfaces[0]))


def run(exp):
    exp.cmd("h1", "ping -6 -c 3 -W 5 fd00:6::2", check=True)
    exp.cmd("h2", "ping -6 -c 3 -W 5 fd00:6::1", check=True)
    exp.cmd("h1", "ping -c 1 -W 5 10.0.6.2", check=True)
    exp.cmd("h1", "ip -6 addr show dev eth0; ip -6 route; ip -6 neigh show dev eth0")
