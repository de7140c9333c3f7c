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

from selena.backends.xl import DEFAULT_PARALLEL, XlBackend
from selena.experiment import Experiment
from selena.model import Topology
from selena.runner import CommandResult, Runner


def topology(n: int) -> Topology:
    topo = Topology(f"benchdep{n}", tdf=1)
    hosts = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, n + 1)]
    if n > 1:
        topo.add_hub("lan", *hosts)
    return topo


def breakdown(history: list[CommandResult]) -> dict[str, tuple[int, float]]:
    """Commands run during a deploy by program: (how many, real seconds).
    With several guests created at a time their times overlap, so the sum
    can exceed the deploy's own time."""
    spent: dict[str, tuple[int, float]] = {}
    for result in history:
        name = Path(result.argv[0]).name if result.argv else "?"
        if name.startswith("python") and "-m" in result.argv:
            name = result.argv[result.argv.index("-m") + 1]
        count, seconds = spent.get(name, (0, 0.0))
        spent[name] = (count + 1, seconds + result.duration)
    return spent


def main_in_dom0(sizes: list[int], parallels: list[int]) -> int:
    runner = Runner()
    rows = []
    spent: dict[tuple[int, int], dict[str, tuple[int, float]]] = {}
    for n in sizes:
        raw = None
        for parallel in parallels:
            backend = XlBackend(runner, state_dir=Path("/tmp/bench-deploy"), parallel=parallel)
            if raw is None:
                raw = backend.raw_create_seconds(Experiment(topology(n), backend=backend).plan())
            # A fresh experiment each time, so every row's deploy includes its
            # validation (and the host check it makes).
            exp = Experiment(topology(n), backend=backend)
            mark = len(runner.history)
            start = time.perf_counter()
            exp.deploy(wait=False)
            selena = time.perf_counter() - start
            spent[(n, parallel)] = breakdown(runner.history[mark:])
            exp.close()
            rows.append((n, parallel, selena, raw))
    print("  deploy of N tiny guests (real seconds, TDF 1, no boot wait) against the sum of "
          "raw xl create times in the same run")
    print(f"  {'N':>3} {'at a time':>9} {'selena deploy':>14} {'sum xl create':>14} "
          f"{'ratio':>6} {'per guest':>10}")
    for n, parallel, selena, raw in rows:
        print(f"  {n:>3} {parallel:>9} {selena:>14.2f} {raw:>14.2f} {selena / raw:>6.2f} "
              f"{selena / n:>10.2f}")
    print("  commands run by each deploy (count x, real seconds summed over threads):")
    for (n, parallel), programs in spent.items():
        parts = ", ".join(f"{name} {count}x {seconds:.2f}" for name, (count, seconds)
                          in sorted(programs.items(), key=lambda kv: -kv[1][1]))
        print(f"  N={n} at a time {parallel}: {parts}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,4,8")
    parser.add_argument("--parallel", default=str(DEFAULT_PARALLEL),
                        help="guests created at a time, comma-separated to compare")
    a = parser.parse_args()
    sys.exit(main_in_dom0([int(x) for x in a.sizes.split(",")],
                          [int(x) for x in a.parallel.split(",")]))
