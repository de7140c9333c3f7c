"""Benchmark: validate and plan a k=16 fat tree (1024 hosts, 320 switches).

Prints figures; the target is under 1 s for validate + plan. Run:
    PYTHONPATH=. python3 scenarios/bench_plan.py   (or .venv/bin/python, where selena is installed)
"""

import time

from selena.backends.xl import xl_config
from selena.plan import make_plan
from selena.topologies import fat_tree
from selena.validate import validate


def main() -> None:
    t0 = time.perf_counter()
    topo = fat_tree(16, rate="1Gbit", delay="0.1ms", tdf=10)
    t1 = time.perf_counter()
    validate(topo, templates={"tiny-host", "ovs-switch"})
    t2 = time.perf_counter()
    plan = make_plan(topo)
    t3 = time.perf_counter()
    configs = [xl_config(plan, g) for g in plan.guests]
    t4 = time.perf_counter()
    hosts = sum(1 for n in topo.nodes.values() if n.kind.value == "host")
    print(f"fat tree k=16: {hosts} hosts, {len(topo.nodes) - hosts} switches, "
          f"{len(topo.links)} links")
    print(f"  build {t1 - t0:.3f} s, validate {t2 - t1:.3f} s, plan {t3 - t2:.3f} s "
          f"(validate + plan {t3 - t1:.3f} s; target < 1 s)")
    print(f"  render {len(configs)} xl configs {t4 - t3:.3f} s; "
          f"{len(plan.shaping)} tc commands")


if __name__ == "__main__":
    main()
