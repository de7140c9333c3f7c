"""CPU time scaling: how much work a guest does per virtual second, with
cpu_time="real" (capped to 100/TDF % of a CPU per vCPU) and without it
(SELENA's default: a dilated guest's CPU seems TDF times faster).

Two tiny hosts run the same CPU-bound shell loop (busybox arithmetic, no
system calls), timed by the guest agent in virtual time, first at TDF 10,
then at TDF 1 after exp.set_tdf(1) (where the cap is lifted). With scaling,
the work per virtual second at TDF 10 should match TDF 1; without it, it is
about 10 times more.

    selena run scenarios/cpu_time.py --out results/cpu-time [--param iterations=N]

Records work_per_s_<host>_tdf<N> (loop iterations per virtual second, one
sample per repeat) and the two ratios TDF 10 / TDF 1: real_cpu_ratio
(expected 1) and dilated_cpu_ratio (expected 10).
"""

import statistics

from selena.model import Topology

TDF = 10
REPEATS = 3
ITERATIONS = 30000


def build(iterations=ITERATIONS):
    """The topology; `iterations` (the loop's length) is read by run()."""
    topology = Topology("cputime", tdf=TDF)
    dilated = topology.add_host("hdil", ip="10.0.0.1/24")
    real = topology.add_host("hreal", ip="10.0.0.2/24", cpu_time="real")
    topology.add_link(dilated, real)
    return topology


def work_per_virtual_s(exp, node, iterations):
    loop = f"i=0; while [ $i -lt {iterations} ]; do i=$((i+1)); done"
    rates = []
    for _ in range(REPEATS):
        result = exp.cmd(node, loop, timeout=600)
        if not result.ok or not result.dur_ns:
            raise RuntimeError(f"{node}: the CPU loop {result.summary()}")
        rates.append(iterations / (result.dur_ns / 1e9))
    return rates


def run(exp):
    iterations = int(exp.params.get("iterations", ITERATIONS))
    rates = {}
    for tdf in (TDF, 1):
        if tdf != TDF:
            exp.set_tdf(tdf)
        for node in ("hdil", "hreal"):
            rates[node, tdf] = work_per_virtual_s(exp, node, iterations)
            exp.record(f"work_per_s_{node}_tdf{tdf}", rates[node, tdf], unit="1/s")

    def ratio(node):
        return statistics.median(rates[node, TDF]) / statistics.median(rates[node, 1])

    exp.record("real_cpu_ratio", ratio("hreal"), expected=1.0)
    exp.record("dilated_cpu_ratio", ratio("hdil"), expected=float(TDF))
