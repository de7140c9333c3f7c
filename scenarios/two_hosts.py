"""Two hosts on one 100 Mbit/s link with 5 ms one-way delay (clean API)."""

from selena.model import Topology

topology = Topology("twohosts", tdf=10)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(h1, h2, rate="100Mbit", delay="5ms")
