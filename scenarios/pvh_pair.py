"""Two PVH hosts (add_host(..., virt="pvh")) on an 80 ms link at TDF 6:
everything a PV node does, in the guest type Xen distributions without PV
run. A ping across the link, a change of TDF to 3 and back (exp.set_tdf), a
pause and a resume of the whole experiment (its clocks frozen meanwhile),
another ping, then h2 crashed (exp.crash) and h1's ping to it failing.
`--param virt=hvm` makes them HVM hosts instead (experiment hvmpair).

    selena run scenarios/pvh_pair.py --out results/pvh-pair
    selena run scenarios/pvh_pair.py --param virt=hvm --out results/hvm-pair

Records rtt_ms (the pings at TDF 6, expected 160 ms), rtt_ms_tdf3 (at TDF 3)
and ping_after_crash_exit (ping's exit status once h2 is gone: 1).
"""

import re
import time

from selena.model import Topology

# Long enough that the lab's own latency (2-4 ms of guest time at TDF 6
# on a slow lab machine) stays a small share of the round trip.
DELAY_MS = 80
PAUSE_REAL_S = 2.0



def build(virt="pvh"):
    topology = Topology(f"{virt}pair", tdf=6)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", virt=virt)
    h2 = topology.add_host("h2", ip="10.0.0.2/24", virt=virt)
    topology.add_link(h1, h2, delay=f"{DELAY_MS}ms")
    return topology


def _rtts(exp, count):
    out = exp.cmd("h1", f"ping -c {count} -i 0.2 -W 5 10.0.0.2", check=True)
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", out.stdout.decode())]


def run(exp):
    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")           # ARP first
    rtts = _rtts(exp, 8)
    exp.set_tdf(3)
    rtts_tdf3 = _rtts(exp, 4)
    exp.set_tdf(6)
    exp.pause()
    time.sleep(PAUSE_REAL_S)
    exp.resume()
    rtts += _rtts(exp, 8)
    exp.record("rtt_ms", rtts, expected=2 * DELAY_MS, unit="ms")
    exp.record("rtt_ms_tdf3", rtts_tdf3, expected=2 * DELAY_MS, unit="ms")
    exp.crash("h2")
    lost = exp.cmd("h1", "ping -c 2 -W 2 10.0.0.2")
    exp.record("ping_after_crash_exit", lost.exit_code or 0)
