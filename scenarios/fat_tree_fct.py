"""SELENA's fat tree (paper Figure 6, Tables 2 and 3), scaled to the lab.

Half of a k=4 fat tree, as in the paper: 2 core, 4 aggregation and 4 edge
switches (Open vSwitch guests, 4 ports each) and 8 hosts. Four cross-pod
host pairs (h1-h5, h2-h6, h3-h7, h4-h8) exchange data both ways: every host
runs a sink and a generator that keeps CONCURRENCY TCP flows of FLOW_KB each
to its peer, starting a new flow the moment one completes (the paper: 10
flows of 10 MB per host, 8 Gbit/s in all). Recorded: every flow's completion
time (`fct_s`, Figure 6's CDF and Table 2's mean and standard deviation) and
the number of flows completed (`flows`, Table 2's first column); the sweep's
real seconds per run are Table 3.

Routing: static flows by destination (`fat_tree(routing="static")`), so
each of the eight directed streams has its own path through a core switch,
as the paper's OpenFlow fabric carried every pair at line rate (its real
system: 10071 flows in 120 s, mean 0.956 s). A learning fabric would need
the spanning tree, which puts several streams on one link.

Scaling rule: links of LINK_MBIT instead of 1 Gbit/s and flows scaled by
the same factor (FLOW_KB = 10 MB x LINK_MBIT / 1000), so a flow's ideal
completion time stays the paper's: CONCURRENCY flows share a link, each
gets 1/CONCURRENCY of it, FCT = CONCURRENCY x FLOW_KB x 8 / rate, about
0.85 s (plus slow start). Queues are kept as the paper's time (12 ms,
Linux's 1000 packets at 1 Gbit/s): selena.scaling, the one rule of every
reproduction. The lab forwards each packet through five switch
guests and Dom0 ten times on the way, on two emulated cores, so its rates
are a few hundredths of the paper's.

    selena sweep scenarios/fat_tree_fct.py --tdf 1,5,10,20 --out results/fattree

Each run's bundle also holds the flowgen CSV of every host (fct-h<k>.csv).
"""

from pathlib import Path

from selena.analysis.fct import parse_flowgen_csv
from selena.errors import ScenarioError
from selena.scaling import LINUX_QUEUE_S_AT_1GBIT, scaled_bytes, scaled_link
from selena.topologies import fat_tree

LINK_MBIT = 10.0
CONCURRENCY = 10
DURATION_S = 10.0            # virtual seconds of traffic (the paper: 120)
PAIRS = ((1, 5), (2, 6), (3, 7), (4, 8))
TCP_SHARE = 1448 / 1514      # TCP payload per Ethernet frame at MTU 1500
FLOWGEN_PORT = 5001          # flowgen server's default
PAPER_FLOW_BYTES = 10_000_000
PAPER_LINK_MBIT = 1000.0


def build(link_mbit=LINK_MBIT):
    link_mbit = float(link_mbit)
    if not 0.1 <= link_mbit <= 1000:
        raise ValueError(f"link_mbit={link_mbit:g}: want 0.1 to 1000")
    link = scaled_link(f"{PAPER_LINK_MBIT:g}Mbit", PAPER_LINK_MBIT / link_mbit,
                       queue_s=LINUX_QUEUE_S_AT_1GBIT)
    return fat_tree(4, pods=2, name="fattree", tdf=10, routing="static", **link)


def _ip(host: int) -> str:
    return f"10.0.0.{host}"


def run(exp):
    link_mbit = float(exp.params.get("link_mbit", LINK_MBIT))
    concurrency = int(exp.params.get("concurrency", CONCURRENCY))
    duration = float(exp.params.get("duration", DURATION_S))
    flow_bytes = int(exp.params.get(
        "flow_bytes", scaled_bytes(PAPER_FLOW_BYTES, PAPER_LINK_MBIT / link_mbit)))
    peers = {a: b for pair in PAIRS for a, b in (pair, pair[::-1])}
    # Every path answers before any flow starts (ARP resolved on the way).
    pings = exp.parallel(*[lambda a=a, b=b: exp.cmd(f"h{a}", f"ping -c 2 -W 5 {_ip(b)}")
                           for a, b in sorted(peers.items())])
    for (a, b), ping in zip(sorted(peers.items()), pings, strict=True):
        if ping.exit_code != 0:
            raise ScenarioError(f"h{a} cannot reach h{b} ({_ip(b)}) through the fat tree: "
                                f"{ping.stdout.decode(errors='replace')[-200:]}")
    servers = [exp.start(f"h{a}", ["flowgen", "server"]) for a in sorted(peers)]
    exp.parallel(*[lambda a=a: exp.wait_listening(f"h{a}", FLOWGEN_PORT)
                   for a in sorted(peers)])
    ideal = concurrency * flow_bytes * 8 / (link_mbit * 1e6 * TCP_SHARE)
    timeout = max(30.0, 20 * ideal)
    clients = {a: exp.start(f"h{a}", ["flowgen", "client", "--host", _ip(b),
                                      "--concurrency", str(concurrency),
                                      "--size", str(flow_bytes),
                                      "--duration", f"{duration:g}",
                                      "--timeout", f"{timeout:g}", "--seed", str(a)],
                            timeout=duration + timeout + 60)
               for a, b in sorted(peers.items())}
    fcts: list[float] = []
    failed = 0
    out = Path(exp.out_dir) if exp.out_dir else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)     # the bundle is written at the end
    for a, handle in clients.items():
        result = exp.wait(handle)
        if result.state != "exited" or result.exit_code not in (0, 1):
            raise ScenarioError(f"flowgen on h{a} {result.summary()}: "
                                f"{result.stderr.decode(errors='replace')[-300:]}")
        if out is not None:
            (out / f"fct-h{a}.csv").write_bytes(result.stdout)
        records = parse_flowgen_csv(result.stdout.decode(), source=f"flowgen on h{a}")
        fcts += [r.fct_s for r in records if r.status == "ok"]
        failed += sum(1 for r in records if r.status != "ok")
    for server in servers:
        exp.kill(server)
        exp.wait(server)
    if not fcts:
        raise ScenarioError(f"no flow completed in {duration:g} s ({failed} failed)")
    exp.record("fct_s", fcts, expected=ideal, unit="s")
    exp.record("flows", len(fcts), unit="flows")
    exp.record("failed_flows", failed, expected=0, unit="flows")
