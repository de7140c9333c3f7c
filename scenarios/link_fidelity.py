"""Link fidelity, measured inside the guests (Mininet-style fidelity check).

h1 has two links: to h2 at 100 Mbit/s (no added delay), to h3 with 10 ms of
one-way delay (no rate limit). Guests measure throughput with iperf3 and the
round trip with ping; the expected figures are 100 Mbit/s of link rate and
an RTT of 2 x 10 ms. Dom0 enforces both in real time, scaled by the TDF.

The link rate counts Ethernet frames, as on a real link, so what iperf3
reports as payload is less: UDP with 1472-byte datagrams carries at most
1472/1514 of it (97.2 Mbit/s), TCP with 1448-byte segments 1448/1514
(95.6 Mbit/s), the same as on a real 100 Mbit/s link without preamble.

    selena run scenarios/link_fidelity.py --tdf 30 --out results/fidelity
    selena run scenarios/link_fidelity.py --tdf 10 --param rate_mbit=20 --param delay_ms=50 \
        --out results/fidelity-tdf10
"""

import json
import re
import statistics

from selena.metrics import IPERF3_PORT
from selena.model import Topology

RATE_MBIT = 100
DELAY_MS = 10

def build(rate_mbit=RATE_MBIT, delay_ms=DELAY_MS):
    topology = Topology("fidelity", tdf=30)
    h1 = topology.add_host("h1", template="tools-host")
    h2 = topology.add_host("h2", template="tools-host")
    h3 = topology.add_host("h3", template="tools-host")
    h1.add_interface(0, ip="10.0.1.1/24")
    h1.add_interface(1, ip="10.0.2.1/24")
    h2.add_interface(0, ip="10.0.1.2/24")
    h3.add_interface(0, ip="10.0.2.3/24")
    topology.add_link((h1, 0), (h2, 0), rate=f"{rate_mbit}Mbit")
    topology.add_link((h1, 1), (h3, 0), delay=f"{delay_ms}ms")
    return topology


def run(exp):
    rate_mbit = float(exp.params.get("rate_mbit", RATE_MBIT))
    delay_ms = float(exp.params.get("delay_ms", DELAY_MS))
    exp.cmd("h1", "ping -c 1 -W 5 10.0.2.3; ping -c 1 -W 5 10.0.1.2")   # warm ARP caches
    ping = exp.cmd("h1", "ping -c 20 -i 0.2 10.0.2.3", check=True)
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping.stdout.decode())]
    median = statistics.median(rtts)
    print(f"RTT median {median:.2f} ms over {len(rtts)} pings "
          f"(configured {2 * delay_ms:g} ms: {100 * (median / (2 * delay_ms) - 1):+.1f}%)")
    for name, extra in (("TCP", []), ("UDP", ["-u", "-b", f"{1.25 * rate_mbit:g}M", "-l", "1472"])):
        server = exp.start("h2", ["iperf3", "-s", "-1"])
        exp.wait_listening("h2", IPERF3_PORT)
        client = exp.cmd("h1", ["iperf3", "-c", "10.0.1.2", "-t", "3", "-O", "1", "-J", *extra],
                         check=True)
        exp.wait(server)
        end = json.loads(client.stdout)["end"]
        received = end["sum_received"]["bits_per_second"]
        print(f"{name} throughput {received / 1e6:.1f} Mbit/s over a {rate_mbit:g} Mbit/s link")
