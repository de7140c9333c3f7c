"""`selena lab bench-deploy`: deploy N tiny guests (N = 1, 4, 8) with selena
and compare with the sum of raw `xl create` times for the same guests,
measured in the same run. Figures are printed, never asserted.

selena's time covers everything a deploy does: bridges, `xl create -p`,
control keys, TDF, shaping, offloads and unpausing. The raw figure is only
`xl create` of equivalent configurations (same kernel, memory and vifs).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from selena.backends.xl import XlBackend
from selena.model import Topology
from selena.plan import make_plan
from selena.runner import Runner


def topology(n: int) -> Topology:
    topo = Topology(f"benchdep{n}", tdf=1)
    hosts = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, n + 1)]
    if n > 1:
        topo.add_hub("lan", *hosts)
    return topo


def raw_xl_create(runner: Runner, n: int, workdir: Path) -> float:
    """Sum of `xl create` times for n guests of the same shape (own bridge)."""
    plan = make_plan(topology(n))
    bridge = "sbraw0"
    runner.run(["ovs-vsctl", "--may-exist", "add-br", bridge])
    total = 0.0
    try:
        for guest in plan.guests:
            guest.domain_name = f"raw-{guest.node}"
            guest.vifs = [dataclasses.replace(v, name=f"raw{v.name[-6:]}", bridge=bridge)
                          for v in guest.vifs]
            cfg = workdir / f"{guest.domain_name}.cfg"
            cfg.write_text(plan.xl_config(guest))
            start = time.perf_counter()
            runner.run(["xl", "create", "-q", str(cfg)])
            total += time.perf_counter() - start
    finally:
        for guest in plan.guests:
            runner.run(["xl", "destroy", guest.domain_name], check=False)
        runner.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)
    return total


def main_in_dom0(sizes: list[int]) -> int:
    runner = Runner()
    workdir = Path("/tmp/bench-deploy")
    workdir.mkdir(exist_ok=True)
    backend = XlBackend(runner, state_dir=workdir / "state")
    rows = []
    for n in sizes:
        raw = raw_xl_create(runner, n, workdir)
        plan = make_plan(topology(n))
        start = time.perf_counter()
        backend.deploy(plan)
        selena = time.perf_counter() - start
        backend.destroy(plan.experiment)
        rows.append((n, selena, raw))
    print("  deploy of N tiny guests (real seconds, TDF 1, no boot wait)")
    print(f"  {'N':>3} {'selena deploy':>14} {'sum xl create':>14} {'ratio':>6} {'per guest':>10}")
    for n, selena, raw in rows:
        print(f"  {n:>3} {selena:>14.2f} {raw:>14.2f} {selena / raw:>6.2f} {selena / n:>10.2f}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,4,8")
    a = parser.parse_args()
    sys.exit(main_in_dom0([int(x) for x in a.sizes.split(",")]))
