"""Two hosts, one link, one ping: the smallest complete scenario.

    selena run scenarios/ping_pair.py --tdf 5
    selena run scenarios/ping_pair.py --warm      # reuse pooled guests, pool them after
"""

from selena.model import Topology

topology = Topology("pingpair", tdf=5)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(h1, h2, delay="1ms")


def run(exp):
    exp.cmd("h1", "ping -c 3 -W 5 10.0.0.2", check=True)
