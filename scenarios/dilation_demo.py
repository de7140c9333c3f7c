"""The front door's demo: what time dilation buys.

Two hosts on one link of 20 Mbit/s with 40 ms of one-way delay; inside the
guests, ping measures the round trip (configured: 2 x 40 ms) and iperf3 the
TCP throughput (configured: the link rate less headers, 1448 of every 1514
bytes). `make demo` sweeps it in the lab at TDF 1 and at TDF N and prints
both side by side with the sweep's verdicts (selena/lab/demo.py):

    selena sweep scenarios/dilation_demo.py --tdf 1,10 --out results/demo
    selena run scenarios/dilation_demo.py --tdf 10 --out results/demo-tdf10

At TDF 1 the emulated lab cannot keep up in real time (each round trip gains
about 10 ms of real processing time); at TDF 10 that overhead shrinks to a
tenth in the guests' time, and the delay is long enough for what is left
(1-3 ms of guest time in the lab) to stay within the 5% tolerance.
RATE_MBIT and DELAY_MS are parameters (`--param rate_mbit=...`).
"""

from selena.metrics import IPERF3_PORT, iperf3_interval_mbit, ping_rtts_ms
from selena.model import Topology

RATE_MBIT = 20
DELAY_MS = 40
PINGS = 20
IPERF_SECONDS = 5
# TCP payload per full Ethernet frame: 1448 of 1514 bytes (timestamps on).
TCP_SHARE = 1448 / 1514


def build(rate_mbit=RATE_MBIT, delay_ms=DELAY_MS):
    topology = Topology("demo", tdf=10)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, rate=f"{rate_mbit}Mbit", delay=f"{delay_ms}ms")
    return topology


def run(exp):
    rate = float(exp.params.get("rate_mbit", RATE_MBIT))
    delay = float(exp.params.get("delay_ms", DELAY_MS))
    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")                   # ARP, warm caches
    ping = exp.cmd("h1", f"ping -c {PINGS} -i 0.2 -W 5 10.0.0.2", check=True)
    exp.record("rtt_ms", ping_rtts_ms(ping.stdout), expected=2 * delay, unit="ms")

    server = exp.start("h2", ["iperf3", "-s", "-1"])
    exp.wait_listening("h2", IPERF3_PORT)
    # -R: h2 sends and h1 reports what it received each second; a sender's
    # per-second figures count what entered its socket buffer, which comes in
    # bursts (12.5-25 Mbit/s seconds over this 20 Mbit/s link in the lab).
    client = exp.cmd("h1", ["iperf3", "-c", "10.0.0.2", "-R", "-t", str(IPERF_SECONDS),
                            "-O", "1", "-J"], check=True, timeout=IPERF_SECONDS + 60)
    exp.wait(server)
    # One sample per second of the test (the omitted slow-start second left out).
    exp.record("tcp_mbit", iperf3_interval_mbit(client.stdout), expected=rate * TCP_SHARE,
               unit="Mbit/s")
