"""A full Debian guest serving a tiny host: memcached from Debian's archive,
installed in an image variant of the debian template, on a 2-vCPU guest
that boots Debian's own kernel and systemd.

    selena lab build --scenario scenarios/debian_memcached.py   # the variant, once
    selena run scenarios/debian_memcached.py --tdf 5

The image with memcached is built once, where Debian's mirror is reachable,
and cached by its package list; the experiment only finds it.
"""

from selena.model import Topology

topology = Topology("debmc", tdf=5)
m1 = topology.add_host("m1", ip="10.0.7.2/24", ip6="fd00:7::2/64", template="debian",
                       packages=["memcached"], vcpus=2)
h1 = topology.add_host("h1", ip="10.0.7.1/24", ip6="fd00:7::1/64")
topology.add_link(h1, m1, rate="100Mbit", delay="1ms")
# The tiny host knows the server's link-layer address without ARP.
topology.add_static_arp(h1, 0, "10.0.7.2", topology.mac_of(m1, m1.interfaces[0]))

REQUEST = r"printf 'set greeting 0 0 5\r\nhello\r\nget greeting\r\nquit\r\n'"


def run(exp):
    # Debian's memcached listens on localhost; open it to the link and let
    # systemd restart it, as on any Debian host. The unit is "active" as soon
    # as the daemon is started, before it listens: wait for the socket.
    exp.cmd("m1", "sed -i 's/^-l 127.0.0.1/-l 0.0.0.0/' /etc/memcached.conf && "
                  "systemctl restart memcached && systemctl is-active memcached && "
                  "for i in $(seq 100); do ss -ltn | grep -q ':11211 ' && exit 0; sleep 0.1; "
                  "done; exit 1", check=True)
    exp.cmd("m1", "nproc; uname -sr; systemctl is-system-running || true; "
                  "ip -br addr show dev eth0; ss -ltn", check=True)
    exp.cmd("h1", f"{REQUEST} | nc -w 5 10.0.7.2 11211", check=True)
    exp.cmd("h1", "ping -6 -c 3 -W 5 fd00:7::2", check=True)
