"""Figure 11 of the SELENA paper: flow completion times through an OpenFlow
switch, with Open vSwitch's own control plane (`ideal`) and with a hardware
switch's (`pica8-p3290`: about 6 ms per flow insertion, 2 ms per packet_in,
at most 50 packet_in/s, excess dropped).

h1 and h2 hang off switch s1, whose controller c0 (os-ken, reactive learning
switch with one exact 5-tuple flow entry per TCP connection) sits behind a
separate management link. h1 opens 1 MB flows to h2 with exponential
inter-arrival times for a fixed virtual duration, once per profile; the
switch model is swapped (and the flow table emptied) between the phases.
Every new connection needs packet_ins for its SYN and SYN-ACK; with the Pica8
profile bursts of them exceed the packet_in budget, and a dropped SYN or
SYN-ACK is retransmitted after TCP's 1 s timeout (a SYN again 2 s later): the
CDF shows steps at 1, 2 and 3 s. With `ideal` no flow waits for a
retransmission.

    selena run scenarios/switch_model_fct.py --out results/fct

writes per profile the flowgen CSV (`fct-<profile>.csv`), and the CDF table
(`fct_cdf.csv`), a summary (`fct_summary.csv`) and, where matplotlib is
installed, the plot (`fct_cdf.png`). The lab's Dom0 has no matplotlib; plot
afterwards on the host with
`.venv/bin/python -m selena.analysis.fct --out results/fct ideal=results/fct/fct-ideal.csv
pica8-p3290=results/fct/fct-pica8-p3290.csv`.

Environment overrides (virtual seconds, flows/s, bytes, link rate, scaling
factor): SELENA_FCT_DURATION, SELENA_FCT_LINK, SELENA_FCT_SCALE,
SELENA_FCT_RATE, SELENA_FCT_SIZE, SELENA_FCT_SEED, SELENA_FCT_PROFILES
(comma-separated), SELENA_FCT_TIMEOUT (virtual seconds after its start at
which flowgen gives a flow up, status `timeout`; 30 by default; a shorter one
bounds a phase's tail of flows still retrying their handshake).

SELENA_FCT_SCALE=k applies the reproductions' scaling rule
(docs/reproductions.md): the link rate and the flow size both divided by k,
so a flow's transfer time and the link's load share stay the paper's, as
does the flow arrival rate, which sets the packet_in load the result is
about. At the paper's 50 flows/s of 1 MB over 1 Gbit/s, 400 Mbit/s on
average, the lab's path through the switch guest carried about 23 Mbit/s of
real time at TDF 10 (230 virtual): flows pile up until h1 runs out of
memory.
"""

import importlib.util
import os
from pathlib import Path

from selena.analysis.fct import analyze, parse_flowgen_csv
from selena.errors import ScenarioError
from selena.model import Topology
from selena.scaling import LINUX_QUEUE_S_AT_1GBIT, scaled_bytes, scaled_link

DURATION_S = float(os.environ.get("SELENA_FCT_DURATION", "30"))
RATE_PER_S = float(os.environ.get("SELENA_FCT_RATE", "10"))
SCALE = float(os.environ.get("SELENA_FCT_SCALE", "1"))
SIZE_BYTES = scaled_bytes(int(os.environ.get("SELENA_FCT_SIZE", "1000000")), SCALE)
SEED = int(os.environ.get("SELENA_FCT_SEED", "1"))
PROFILES = tuple(os.environ.get("SELENA_FCT_PROFILES", "ideal,pica8-p3290").split(","))
LINK_RATE = os.environ.get("SELENA_FCT_LINK", "1Gbit")
TIMEOUT_S = float(os.environ.get("SELENA_FCT_TIMEOUT", "30"))
# Virtual seconds for OVS to reconnect to the restarted model (its backoff is
# at most 1 s) and for the controller to install its table-miss entry.
SETTLE_S = 3.0

topology = Topology("fct", tdf=10)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
c0 = topology.add_controller("c0", ip="10.9.0.2/24")
s1 = topology.add_switch("s1", controller=c0, switch_model=PROFILES[0])
s1.add_interface(0, ip="10.9.0.1/24")          # management port, toward c0
topology.add_link((s1, 0), c0)
# The paper's rate divided by SCALE, its queue as a time (selena.scaling).
LINK = scaled_link(LINK_RATE, SCALE, queue_s=LINUX_QUEUE_S_AT_1GBIT)
topology.add_link(h1, s1, **LINK)
topology.add_link(h2, s1, **LINK)


def run(exp):
    out = Path(exp.out_dir or ".")
    out.mkdir(parents=True, exist_ok=True)
    server = exp.start("h2", ["flowgen", "server"])
    series = {}
    for phase, profile in enumerate(PROFILES):
        # s1 was deployed with the first profile and nothing has crossed it
        # yet: restarting its model would cost about 5 virtual seconds (50 s
        # of real time at TDF 10) for the same state.
        if phase:
            exp.set_switch_model("s1", profile)
        exp.sleep(SETTLE_S)
        # ARP and MAC learning before the first measured flow.
        ping = exp.cmd("h1", "ping -c 4 -i 0.5 -W 3 10.0.0.2")
        if b" 0 packets received" in ping.stdout or not ping.stdout:
            flows = exp.cmd("s1", "ovs-ofctl -O OpenFlow13 dump-flows br0; ovs-vsctl show")
            raise ScenarioError(f"h1 cannot reach h2 through s1 ({profile}): "
                                f"{ping.stdout.decode(errors='replace')[-120:]}\n"
                                f"s1: {flows.stdout.decode(errors='replace')[-1500:]}")
        result = exp.cmd("h1", ["flowgen", "client", "--host", "10.0.0.2",
                                "--rate", f"{RATE_PER_S:g}", "--size", str(SIZE_BYTES),
                                "--duration", f"{DURATION_S:g}", "--seed", str(SEED),
                                "--timeout", f"{TIMEOUT_S:g}"],
                         timeout=DURATION_S + TIMEOUT_S + 90)
        if result.state != "exited" or result.exit_code not in (0, 1):
            raise ScenarioError(f"flowgen on h1 ({profile}) {result.summary()}: "
                                f"{result.stderr.decode(errors='replace')[-300:]}")
        (out / f"fct-{profile}.csv").write_bytes(result.stdout)
        series[profile] = parse_flowgen_csv(result.stdout.decode(),
                                            source=f"flowgen on h1 ({profile})")
        flows = exp.cmd("s1", "ovs-ofctl -O OpenFlow13 dump-flows br0 | grep -c tcp || true")
        print(f"{profile}: {len(series[profile])} flows; "
              f"{flows.stdout.decode().strip()} TCP flow entries in s1 after the phase")
    exp.kill(server)
    exp.wait(server)
    plot = importlib.util.find_spec("matplotlib") is not None
    summaries = analyze(series, out, plot=plot,
                        title=f"FCT of {SIZE_BYTES / 1e6:g} MB flows, {RATE_PER_S:g} flows/s, "
                              f"TDF {exp.tdf:g}")
    for profile, s in summaries.items():
        print(f"{profile:>12}: {s.n} ok, {s.failed} failed; median {s.median_s:.3f} s, "
              f"p90 {s.p90_s:.3f} s, p99 {s.p99_s:.3f} s; {100 * s.over_1s:.1f}% > 1 s, "
              f"{100 * s.over_3s:.1f}% > 3 s")
    if not plot:
        print("no matplotlib here: plot with python -m selena.analysis.fct (see the scenario)")
