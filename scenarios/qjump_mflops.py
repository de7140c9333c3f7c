"""QJump in SELENA, Figures 2 and 3: the aggregate CPU work of 1, 2 and 4
VMs running a CPU-bound benchmark at once, per TDF, without a CPU cap
(Figure 2) and with each VM capped to 100/TDF % of a CPU (Figure 3, the
paper's TDF x cap = 100; selena's cpu_time="real").

The paper ran a floating-point benchmark and summed its MFLOPS over 1, 2, 5
and 10 VMs at TDF 1, 10 and 20. The tiny guests have no such benchmark, so
each runs a CPU-bound busybox shell loop (integer arithmetic, no system
calls; scenarios/cpu_time.py's), timed by the guest agent in virtual time:
the figure is loop iterations per virtual second, summed over the VMs that
ran at once. What the paper's figures show does not depend on the unit:
uncapped, a dilated VM does TDF times the work per virtual second and the
sum stops growing once the VMs outnumber the lab's 2 cores; capped, each VM
does what it would at TDF 1 and the sum grows linearly with the VMs.

    selena run scenarios/qjump_mflops.py --param cpu=dilated --out results/mflops-fig2
    selena run scenarios/qjump_mflops.py --param cpu=real --out results/mflops-fig3

Parameters: cpu (dilated | real), vms ("1,2,4"), tdfs ("1,10,20"; the run
deploys at the first and changes the TDF between them), iterations (the
loop's length, 20000), repeats (2). Records work_per_s_tdf<T>_vms<N>: the
summed iterations per virtual second, one sample per repeat.
"""

from selena.model import Topology

VMS = "1,2,4"
TDFS = "1,10,20"
ITERATIONS = 20000
REPEATS = 2
CPU_MODES = ("dilated", "real")


def _ints(text, name):
    try:
        values = [int(x) for x in str(text).split(",") if x]
    except ValueError:
        raise ValueError(f"{name}={text!r}: want comma-separated whole numbers") from None
    if not values or min(values) < 1:
        raise ValueError(f"{name}={text!r}: want comma-separated whole numbers >= 1")
    return values


def build(cpu="dilated", vms=VMS, tdfs=TDFS, iterations=ITERATIONS, repeats=REPEATS):
    """The topology (as many VMs as the most that run at once); the other
    parameters are read by run()."""
    if cpu not in CPU_MODES:
        raise ValueError(f"cpu={cpu!r}: want one of {', '.join(CPU_MODES)}")
    count = max(_ints(vms, "vms"))
    tdf = _ints(tdfs, "tdfs")[0]
    topology = Topology(f"mflops-{cpu}", tdf=tdf)
    hosts = [topology.add_host(f"h{k}", ip=f"10.0.0.{k}/24", cpu_time=cpu)
             for k in range(1, count + 1)]
    if count > 1:
        topology.add_hub("lan", *hosts)
    return topology


def aggregate_rate(exp, nodes, iterations):
    """The loop on every node at once; the sum of iterations per virtual second."""
    loop = f"i=0; while [ $i -lt {iterations} ]; do i=$((i+1)); done"
    results = exp.parallel(*[lambda node=node: exp.cmd(node, loop, timeout=1200)
                             for node in nodes])
    total = 0.0
    for node, result in zip(nodes, results, strict=True):
        if not result.ok or not result.dur_ns:
            raise RuntimeError(f"{node}: the CPU loop {result.summary()}")
        total += iterations / (result.dur_ns / 1e9)
    return total


def run(exp):
    vms = _ints(exp.params.get("vms", VMS), "vms")
    tdfs = _ints(exp.params.get("tdfs", TDFS), "tdfs")
    iterations = int(exp.params.get("iterations", ITERATIONS))
    repeats = int(exp.params.get("repeats", REPEATS))
    for k, tdf in enumerate(tdfs):
        if k:
            exp.set_tdf(tdf)
        for n in vms:
            nodes = [f"h{i}" for i in range(1, n + 1)]
            rates = [aggregate_rate(exp, nodes, iterations) for _ in range(repeats)]
            exp.record(f"work_per_s_tdf{tdf}_vms{n}", rates, unit="iterations/s")
