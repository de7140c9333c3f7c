"""A node restarted mid-run: two hosts over one link of 30 ms one-way delay,
pings before and after `exp.node("h2").restart()`, with the TDF changed
from 10 to 12 in between, so that the restarted guest must come back at the
TDF the run has then, not the topology's.

A restart is a power cycle: h2's domain is destroyed and created again as
deployed, its vif shaped as the link is now, its agent ready again. What
the run records shows each of those:

- rtt_ms_before, rtt_ms_after: ping's round trips (against 2 x 30 ms): the
  link shaped again at the current TDF (shaping left at the topology's TDF
  10 while the guests run at 12 would give 50 ms);
- h2_clock_rate: how fast h2's own clock (/proc/uptime) runs against the
  run's virtual time over 2 virtual seconds after the restart (1 when its
  new domain has the run's TDF; 1.2 if it kept the topology's 10, 12 if it
  got none);
- h2_uptime_after_s: h2's uptime once it is back (virtual seconds since its
  kernel started: a fresh boot's, under a second in the lab, not the old
  guest's);
- running_command_lost: 1 when the command left running on h2 across the
  restart ended `lost` with "node h2 restarted".

    selena run scenarios/node_restart.py --out results/node-restart

tests/lab/test_node_restart_e2e.py runs it.
"""

import re

from selena.model import Topology

TDF_BEFORE, TDF_AFTER = 10, 12
DELAY_MS = 30
PINGS = 15
PING_INTERVAL_S = 0.2


def build():
    topology = Topology("noderestart", tdf=TDF_BEFORE)
    h1 = topology.add_host("h1", ip="10.0.0.1/24")
    h2 = topology.add_host("h2", ip="10.0.0.2/24")
    topology.add_link(h1, h2, delay=f"{DELAY_MS}ms")
    return topology


def rtts(text):
    """ping's round trips (busybox's `seq=`, or iputils' `icmp_seq=`), ms."""
    return [float(t) for t in re.findall(r"seq=\d+ ttl=\d+ time=([\d.]+) ms", text)]


def pings(exp):
    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")          # ARP first (h2 may be new)
    result = exp.cmd("h1", f"ping -c {PINGS} -i {PING_INTERVAL_S} -W 5 10.0.0.2",
                     timeout=PINGS * PING_INTERVAL_S + 60, check=True)
    return rtts(result.stdout.decode())


def uptime(exp, node):
    return float(exp.cmd(node, "cat /proc/uptime", check=True).stdout.split()[0])


def run(exp):
    before = pings(exp)
    left_running = exp.start("h2", "sleep 600")
    exp.set_tdf(TDF_AFTER)
    exp.node("h2").restart()
    ended = exp.wait(left_running)
    lost = ended.state == "lost" and ended.detail == "node h2 restarted"
    exp.record("running_command_lost", 1.0 if lost else 0.0, expected=1.0)
    exp.record("h2_uptime_after_s", uptime(exp, "h2"), unit="s")
    start, first = exp.now(), uptime(exp, "h2")
    exp.sleep(2.0)
    rate = (uptime(exp, "h2") - first) / (exp.now() - start)
    exp.record("h2_clock_rate", rate, expected=1.0)
    exp.record("rtt_ms_before", before, expected=2 * DELAY_MS, unit="ms")
    exp.record("rtt_ms_after", pings(exp), expected=2 * DELAY_MS, unit="ms")
