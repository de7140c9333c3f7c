"""Benchmark: validate and plan a k=16 fat tree (1024 hosts, 320 switches),
then time `selena plan` (validate, plan and the rendered deploy script) for
500, 2000 and 5000 hosts.

Prints figures; the targets are under 1 s for validate + plan of the fat
tree and under 2 s for the 5000-host plan (it must grow linearly). Run:
    PYTHONPATH=. python3 scenarios/bench_plan.py   (or .venv/bin/python, where selena is installed)
    PYTHONPATH=. python3 scenarios/bench_plan.py 500 1000   (other host counts)
"""

import sys
import time

from selena.backends.xl import XlBackend, xl_config
from selena.model import Topology
from selena.plan import make_plan
from selena.runner import Runner
from selena.topologies import fat_tree
from selena.validate import validate

# Hosts per switch in the many-host topology: 16 hosts plus two uplinks, as
# when a switch took at most 32 ports (now 40), so the figures stay comparable.
PER_SWITCH = 16


def fat_tree_bench() -> None:
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


def many_hosts(count: int) -> Topology:
    """`count` hosts, PER_SWITCH to a switch, the switches in a line."""
    topo = Topology(f"bench{count}", tdf=10)
    switch = None
    for i in range(count):
        if i % PER_SWITCH == 0:
            previous, switch = switch, topo.add_switch(f"s{i // PER_SWITCH + 1}")
            if previous is not None:
                topo.add_link(previous, switch, rate="1Gbit")
        host = topo.add_host(f"h{i + 1}", ip=f"10.{(i + 1) >> 16 & 255}.{(i + 1) >> 8 & 255}."
                                             f"{(i + 1) & 255}/8")
        topo.add_link(host, switch, rate="100Mbit", delay="1ms")
    return topo


def plan_bench(count: int) -> float:
    """Seconds for what `selena plan` does: validate, plan, render."""
    topo = many_hosts(count)
    t0 = time.perf_counter()
    validate(topo, templates=None)
    plan = make_plan(topo)
    text = XlBackend(runner=Runner(dry_run=True)).render(plan)
    elapsed = time.perf_counter() - t0
    print(f"selena plan, {count} hosts, {len(topo.nodes) - count} switches: {elapsed:.3f} s "
          f"({len(text.splitlines())} lines; {1e3 * elapsed / count:.3f} ms per host)")
    return elapsed


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [500, 2000, 5000]
    fat_tree_bench()
    for count in counts:
        plan_bench(count)


if __name__ == "__main__":
    main()
