"""`selena lab bench-control`: push-to-exit round trip of a trivial command
(`true`) through the control channel, p50 and p99, with 1 and 8 guests,
against the subprocess approach (`xenstore-write` + `xenstore-watch` +
`xenstore-read` per command, as SELENA's controller did) in the same run.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from selena.control.channel import Controller, base_path
from selena.control.protocol import CommandSpec, parse_state
from selena.experiment import Experiment
from selena.model import Topology
from selena.runner import Runner

TRUE = CommandSpec(argv=("true",))


class _Final(Exception):
    """Stops the xenstore-watch subprocess once the command is final."""


def channel_round_trips(ctl: Controller, guests: list[str], total: int) -> list[float]:
    """`total` commands, spread over the guests, each guest one after another."""
    def worker(guest: str, count: int) -> list[float]:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            result = ctl.run(guest, TRUE, timeout=120)
            times.append(time.perf_counter() - start)
            if not result.ok:
                raise RuntimeError(f"`true` on {guest}: {result.summary()}")
        return times
    return _spread(worker, guests, total)


def subprocess_round_trips(runner: Runner, domids: dict[str, int], total: int) -> list[float]:
    counter = iter(range(10**9))
    lock = threading.Lock()

    def worker(guest: str, count: int) -> list[float]:
        base = base_path(domids[guest])
        times = []
        for _ in range(count):
            with lock:
                cid = f"sub{next(counter)}"
            start = time.perf_counter()

            def on_event(_line: str, cid: str = cid, base: str = base) -> None:
                state = runner.run(["xenstore-read", f"{base}/out/{cid}/state"], check=False)
                if state.returncode == 0 and parse_state(state.stdout).final:
                    raise _Final

            watcher = threading.Thread(target=_watch, args=(runner, f"{base}/out/{cid}",
                                                            on_event))
            watcher.start()
            runner.run(["xenstore-write", f"{base}/cmd/{cid}", TRUE.encode()])
            watcher.join(120)
            runner.run(["xenstore-rm", f"{base}/cmd/{cid}"])
            runner.run(["xenstore-rm", f"{base}/out/{cid}"])
            times.append(time.perf_counter() - start)
        return times
    return _spread(worker, list(domids), total)


def _watch(runner: Runner, path: str, on_event: Callable[[str], None]) -> None:
    try:
        runner.stream(["xenstore-watch", path], on_event, check=False, timeout=120)
    except _Final:
        pass


def _spread(worker: Callable[[str, int], list[float]], guests: list[str],
            total: int) -> list[float]:
    share = [total // len(guests) + (1 if i < total % len(guests) else 0)
             for i in range(len(guests))]
    with ThreadPoolExecutor(len(guests)) as pool:
        parts = list(pool.map(worker, guests, share))
    return [t for part in parts for t in part]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main_in_dom0(commands: int, baseline_commands: int, guests: int) -> int:
    runner = Runner()
    topo = Topology("benchctl", tdf=1)
    for i in range(1, guests + 1):
        topo.add_host(f"h{i}")
    rows = []
    # The guests come up through the experiment lifecycle; the baseline then
    # drives them the way SELENA's original controller did, with one
    # xenstore-* subprocess per operation (the figure this benchmark compares).
    with Experiment(topo, command_timeout=None) as exp:
        assert exp.controller is not None
        domids = exp.domids
        for n in (1, guests):
            names = sorted(domids)[:n]
            start = time.perf_counter()
            rtt = channel_round_trips(exp.controller, names, commands)
            rows.append(("watch channel", n, rtt, time.perf_counter() - start))
        for n in (1, guests):
            subset = {k: domids[k] for k in sorted(domids)[:n]}
            start = time.perf_counter()
            rtt = subprocess_round_trips(runner, subset, baseline_commands)
            rows.append(("subprocess", n, rtt, time.perf_counter() - start))
    print("  control channel: push-to-exit round trip of `true` (TDF 1)")
    print(f"  {'approach':<14} {'guests':>6} {'commands':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'mean ms':>8} {'cmds/s':>7}")
    for name, n, rtt, wall in rows:
        print(f"  {name:<14} {n:>6} {len(rtt):>8} {_pct(rtt, .5):>8.1f} {_pct(rtt, .99):>8.1f} "
              f"{statistics.mean(rtt) * 1000:>8.1f} {len(rtt) / wall:>7.1f}")
    by = {(name, n): rtt for name, n, rtt, _ in rows}
    for n in (1, guests):
        ratio = _pct(by[("subprocess", n)], .5) / _pct(by[("watch channel", n)], .5)
        print(f"  p50 ratio subprocess / watch channel with {n} guest(s): {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--baseline-commands", type=int, default=200)
    parser.add_argument("--guests", type=int, default=8)
    a = parser.parse_args()
    sys.exit(main_in_dom0(a.commands, a.baseline_commands, a.guests))
