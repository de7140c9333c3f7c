"""VT-Mininet's adaptive-TDF experiment (seed 002, "Adaptive TDF
Scheduling") on SELENA's star, scaled to the lab: quiet and busy phases.

VT-Mininet ran one TCP flow, then five, then one (50, 100 and 50 s) and
compared TDF 1, a fixed TDF and its adaptive scheduler: 46 % less running
time than the fixed TDF, with little loss of accuracy. Here: one flow, then
four, then one (FLOWS), PHASE_S virtual seconds each, from clients h1..h4
through one Open vSwitch guest to a sink (srv); `selena reproduce adaptive`
runs it at fixed TDFs (a sweep) and with `--tdf auto:MIN-MAX`.

Scaling rule (selena.scaling): the paper star's 1 Gbit/s clients and
10 Gbit/s sink divided by 100: 10 Mbit/s per client, 100 Mbit/s to the sink
(which four clients never fill, so the probe's echoes find no standing
queue there). Delays are times, kept: the clients' links 60 ms, the sink's
and the probe host's 50 ms, so that probe-srv is the topology's smallest
round trip (200 ms), the pair the fidelity monitor's latency signal pings
too: a client's own link holds a full queue of its flow, which every echo
over it would wait in. Queues: the paper's 12 ms, but a client's link holds
its flow's round trip (220 ms at 10 Mbit/s, the bandwidth-delay product):
with 12 ms, 6% of it, a flow halved by a loss took some 15 s to fill its
link again, so its rate depended on when its losses fell (28% short at TDF
16 in the lab with the monitor's verdict ok), not on the emulation's
fidelity. With a buffer of the product a flow keeps its link full after a
loss, so "flows x the link rate" is what a faithful run carries.

The flows (TRANSPORT): constant-rate UDP by default, each client sending
UDP_MBIT of payload in UDP_BYTES datagrams (9.27 Mbit/s of frames on its
10 Mbit/s link): what a faithful run delivers is then known, flows x
UDP_MBIT, and a shortfall is the emulation's. VT-Mininet's TCP flows
(transport=tcp) are no such reference here: three identical TCP flows
starting together overshoot together in slow start and stall together in
retransmission timeouts, 28-34 % short at TDF 4, 8 and 16 alike in the lab
with the verdict ok, so "flows x the link rate" is an upper bound for them,
not what a faithful run carries.

Recorded per phase i (1-based), against the configured values:

- phase<i>_mbit: the sink's received rate in 1 s windows (iperf3's
  0.5 s reports, summed over the flows), past the phase's first SETTLE_S
  seconds (TCP's slow start, the TDF settling) and before its last TAIL_S;
  expected: the flows x UDP_MBIT (UDP), or the flows x the client link
  rate less headers (TCP: 1448 of 1514, an upper bound);
- phase<i>_rtt_ms: probe -> srv pings every 0.5 s over the same span;
  expected: the configured round trip;
- phase_bounds_s: the virtual start of each phase and the end of the last
  (the reproduction's real time per phase comes from meta.json's TDF
  timeline at these instants); phase_flows: the flows of each phase.

    selena run scenarios/adaptive_phases.py --tdf auto:1-16
    selena sweep scenarios/adaptive_phases.py --tdf 1,2,4,8,16 --out results/phases
    selena run scenarios/adaptive_phases.py --tdf 8 --param transport=tcp
"""

import json

from selena.metrics import ping_rtts_ms
from selena.model import Topology
from selena.scaling import LINUX_QUEUE_S_AT_1GBIT, scaled_link

FLOWS = "1,4,1"            # flows in each phase
PHASE_S = 20.0             # virtual seconds per phase
FACTOR = 100               # the paper's rates divided by this
CLIENT_DELAY_MS = 60
NEAR_DELAY_MS = 50         # the sink's and the probe's links
SETUP_S = 3.0              # virtual second the first phase starts at
SETTLE_S = 2.0
TAIL_S = 1.0
WINDOW_S = 1.0
REPORT_S = 0.5             # iperf3's report interval
PING_S = 0.5
TCP_SHARE = 1448 / 1514
TRANSPORT = "udp"
UDP_MBIT = 9.0             # each client's UDP payload rate
UDP_BYTES = 1400           # payload per datagram: 1442-byte frames
SERVER_IP = "10.0.0.100"
PROBE_IP = "10.0.0.99"


def phases_of(flows=FLOWS):
    """'1,4,1' as [1, 4, 1]; a one-line ValueError otherwise."""
    try:
        out = [int(x) for x in str(flows).split(",")]
    except ValueError:
        out = []
    if not out or any(not 1 <= k <= 8 for k in out):
        raise ValueError(f"flows={flows!r}: want the flows of each phase, 1 to 8 each, "
                         "e.g. 1,4,1")
    return out


def transport_of(transport=TRANSPORT):
    """'udp' or 'tcp'; a one-line ValueError otherwise."""
    if str(transport) not in ("udp", "tcp"):
        raise ValueError(f"transport={transport!r}: want udp (constant rate, the default) or "
                         "tcp (VT-Mininet's flows)")
    return str(transport)


def client_argv(transport, port, duration):
    """One client's iperf3 command line."""
    argv = ["iperf3", "-c", SERVER_IP, "-p", str(port), "-t", f"{duration:g}", "-i", "0"]
    if transport == "udp":
        argv += ["-u", "-b", f"{UDP_MBIT:g}M", "-l", str(UDP_BYTES)]
    return argv


