"""SELENA's star topology (paper Figures 4 and 5), scaled to the lab.

Clients send long-running TCP flows through one Open vSwitch guest to a
server (the data sink); a new flow starts every STAGGER_S virtual seconds
from an idle client, so the aggregate climbs in steps, as in the paper
(10 clients, a new 1 Gbit/s flow every 10 s up to 10 Gbit/s at t = 90 s).

Scaling rule: the paper's clients had 1 Gbit/s links and the sink 10 Gbit/s
(no bottleneck at the sink), on a 4-core server where TDF 5 already carried
940 Mbit/s per client. This lab is a 2-core machine emulated in software,
which forwards roughly a hundredth of that in real time, so the links are a
hundredth: CLIENT_MBIT per client, and the sink's link carries every client
at once (CLIENTS x CLIENT_MBIT). Queues are the paper's time
(selena.scaling): 12 ms, Linux's 1000 packets at 1 Gbit/s. Fewer clients
than the paper, because each is a VM booted in the emulated machine; the
step pattern is the same.

Each flow is measured by its receiver (iperf3 on the sink, one server per
client; the sender's own figures count its socket buffer). Recorded:

- client_mbit: every client's throughput in 100 ms windows while its flow
  runs (past its first second of slow start), Figure 4's box plots;
  expected: the client link rate less headers (1448 of every 1514 bytes).
- client_mbit_1s: the same in 1 s windows, each ten of one client's 100 ms
  windows in a row (the paper's "1 second monitoring window" of Figures 7
  and 8, and the samples Figure 10's 97.5% rule counts).
- aggregate_mbit_<k>flows: the sink's received rate in 500 ms windows while
  k flows run, Figure 5's steps; expected: k x the client figure.

    selena sweep scenarios/star_throughput.py --tdf 1,5,10 --baseline mininet \\
        --out results/star

Figures 7, 8 and 10 (scalability: more clients, faster links) start every
flow at once (`--param stagger_s=0`) and run them `last_s` virtual seconds:
only client_mbit and aggregate_mbit_<clients>flows are recorded then.

    selena run scenarios/star_throughput.py --tdf 20 --param clients=8 \\
        --param stagger_s=0 --param last_s=5 --out results/star8
"""

import json

from selena.model import Topology
from selena.scaling import LINUX_QUEUE_S_AT_1GBIT, scaled_link

CLIENTS = 3
CLIENT_MBIT = 10
PAPER_CLIENT_MBIT = 1000
STAGGER_S = 4.0          # virtual seconds between flow starts
LAST_FLOW_S = 6.0        # how long the last flow runs with all others
WINDOW_S = 0.1           # iperf3's report interval: Figure 4's 100 ms
AGGREGATE_WINDOW_S = 0.5
SLOW_START_S = 1.0       # each flow's first second is left out
TCP_SHARE = 1448 / 1514
SERVER_IP = "10.0.0.100"


def build(clients=CLIENTS, client_mbit=CLIENT_MBIT, stagger_s=STAGGER_S, last_s=LAST_FLOW_S):
    """The topology; stagger_s and last_s are read by run()."""
    clients, client_mbit = int(clients), float(client_mbit)
    if not 0.1 <= client_mbit <= PAPER_CLIENT_MBIT:
        raise ValueError(f"client_mbit={client_mbit:g}: want 0.1 to {PAPER_CLIENT_MBIT}")
    if not 1 <= clients <= 8:
        raise ValueError(f"clients={clients}: want 1 to 8")
    topology = Topology("star", tdf=10)
    switch = topology.add_switch("s1")
    server = topology.add_host("srv", ip=f"{SERVER_IP}/24", template="tools-host")
    # The scaling rule (selena.scaling): rates divided by the factor, queues
    # kept as the paper's time (Linux's 1000 packets at 1 Gbit/s: 12 ms).
    factor = PAPER_CLIENT_MBIT / client_mbit
    topology.add_link(server, switch, **scaled_link(
        f"{clients * PAPER_CLIENT_MBIT:g}Mbit", factor, queue_s=LINUX_QUEUE_S_AT_1GBIT))
    for k in range(1, clients + 1):
        host = topology.add_host(f"h{k}", ip=f"10.0.0.{k}/24", template="tools-host")
        topology.add_link(host, switch, **scaled_link(
            f"{PAPER_CLIENT_MBIT:g}Mbit", factor, queue_s=LINUX_QUEUE_S_AT_1GBIT))
    return topology


