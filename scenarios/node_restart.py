"""A node restarted mid-run: pings from h1 to h2 (a 120 ms round trip)
before and after `exp.node(N).restart()`, with the TDF changed from 10 to
12 in between, so that the restarted guest must come back at the TDF the
run has then, not the topology's. N is h2 (`--param node=h2`, the default:
the two hosts over one 60 ms link) or the Open vSwitch guest between them
(`--param node=s1`: h1 - s1 - h2, 30 ms a link), which must come back with
its bridge and ports.

A restart is a power cycle: the node's domain is destroyed and created
again as deployed, its vifs shaped as the links are now, its agent ready
again. What the run records shows each of those:

- rtt_ms_before, rtt_ms_after: ping's round trips (against 120 ms): the
  links shaped again at the current TDF (shaping left at the topology's
  TDF 10 while the guests run at 12 would give 100 ms), and through s1, its
  bridge set up again;
- clock_rate: how fast the restarted node's own clock (/proc/uptime) runs
  against the run's virtual time over 2 virtual seconds after the restart
  (1 when its new domain has the run's TDF; 1.2 if it kept the topology's
  10, 12 if it got none);
- uptime_after_s: its uptime once it is back (virtual seconds since its
  kernel started: a fresh boot's, not the old guest's);
- running_command_lost: 1 when the command left running on it across the
  restart ended `lost` with "node N restarted";
- wall_clock_apart_s: its wall clock (`date`) against h1's, which ran
  throughout: the restarted node's read between two of h1's, less their
  midpoint (0 when its clock started at the others' virtual time; a new
  domain's clock reads real time until its TDF is set, so it would be
  ahead by about the real time the run gained on virtual time), with
  wall_clock_bracket_s, how far apart h1's two readings were.

The links are rate-limited (10 Mbit/s), so the fidelity monitor checks
packet spacing on them in windows, which must go on after the restart.

`--param crash=yes` crashes the node first (`exp.node(N).crash()`) and
leaves it down for a virtual second (12 real ones: a spacing window opens
on its vifs, which are gone, and fails) before restarting it; the command
left running on it ends `lost` with the crash.

    selena run scenarios/node_restart.py --out results/node-restart
    selena run scenarios/node_restart.py --param node=s1 --out results/switch-restart
    selena run scenarios/node_restart.py --param virt=pvh --out results/pvh-restart
    selena run scenarios/node_restart.py --param virt=hvm --out results/hvm-restart
    selena run scenarios/node_restart.py --param crash=yes --out results/crash-restart

tests/lab/test_node_restart_e2e.py runs all five.
"""

import re

from selena.model import Topology

TDF_BEFORE, TDF_AFTER = 10, 12
# h1 to h2. Long enough that the lab's own latency (up to 35 ms real,
# 3 virtual at TDF 12, through s1 on a slow lab machine) stays well
# inside the 5 % the test allows.
ONE_WAY_MS = 60
RATE = "10Mbit"
PINGS = 15
PING_INTERVAL_S = 0.2
CRASHED_S = 1.0             # virtual seconds down between a crash and the restart


def build(node="h2", virt="pv", crash="no"):
    """`--param virt=pvh` (or hvm): the hosts are PVH (HVM) guests; `--param crash=yes`:
    the node crashes before its restart (run reads it)."""
    if node not in ("h2", "s1"):
        raise ValueError(f"node={node!r}: want h2 (a host) or s1 (the switch between the "
                         "hosts)")
    if crash not in ("yes", "no"):
        raise ValueError(f"crash={crash!r}: want yes or no")
    topology = Topology("noderestart", tdf=TDF_BEFORE)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", virt=virt)
    h2 = topology.add_host("h2", ip="10.0.0.2/24", virt=virt)
    # A rate too: the fidelity monitor's packet-spacing windows watch these
    # vifs, and must pass over the restart (a ping's frames take 0.07 ms).
    if node == "h2":
        topology.add_link(h1, h2, rate=RATE, delay=f"{ONE_WAY_MS}ms")
    else:
        s1 = topology.add_switch("s1")
        topology.add_link(h1, s1, rate=RATE, delay=f"{ONE_WAY_MS / 2:g}ms")
        topology.add_link(s1, h2, rate=RATE, delay=f"{ONE_WAY_MS / 2:g}ms")
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


def wall_clock(exp, node):
    """The node's wall clock (CLOCK_REALTIME), seconds: busybox's `date`
    has no %N, but a file's modification time, which the kernel stamps from
    that clock (to its tick), is printed to the nanosecond."""
    out = exp.cmd(node, "touch /tmp/now && stat -c '%Y %y' /tmp/now",
                  check=True).stdout.decode().split()
    return int(out[0]) + float("0." + (out[2].partition(".")[2] or "0"))


def run(exp):
    node = exp.params.get("node", "h2")
    before = pings(exp)
    left_running = exp.start(node, "sleep 600")
    exp.set_tdf(TDF_AFTER)
    crash = exp.params.get("crash", "no") == "yes"
    if crash:
        exp.node(node).crash()
        exp.sleep(CRASHED_S)
    exp.node(node).restart()
    ended = exp.wait(left_running)
    lost = ended.state == "lost" and (crash or ended.detail == f"node {node} restarted")
    exp.record("running_command_lost", 1.0 if lost else 0.0, expected=1.0)
    exp.record("uptime_after_s", uptime(exp, node), unit="s")
    other = "h1"
    first, theirs, last = wall_clock(exp, other), wall_clock(exp, node), wall_clock(exp, other)
    exp.record("wall_clock_apart_s", theirs - (first + last) / 2, expected=0.0, unit="s")
    exp.record("wall_clock_bracket_s", last - first, unit="s")
    start, first = exp.now(), uptime(exp, node)
    exp.sleep(2.0)
    rate = (uptime(exp, node) - first) / (exp.now() - start)
    exp.record("clock_rate", rate, expected=1.0)
    exp.record("rtt_ms_before", before, expected=2 * ONE_WAY_MS, unit="ms")
    exp.record("rtt_ms_after", pings(exp), expected=2 * ONE_WAY_MS, unit="ms")