def build(flows=FLOWS, phase_s=PHASE_S, transport=TRANSPORT):
    transport_of(transport)
    clients = max(phases_of(flows))
    if not 3 * (SETTLE_S + TAIL_S) <= float(phase_s) <= 600:
        raise ValueError(f"phase_s={phase_s}: want {3 * (SETTLE_S + TAIL_S):g} to 600 "
                         "virtual seconds")
    topology = Topology("phases", tdf=1)
    switch = topology.add_switch("s1")
    queue = {"queue_s": LINUX_QUEUE_S_AT_1GBIT}
    server = topology.add_host("srv", ip=f"{SERVER_IP}/24", template="tools-host")
    topology.add_link(server, switch, **scaled_link("10Gbit", FACTOR, **queue,
                                                    delay=f"{NEAR_DELAY_MS}ms"))
    probe = topology.add_host("probe", ip=f"{PROBE_IP}/24", template="tools-host")
    topology.add_link(probe, switch, **scaled_link("1Gbit", FACTOR, **queue,
                                                   delay=f"{NEAR_DELAY_MS}ms"))
    round_trip = {"queue_s": 2 * (CLIENT_DELAY_MS + NEAR_DELAY_MS) / 1000}
    for k in range(1, clients + 1):
        host = topology.add_host(f"h{k}", ip=f"10.0.0.{k}/24", template="tools-host")
        topology.add_link(host, switch, **scaled_link("1Gbit", FACTOR, **round_trip,
                                                      delay=f"{CLIENT_DELAY_MS}ms"))
    return topology


def flow_spans(phases):
    """Each client's flows as (client, first phase, last phase): a client
    sends through every run of phases with at least its number of flows."""
    spans = []
    for client in range(1, max(phases) + 1):
        first = None
        for i, k in enumerate([*phases, 0]):
            if k >= client and first is None:
                first = i
            elif k < client and first is not None:
                spans.append((client, first, i - 1))
                first = None
    return spans


def aggregate_windows(reports, low, high, window_s=WINDOW_S):
    """The sink's received rate (Mbit/s) in `window_s` windows within
    [low, high] (virtual s), from (flow start, iperf3 server JSON) pairs:
    each report interval counted in the window of its midpoint."""
    bins = {}
    for start, report in reports:
        for interval in report["intervals"]:
            s = interval["sum"]
            if s["seconds"] < REPORT_S / 2:      # the last, partial report
                continue
            middle = start + s["start"] + s["seconds"] / 2
            window = int(middle // window_s)
            bins[window] = bins.get(window, 0.0) + s["bytes"] * 8
    return [bits / window_s / 1e6 for window, bits in sorted(bins.items())
            if low <= window * window_s and (window + 1) * window_s <= high]


def run(exp):
    phases = phases_of(exp.params.get("flows", FLOWS))
    phase_s = float(exp.params.get("phase_s", PHASE_S))
    transport = transport_of(exp.params.get("transport", TRANSPORT))
    clients = [f"h{k}" for k in range(1, max(phases) + 1)]
    spans = flow_spans(phases)
    # The servers start first and listen while the pings below run: started
    # after them, at TDF 1 in the lab, the first client's connection was
    # refused (the phases begin at SETUP_S, which the pings had used up).
    servers = [exp.start("srv", ["iperf3", "-s", "-1", "-J", "-i", f"{REPORT_S:g}",
                                 "-p", str(5201 + n)]) for n in range(len(spans))]
    # ARP and the switch's MAC table first, so no flow starts with a flood.
    exp.parallel(*[lambda name=name: exp.cmd(name, f"ping -c 2 -W 5 {SERVER_IP}")
                   for name in [*clients, "probe"]])
    # The phases at fixed virtual instants, whatever the setup took.
    exp.sleep(SETUP_S - exp.now())
    bounds = [SETUP_S + i * phase_s for i in range(len(phases) + 1)]
    flows = []                  # (virtual start, handle, server)
    for i in range(len(phases)):
        exp.sleep(bounds[i] - exp.now())
        for n, (client, first, last) in enumerate(spans):
            if first == i:
                duration = (last - first + 1) * phase_s
                flows.append((exp.now(), exp.start(
                    f"h{client}", client_argv(transport, 5201 + n, duration),
                    timeout=duration + 60), servers[n]))
        exp.sleep(bounds[i] + SETTLE_S - exp.now())
        span = bounds[i + 1] - TAIL_S - exp.now()
        ping = exp.cmd("probe", f"ping -i {PING_S:g} -W 2 -w {max(1, int(span)):d} "
                                f"{SERVER_IP}", timeout=span + 60)
        exp.record(f"phase{i + 1}_rtt_ms", ping_rtts_ms(ping.stdout),
                   expected=2 * (NEAR_DELAY_MS + NEAR_DELAY_MS), unit="ms")
    exp.sleep(bounds[-1] - exp.now())
    for _, flow, _ in flows:
        exp.wait(flow, check=True)
    reports = [(start, json.loads(exp.wait(server, check=True).stdout))
               for start, _, server in flows]
    client_mbit = UDP_MBIT if transport == "udp" else 1000 / FACTOR * TCP_SHARE
    for i, k in enumerate(phases):
        exp.record(f"phase{i + 1}_mbit",
                   aggregate_windows(reports, bounds[i] + SETTLE_S, bounds[i + 1] - TAIL_S),
                   expected=k * client_mbit, unit="Mbit/s")
    exp.record("phase_bounds_s", bounds, unit="s")
    exp.record("phase_flows", phases, unit="flows")
