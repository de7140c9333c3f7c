"""CPU time scaling: how much work a guest does per virtual second, with
cpu_time="real" (capped to 100/TDF % of a CPU per vCPU), with a cpu_share
(Mininet's CPULimitedHost cpu=: that share of the host's CPUs per virtual
second) and without either (SELENA's default: a dilated guest's CPU seems
TDF times faster).

Three tiny hosts run the same CPU-bound shell loop (busybox arithmetic, no
system calls), timed by the guest agent in virtual time, first at TDF 10,
then at TDF 1 after exp.set_tdf(1) (where the real guest's cap is lifted).
With scaling, the work per virtual second at TDF 10 should match TDF 1;
without it, it is about 10 times more. The shared guest gets a quarter of
the host's CPUs (`--param share=0.25`): on a host of two, half a CPU, so
at TDF 1 it does half the dilated guest's work; then its share is lifted
during the run (exp.node("hshare").set_cpu_share(None)) and it does the
dilated guest's.

    selena run scenarios/cpu_time.py --out results/cpu-time [--param iterations=N]

Records work_per_s_<host>_tdf<N> (loop iterations per virtual second, one
sample per repeat), the three ratios TDF 10 / TDF 1: real_cpu_ratio and
share_cpu_ratio (expected 1) and dilated_cpu_ratio (expected 10),
share_over_dilated_tdf1 (expected the share times the host's CPUs, at
most 1) and lifted_over_dilated_tdf1 (expected 1).
"""

import statistics

from selena.model import Topology

TDF = 10
REPEATS = 3
ITERATIONS = 30000
SHARE = 0.25


def build(iterations=ITERATIONS, share=SHARE):
    """The topology; `iterations` (the loop's length) is read by run()."""
    topology = Topology("cputime", tdf=TDF)
    dilated = topology.add_host("hdil", ip="10.0.0.1/24")
    real = topology.add_host("hreal", ip="10.0.0.2/24", cpu_time="real")
    shared = topology.add_host("hshare", ip="10.0.0.3/24", cpu_share=float(share))
    switch = topology.add_switch("s1")
    for host in (dilated, real, shared):
        topology.add_link(host, switch)
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
        for node in ("hdil", "hreal", "hshare"):
            rates[node, tdf] = work_per_virtual_s(exp, node, iterations)
            exp.record(f"work_per_s_{node}_tdf{tdf}", rates[node, tdf], unit="1/s")

    def ratio(node):
        return statistics.median(rates[node, TDF]) / statistics.median(rates[node, 1])

    exp.record("real_cpu_ratio", ratio("hreal"), expected=1.0)
    exp.record("share_cpu_ratio", ratio("hshare"), expected=1.0)
    exp.record("dilated_cpu_ratio", ratio("hdil"), expected=float(TDF))
    share = exp.topology.nodes["hshare"].cpu_share
    cpus = exp.host.cpus if exp.host is not None else None
    exp.record("share_over_dilated_tdf1",
               statistics.median(rates["hshare", 1]) / statistics.median(rates["hdil", 1]),
               expected=min(1.0, share * cpus) if cpus else None)
    exp.node("hshare").set_cpu_share(None)
    lifted = work_per_virtual_s(exp, "hshare", iterations)
    exp.record("work_per_s_hshare_lifted_tdf1", lifted, unit="1/s")
    exp.record("lifted_over_dilated_tdf1",
               statistics.median(lifted) / statistics.median(rates["hdil", 1]), expected=1.0)
