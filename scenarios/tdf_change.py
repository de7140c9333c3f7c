"""Changing the TDF of a running experiment (exp.set_tdf): 2 -> 20 -> 5
(or any sequence: --param tdfs=2,10,5),
while a ping and an iperf3 run across two shaped links the whole time.

Every link keeps its virtual rate and delay across the changes (Dom0's htb
rate and netem delay are re-rendered for each TDF while the guests are
paused), so what the guests measure in each segment should match the
configuration: a round trip of 2 x 100 ms and 2 Mbit/s of link rate
(1448/1514 of it as TCP payload). The lab adds about 11 ms of real time to
each round trip, hence a long delay; and a modest rate it carries in real
time even at TDF 2.

The ping and the TCP flow take separate links (h1-h3 and h2 -> h1): a
saturated link's queue adds its own delay to every packet, which is the
link working as configured, not a wrong delay. The rate is what the
receiver measures (iperf3 -R: h1 receives), since a sender with a large
socket buffer reports what it buffered, not what crossed the link.

    selena run scenarios/tdf_change.py --out results/tdf-change
    selena run scenarios/tdf_change.py --param tdfs=2,10,5 --out results/tdf-10

Records per segment rtt_ms_tdf<N> and tcp_mbit_tdf<N>, and how far exp.now()
moved across each set_tdf call (set_tdf_virtual_s).
"""

import json
import re

from selena.metrics import IPERF3_PORT
from selena.model import Topology

RATE_MBIT = 2
DELAY_MS = 100
DEFAULT_TDFS = "2,20,5"  # --param tdfs=... for another sequence
SEGMENT_S = 8.0            # virtual seconds at each TDF: 4 one-second rate samples
PING_INTERVAL_S = 0.5
MARGIN_S = 1.5             # samples this close to a change are left out
TCP_SHARE = 1448 / 1514



def tdf_sequence(text):
    """`--param tdfs=2,20,5`: the TDF of each segment, the first at deploy."""
    try:
        tdfs = tuple(float(part) if "." in part else int(part)
                     for part in str(text).split(","))
    except ValueError:
        raise ValueError(f"tdfs={text!r}: want TDFs separated by commas, "
                         "e.g. 2,20,5") from None
    if len(tdfs) < 2:
        raise ValueError(f"tdfs={text!r}: want at least two TDFs")
    return tdfs


def build(tdfs=DEFAULT_TDFS):
    """The topology, deployed at the first TDF of `tdfs` (run() reads the rest)."""
    topology = Topology("tdfchange", tdf=tdf_sequence(tdfs)[0])
    h1 = topology.add_host("h1", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.1.2/24", template="tools-host")
    h3 = topology.add_host("h3", ip="10.0.2.3/24", template="tools-host")
    h1.add_interface(0, ip="10.0.1.1/24")
    h1.add_interface(1, ip="10.0.2.1/24")
    topology.add_link((h1, 0), h2, rate=f"{RATE_MBIT}Mbit", delay=f"{DELAY_MS}ms")
    topology.add_link((h1, 1), h3, rate=f"{RATE_MBIT}Mbit", delay=f"{DELAY_MS}ms")
    return topology


def run(exp):
    tdfs = tdf_sequence(exp.params.get("tdfs", DEFAULT_TDFS))
    exp.cmd("h1", "ping -c 2 -W 5 10.0.2.3; ping -c 2 -W 5 10.0.1.2")  # ARP first
    server = exp.start("h2", ["iperf3", "-s", "-1"])
    exp.wait_listening("h2", IPERF3_PORT)
    total = SEGMENT_S * len(tdfs) + 1
    ping = exp.start("h1", f"ping -c {int(total / PING_INTERVAL_S)} -i {PING_INTERVAL_S} "
                           "-W 5 10.0.2.3", timeout=total + 60)
    ping_start = exp.now()
    iperf = exp.start("h1", ["iperf3", "-c", "10.0.1.2", "-R", "-t", f"{total:g}", "-i", "1",
                                "-J"],
                      timeout=total + 60)
    iperf_start = exp.now()
    bounds = [ping_start]                   # virtual start of each segment
    for tdf in tdfs[1:]:
        exp.sleep(bounds[-1] + SEGMENT_S - exp.now())
        before = exp.now()
        exp.set_tdf(tdf)
        after = exp.now()
        exp.record("set_tdf_virtual_s", after - before, unit="s")
        bounds.append((before + after) / 2)
    bounds.append(float("inf"))
    pings = exp.wait(ping)
    client = exp.wait(iperf)
    exp.wait(server)

    def segment(t):
        for i, tdf in enumerate(tdfs):
            if bounds[i] + MARGIN_S <= t <= bounds[i + 1] - MARGIN_S:
                return tdf
        return None

    rtts = {tdf: [] for tdf in tdfs}
    for seq, rtt in re.findall(r"seq=(\d+) ttl=\d+ time=([\d.]+) ms", pings.stdout.decode()):
        tdf = segment(ping_start + int(seq) * PING_INTERVAL_S)
        if tdf is not None:
            rtts[tdf].append(float(rtt))
    rates = {tdf: [] for tdf in tdfs}
    for interval in json.loads(client.stdout)["intervals"]:
        s = interval["sum"]
        first, last = segment(iperf_start + s["start"]), segment(iperf_start + s["end"])
        if first is not None and first == last and s["start"] >= 2:   # past slow start
            rates[first].append(s["bits_per_second"] / 1e6)
    for tdf in tdfs:
        exp.record(f"rtt_ms_tdf{tdf}", rtts[tdf], expected=2 * DELAY_MS, unit="ms")
        exp.record(f"tcp_mbit_tdf{tdf}", rates[tdf], expected=RATE_MBIT * TCP_SHARE,
                   unit="Mbit/s")
