"""Mininet-HiFi's packet-spacing invariant across link rates (the
dissertation's Figure 2.7 and Figure 5.3: the CCDF of packet spacing
errors, tight at low rates, a long tail once the emulator falls behind).

Two tools hosts, one link at `rate_mbit` with 1 ms of delay, one TCP flow
(iperf3, h1 sending) filling it for `real_s` real seconds whatever the TDF
(the fidelity monitor captures a 1 s window every 10 real seconds, so every
run holds about the same number of windows). The monitor's spacing check
records every checked departure's error, in full-frame times, in a
histogram per link direction (fidelity.json: spacing.<vif>.error_hist,
edges SPACING_ERROR_EDGES): `make figures` draws its CCDF per rate and TDF.
The rates are the paper's own (Mininet-HiFi ran 10 to 160 Mbit/s on one
host), so the scaling factor is 1; the queue is 12 ms by the scaling rule.

    selena sweep scenarios/spacing_ccdf.py --tdf 1,10 --param rate_mbit=80 --out results/sp80

Records tcp_mbit (iperf3's per-second figures past the first; expected: the
rate less headers).
"""

from selena.metrics import IPERF3_PORT, iperf3_interval_mbit
from selena.model import Topology
from selena.scaling import LINUX_QUEUE_S_AT_1GBIT, scaled_link

RATE_MBIT = 80
REAL_S = 35.0           # real seconds of traffic: three or four capture windows
TCP_SHARE = 1448 / 1514


def build(rate_mbit=RATE_MBIT, real_s=REAL_S):
    rate_mbit, real_s = float(rate_mbit), float(real_s)
    if not 0.1 <= rate_mbit <= 10000:
        raise ValueError(f"rate_mbit={rate_mbit:g}: want 0.1 to 10000")
    if real_s < 12:
        raise ValueError(f"real_s={real_s:g}: want at least 12 (the monitor captures a window "
                         "every 10 real seconds)")
    topology = Topology("spacing", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, **scaled_link(f"{rate_mbit:g}Mbit", 1,
                                            queue_s=LINUX_QUEUE_S_AT_1GBIT, delay="1ms"))
    return topology


def seconds(real_s, tdf):
    """iperf3's -t (whole virtual seconds) for `real_s` real seconds, 2 at least."""
    return max(2, round(real_s / tdf))


def run(exp):
    rate_mbit = float(exp.params.get("rate_mbit", RATE_MBIT))
    duration = seconds(float(exp.params.get("real_s", REAL_S)), exp.tdf)
    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")
    server = exp.start("h2", ["iperf3", "-s", "-1"])
    exp.wait_listening("h2", IPERF3_PORT)
    client = exp.cmd("h1", ["iperf3", "-c", "10.0.0.2", "-t", str(duration), "-O", "1", "-J"],
                     check=True, timeout=duration + 60)
    exp.wait(server)
    exp.record("tcp_mbit", iperf3_interval_mbit(client.stdout),
               expected=rate_mbit * TCP_SHARE, unit="Mbit/s")
