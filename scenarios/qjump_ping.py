"""QJump in SELENA (seed 004), ping part, scaled to the lab: ping's round
trip on an idle network, beside bulk iperf traffic, and beside it with
priority queueing (the paper's Figure 13, at its TDF 20).

    selena lab build
    selena lab run -- selena run scenarios/qjump_ping.py --tdf 20 --out build/results/qjping
    selena lab run -- selena run scenarios/qjump_ping.py --tdf 20 --param prio=1 \\
        --out build/results/qjping-prio

Scaled to the lab, and stated: three of the paper's twelve hosts (ping from
H3 to H11, bulk iperf from H8 to H11, so both cross the switch port toward
H11; the paper's second stream, H1 to H12, shares no port with ping on one
switch and is left out) on one Open vSwitch guest; links of 100 Mbit/s
(the paper's 10 Gbit/s divided by 100) with its 0.02 ms of netem delay and
a queue per direction holding what the paper's 100 packets held at 10 Gbit/s
(0.12 ms: 2 packets with the delay line; selena.scaling; --param
paper_queue=1000 holds what 1000 packets held, 1.2 ms). With prio=1 each link direction
queues by IP precedence in strict-priority bands (selena/shaping/prio.py),
standing in for the QJump module, which Debian does not ship, and the
switch's priority queues; ping marks its packets with precedence 7
(`ping -Q 0xe0`, QJump's level 7) in every run, which only the priority
queue looks at.
"""

from selena.metrics import IPERF3_PORT, ping_rtts_ms
from selena.model import Topology
from selena.scaling import paper_queue_s, scaled_link
from selena.units import param_number

PINGS, INTERVAL_S = 200, 0.01
BULK_S = 8

# The scaling rule (docs/reproductions.md): the paper's 10 Gbit/s links divided
# by 100, its 100-packet switch queue kept as a time (0.12 ms), its netem delay.
PAPER_RATE, FACTOR = "10Gbit", 100
PAPER_QUEUE = 100


def link(paper_queue=PAPER_QUEUE):
    """The scaled link; --param paper_queue=1000 sizes its queue by Linux's
    default transmit queue at 10 Gbit/s (1.2 ms) rather than the switch's
    100 packets (0.12 ms): the paper's 1060 us beside iperf is about the
    former."""
    packets = param_number("paper_queue", paper_queue, 1, 10000, whole=True, unit="packets")
    return scaled_link(PAPER_RATE, FACTOR, queue_s=paper_queue_s(packets, PAPER_RATE),
                       delay="0.02ms")


HOSTS = (("h3", 3), ("h8", 8), ("h11", 11))


def build(prio="0", paper_queue=PAPER_QUEUE):
    prio = str(prio).lower() in ("1", "yes", "true")
    shaped = link(paper_queue)
    topology = Topology("qjpingp" if prio else "qjping", tdf=20)
    s1 = topology.add_switch("s1")
    for name, last in HOSTS:
        host = topology.add_host(name, ip=f"10.0.9.{last}/24", template="qjump-host")
        topology.add_link(host, s1, **shaped, prio=prio)
    return topology


PING = f"ping -Q 0xe0 -c {PINGS} -i {INTERVAL_S} -W 2 10.0.9.11"


def run(exp):
    exp.cmd("h3", "ping -c 3 -W 2 10.0.9.11", check=True)       # learn the path
    idle = exp.cmd("h3", PING, check=True)
    exp.record("ping_idle_rtt_us", [ms * 1000 for ms in ping_rtts_ms(idle.stdout)], unit="us")
    exp.start("h11", "exec iperf3 -s -1")
    exp.wait_listening("h11", IPERF3_PORT)
    bulk = exp.start("h8", f"iperf3 -c 10.0.9.11 -t {BULK_S}")
    exp.sleep(2)            # past slow start: the queue toward H11 is full
    shared = exp.cmd("h3", PING, check=True)
    exp.record("ping_bulk_rtt_us", [ms * 1000 for ms in ping_rtts_ms(shared.stdout)],
               unit="us")
    exp.wait(bulk, check=True)
