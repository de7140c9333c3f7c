"""QJump in SELENA (seed 004), PTPd part, scaled to the lab: the largest
clock offset PTPd leaves on a slave, on an idle network and while bulk
traffic shares the slave's link (the paper's Table I).

    selena lab build
    selena lab run -- selena run scenarios/qjump_ptpd.py --tdf 10 --out build/results/qjump-ptpd-10
    ... --tdf 50 --param settle_s=15 --param idle_s=10 --param bulk_s=10   (shorter windows)

Scaled to the lab, and stated: three of the paper's twelve hosts (H1 the
PTP slave, H8 the master, as in the paper, and H12 the source of the bulk
traffic) on one Open vSwitch guest; links of 100 Mbit/s (the paper's
10 Gbit/s divided by 100) with its 0.02 ms of netem delay and its queue
time (selena.scaling); iperf3 bulk
traffic from H12 to H1 stands in for Hadoop's shuffle, whose traffic
crossed H1's link in the paper; the master sends 4 Sync messages a second
(PTPd's default is 1) so that the short windows hold enough samples. The
offsets are in the slave's metrics.json (`ptpd_max_abs_offset_*_us`, and
the timeline as `ptpd_offset_us`).
"""

from selena.analysis.ptpd import offsets, window_maxima
from selena.model import Topology
from selena.scaling import paper_queue_s, scaled_link
from selena.units import param_number

# Virtual seconds: PTPd's first convergence (left out, as the paper left
# out its synchronisation period), then idle, then with bulk traffic
# (--param settle_s=, idle_s=, bulk_s=: shorter windows for high TDFs).
# The scaling rule (docs/reproductions.md), as in qjump_ping.py.
PAPER_RATE, FACTOR = "10Gbit", 100
LINK = scaled_link(PAPER_RATE, FACTOR, queue_s=paper_queue_s(100, PAPER_RATE), delay="0.02ms")
WINDOWS_S = {"settle_s": 10.0, "idle_s": 20.0, "bulk_s": 20.0}


def windows(params) -> tuple[float, float, float]:
    """(settle, idle, bulk) virtual seconds from the run's params."""
    chosen = [param_number(name, params.get(name, default), 1, 600, unit="virtual seconds")
              for name, default in WINDOWS_S.items()]
    return chosen[0], chosen[1], chosen[2]


def build(**params):
    windows(params)                     # refused before anything is created
    unknown = set(params) - set(WINDOWS_S)
    if unknown:
        raise ValueError(f"unknown --param {', '.join(sorted(unknown))} (have "
                         f"{', '.join(WINDOWS_S)})")
    topology = Topology("qjptp", tdf=10)
    s1 = topology.add_switch("s1")
    for name, last in (("h1", 1), ("h8", 8), ("h12", 12)):
        host = topology.add_host(name, ip=f"10.0.8.{last}/24", template="qjump-host")
        topology.add_link(host, s1, **LINK)
    return topology


def _clock(exp, node):
    """The node's own clock (epoch seconds), the one PTPd timestamps with."""
    return float(exp.cmd(node, "date +%s.%N", check=True).stdout)


def run(exp):
    settle_s, idle_s, bulk_s = windows(exp.params)
    master = exp.start("h8", "exec ptpd -M -i eth0 -C --ptpengine:log_sync_interval=-2")
    slave = exp.start("h1", "exec ptpd -s -i eth0 -V")
    exp.start("h1", "exec iperf3 -s -1")
    exp.sleep(settle_s)
    idle_from = _clock(exp, "h1")
    exp.sleep(idle_s)
    bulk_from = _clock(exp, "h1")
    exp.cmd("h12", f"iperf3 -c 10.0.8.1 -t {bulk_s:g}", check=True)
    bulk_to = _clock(exp, "h1")
    exp.kill(slave)
    exp.kill(master)
    samples = offsets(exp.wait(slave).stdout.decode(errors="replace").splitlines())
    # A clock step late in the settling time (a slave booted over a second
    # off) starts the idle window after it.
    idle, bulk = window_maxima(samples, idle_from, bulk_from, bulk_to)
    exp.record("ptpd_max_abs_offset_idle_us", idle, unit="us")
    exp.record("ptpd_max_abs_offset_bulk_us", bulk, unit="us")
    exp.record("ptpd_offset_us", [s.offset_s * 1e6 for s in samples if s.t >= idle_from],
               unit="us")
