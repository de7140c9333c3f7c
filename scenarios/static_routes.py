"""A ring of three Open vSwitch guests forwarding by static flows.

Three switches in a loop, one host on each. Learning bridges would flood
around the ring forever (or need the spanning tree, which cuts one link);
with static flows (`node.flows`, ovs-ofctl syntax, port N = interface index
+ 1) each switch sends IPv4 and ARP for a host straight to that host's
switch, so every link carries traffic and nothing floods.

    selena run scenarios/static_routes.py --tdf 5

h1 and h2 ping each other first; s3, off their path, must not have seen
their packets (its flow counters are printed); then every pair pings.
"""

from selena.model import Topology

topology = Topology("ring", tdf=5)
switches = [topology.add_switch(f"s{k}") for k in (1, 2, 3)]
hosts = [topology.add_host(f"h{k}", ip=f"10.0.0.{k}/24") for k in (1, 2, 3)]
for host, switch in zip(hosts, switches, strict=True):
    topology.add_link(host, switch, delay="1ms")
for k in range(3):
    topology.add_link(switches[k], switches[(k + 1) % 3], delay="1ms")


for k, switch in enumerate(switches, start=1):
    ports = topology.openflow_ports(switch)          # neighbour -> port (index + 1)
    for j in (1, 2, 3):
        out = ports[f"h{j}" if j == k else f"s{j}"]
        switch.flows += [f"priority=10,ip,nw_dst=10.0.0.{j},actions=output:{out}",
                         f"priority=10,arp,arp_tpa=10.0.0.{j},actions=output:{out}"]


def run(exp):
    exp.cmd("h1", "ping -c 3 -W 5 10.0.0.2", check=True)
    exp.cmd("h2", "ping -c 3 -W 5 10.0.0.1", check=True)
    exp.cmd("s3", "ovs-ofctl -O OpenFlow13 dump-flows br0", check=True)
    for a in (1, 2, 3):
        for b in (1, 2, 3):
            if a != b:
                exp.cmd(f"h{a}", f"ping -c 2 -W 5 10.0.0.{b}", check=True)
