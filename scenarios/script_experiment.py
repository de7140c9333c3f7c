#!/usr/bin/env python3
"""An experiment as a plain Python script, the way Mininet users write them:
build a topology, start it, run commands on its nodes, stop it.

Run it in Dom0 (in the lab: `selena lab run -- python3 scenarios/script_experiment.py`):

    python3 scenarios/script_experiment.py --tdf 5 --out results/script

`with Experiment(...)` deploys on entry and, on leaving (also on an error or
Ctrl-C), writes the results bundle and tears everything down.
"""

import argparse
import re
import sys

from selena import Experiment
from selena.model import Topology


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tdf", default="5")
    parser.add_argument("--out", default="results/script")
    args = parser.parse_args()

    topo = Topology("script")
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, delay="10ms")

    with Experiment(topo, tdf=args.tdf, out=args.out, progress=print) as exp:
        h1, h2 = exp["h1"], exp["h2"]
        print(h2.cmd("uname -n; cat /proc/uptime").stdout.decode(), end="")
        ping = h1.cmd(f"ping -c 5 {h2.IP()}", check=True)
        print(ping.stdout.decode(), end="")
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping.stdout.decode())]
        exp.record("rtt_ms", rtts[1:], expected=20.0, unit="ms")
        for metric in exp.metrics.values():
            print(metric.line())
    print(f"bundle: {exp.bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
