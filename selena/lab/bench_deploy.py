"""`selena lab bench-deploy`: deploy N tiny guests (N = 1, 4, 8) through the
experiment lifecycle and compare with the sum of raw `xl create` times for
the same guests, measured in the same run. Figures are printed, never
asserted.

selena's time covers everything a deploy does up to running guests:
validation, plan, bridges, `xl create -p` (several at a time), control keys,
TDF, shaping, offloads and unpausing. The raw figure is only `xl create` of
equivalent configurations (same kernel, memory and vifs), one at a time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from selena.backends.xl import XlBackend
from selena.experiment import Experiment
from selena.model import Topology
from selena.runner import Runner


def topology(n: int) -> Topology:
    topo = Topology(f"benchdep{n}", tdf=1)
    hosts = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, n + 1)]
    if n > 1:
        topo.add_hub("lan", *hosts)
    return topo


def main_in_dom0(sizes: list[int]) -> int:
    runner = Runner()
    backend = XlBackend(runner, state_dir=Path("/tmp/bench-deploy"))
    rows = []
    for n in sizes:
        exp = Experiment(topology(n), backend=backend)
        raw = backend.raw_create_seconds(exp.plan())
        start = time.perf_counter()
        exp.deploy(wait=False)
        selena = time.perf_counter() - start
        exp.close()
        rows.append((n, selena, raw))
    print(f"  deploy of N tiny guests (real seconds, TDF 1, no boot wait; selena creates "
          f"up to {backend.parallel} at a time)")
    print(f"  {'N':>3} {'selena deploy':>14} {'sum xl create':>14} {'ratio':>6} {'per guest':>10}")
    for n, selena, raw in rows:
        print(f"  {n:>3} {selena:>14.2f} {raw:>14.2f} {selena / raw:>6.2f} {selena / n:>10.2f}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,4,8")
    a = parser.parse_args()
    sys.exit(main_in_dom0([int(x) for x in a.sizes.split(",")]))
