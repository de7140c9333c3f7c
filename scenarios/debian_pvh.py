"""A Debian guest booted as PVH: Debian's own kernel and systemd in an HVM
container (add_host(..., template="debian", virt="pvh")), beside a tiny PV
host, on a 40 ms link at TDF 5. The guest says what it runs as and pings
its neighbour; the TDF changes to 10 and the ping is repeated.

    selena run scenarios/debian_pvh.py --out results/debian-pvh

Records rtt_ms (at TDF 5, expected 80 ms) and rtt_ms_tdf10 (after the
change, the same 80 ms of guest time).
"""

import re

from selena.model import Topology

DELAY_MS = 40

topology = Topology("debpvh", tdf=5)
d1 = topology.add_host("d1", ip="10.0.0.1/24", template="debian", virt="pvh")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(d1, h2, delay=f"{DELAY_MS}ms")


def _rtts(exp, count):
    out = exp.cmd("d1", f"ping -c {count} -i 0.2 -W 5 10.0.0.2", check=True)
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", out.stdout.decode())]


def run(exp):
    # The kernel's own word for its guest type, and that systemd came up.
    exp.cmd("d1", "cat /sys/hypervisor/guest_type; uname -sr; "
                  "systemctl is-system-running || true", check=True)
    exp.cmd("d1", "ping -c 2 -W 5 10.0.0.2")            # ARP first
    exp.record("rtt_ms", _rtts(exp, 8), expected=2 * DELAY_MS, unit="ms")
    exp.set_tdf(10)
    exp.record("rtt_ms_tdf10", _rtts(exp, 8), expected=2 * DELAY_MS, unit="ms")