def run(exp):
    clients = int(exp.params.get("clients", CLIENTS))
    client_mbit = float(exp.params.get("client_mbit", CLIENT_MBIT))
    # Figures 7, 8 and 10 start every flow at once (stagger_s=0).
    stagger_s = float(exp.params.get("stagger_s", STAGGER_S))
    last_s = float(exp.params.get("last_s", LAST_FLOW_S))
    if stagger_s < 0 or last_s <= SLOW_START_S + AGGREGATE_WINDOW_S:
        raise ValueError(f"stagger_s={stagger_s:g}, last_s={last_s:g}: want stagger_s >= 0 "
                         f"and last_s > {SLOW_START_S + AGGREGATE_WINDOW_S:g}")
    names = [f"h{k}" for k in range(1, clients + 1)]
    # ARP and the switch's MAC table first, so no flow starts with a flood.
    exp.parallel(*[lambda name=name: exp.cmd(name, f"ping -c 2 -W 5 {SERVER_IP}")
                   for name in names])
    servers = [exp.start("srv", ["iperf3", "-s", "-1", "-J", "-i", f"{WINDOW_S:g}",
                                 "-p", str(5201 + k)])
               for k in range(clients)]
    for k in range(clients):
        exp.wait_listening("srv", 5201 + k)
    end = stagger_s * (clients - 1) + last_s
    origin = exp.now()
    starts, flows = [], []
    for k, name in enumerate(names):
        exp.sleep(origin + k * stagger_s - exp.now())
        starts.append(exp.now() - origin)
        duration = end - k * stagger_s
        flows.append(exp.start(name, ["iperf3", "-c", SERVER_IP, "-p", str(5201 + k),
                                      "-t", f"{duration:g}", "-i", "0"],
                               timeout=duration + 60))
    for flow in flows:
        exp.wait(flow, check=True)
    reports = [json.loads(exp.wait(server, check=True).stdout) for server in servers]

    expected = client_mbit * TCP_SHARE
    per_client: list[float] = []
    per_second: list[float] = []
    bins: dict[int, float] = {}          # aggregate window -> bits received
    for start, report in zip(starts, reports, strict=True):
        seconds: dict[int, list[tuple[float, float]]] = {}    # 1 s window -> (bits, s)
        for interval in report["intervals"]:
            s = interval["sum"]
            begin = start + s["start"]
            if s["seconds"] < WINDOW_S / 2:     # the last, partial report
                continue
            if s["start"] >= SLOW_START_S:
                per_client.append(s["bits_per_second"] / 1e6)
                # By the report's middle: a start of 1.9999 s is second 1's.
                second = int((s["start"] + s["seconds"] / 2 - SLOW_START_S) // 1.0)
                seconds.setdefault(second, []).append((s["bytes"] * 8, s["seconds"]))
            window = int((begin + s["seconds"] / 2) // AGGREGATE_WINDOW_S)
            bins[window] = bins.get(window, 0.0) + s["bytes"] * 8
        # Whole seconds only (ten reports): the last one is cut short.
        per_second += [sum(b for b, _ in parts) / sum(t for _, t in parts) / 1e6
                       for _, parts in sorted(seconds.items())
                       if len(parts) == round(1.0 / WINDOW_S)]
    exp.record("client_mbit", per_client, expected=expected, unit="Mbit/s")
    exp.record("client_mbit_1s", per_second, expected=expected, unit="Mbit/s")
    # With every flow started at once only the last step has windows.
    for k in range(1 if stagger_s > 0 else clients, clients + 1):
        # Windows while exactly k flows ran, each past its slow start.
        low = starts[k - 1] + SLOW_START_S
        high = starts[k] if k < clients else end - AGGREGATE_WINDOW_S
        samples = [bits / AGGREGATE_WINDOW_S / 1e6 for window, bits in sorted(bins.items())
                   if low <= window * AGGREGATE_WINDOW_S
                   and (window + 1) * AGGREGATE_WINDOW_S <= high]
        exp.record(f"aggregate_mbit_{k}flows", samples, expected=k * expected, unit="Mbit/s")
