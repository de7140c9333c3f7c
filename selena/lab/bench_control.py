"""`selena lab bench-control`: push-to-exit round trip of a trivial command
(`true`) through the control channel, p50 and p99, with 1 and 8 guests,
against the subprocess approach (`xenstore-write` + `xenstore-watch` +
`xenstore-read` per command, as SELENA's controller did) in the same run.

The round trip is then broken down: the channel's floor (a Xenstore write,
the guest's watch, a write back, from `selena-agent xs echo` in the guest:
no process started), the guest's own time to run `true` (the agent's
timestamps), and selena's overhead (the rest), with 1 and 8 guests and with
one more guest flooding output beside them.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from selena.backends.xl import XlBackend
from selena.control.channel import Controller, base_path
from selena.control.interface import CommandChannel
from selena.control.protocol import CommandSpec, parse_state
from selena.experiment import Experiment
from selena.lab.taskstats import Taskstats
from selena.model import Topology
from selena.runner import Runner

TRUE = CommandSpec(argv=("true",))


class _Final(Exception):
    """Stops the xenstore-watch subprocess once the command is final."""


def channel_round_trips(ctl: CommandChannel, guests: list[str], total: int,
                        executions: list[float] | None = None) -> list[float]:
    """`total` commands, spread over the guests, each guest one after another;
    each command's run time in the guest goes to `executions`, in the order of
    the round trips returned."""
    ran: dict[str, list[float]] = {guest: [] for guest in guests}

    def worker(guest: str, count: int) -> list[float]:
        times = []
        for _ in range(count):
            start = time.perf_counter()
            result = ctl.run(guest, TRUE, timeout=120)
            times.append(time.perf_counter() - start)
            if not result.ok:
                raise RuntimeError(f"`true` on {guest}: {result.summary()}")
            # TDF 1: guest time is real time.
            ran[guest].append((result.dur_ns or 0) / 1e9)
        return times
    times = _spread(worker, guests, total)
    if executions is not None:
        executions.extend(t for guest in guests for t in ran[guest])
    return times


def pipelined_round_trips(ctl: CommandChannel, guests: list[str], total: int,
                          executions: list[float] | None = None) -> list[float]:
    """`total` commands from one thread, one in flight per guest: submit on
    every guest, then wait for each in turn and submit that guest's next.
    The same Xenstore traffic as channel_round_trips with no caller thread
    per guest, so the two differ by the hand-offs between threads."""
    left = dict(zip(guests, _shares(total, len(guests)), strict=True))
    in_flight = {}
    for guest in guests:
        if left[guest]:
            left[guest] -= 1
            in_flight[guest] = (time.perf_counter(), ctl.submit(guest, TRUE))
    times = []
    while in_flight:
        for guest in list(in_flight):
            start, handle = in_flight.pop(guest)
            result = ctl.wait(handle, timeout=120)
            times.append(time.perf_counter() - start)
            if not result.ok:
                raise RuntimeError(f"`true` on {guest}: {result.summary()}")
            if executions is not None:
                executions.append((result.dur_ns or 0) / 1e9)
            if left[guest]:
                left[guest] -= 1
                in_flight[guest] = (time.perf_counter(), ctl.submit(guest, TRUE))
    return times


def floor_round_trips(exp: Experiment, guests: list[str], total: int) -> list[float]:
    """Xenstore write -> the guest's watch -> its write back, `total` times,
    spread over the guests, all of them at once: the floor under the same
    load as the commands it is the floor of (measured alone, the emulated
    machine's queueing with several guests would count as selena's)."""
    return _spread(lambda guest, count: _floor_on(exp, guest, count), guests, total)


def _floor_on(exp: Experiment, guest: str, count: int) -> list[float]:
    ctl = exp.controller
    assert isinstance(ctl, Controller)     # Xenstore itself: the xl backend's channel
    base = f"{base_path(exp.domid(guest))}/out/bench-floor"
    ping, pong = f"{base}/ping", f"{base}/pong"
    changed = threading.Event()
    token = f"selena-bench-floor-{guest}"
    ctl.xs.watch(pong, token, lambda _path, _token: changed.set())
    responder = exp.start(guest, ["selena-agent", "xs", "echo", ping, pong, str(count)])
    times = []
    try:
        _wait_for(ctl, pong, b"ready", changed, 60)
        for i in range(1, count + 1):
            changed.clear()
            start = time.perf_counter()
            ctl.xs.write(ping, str(i))
            _wait_for(ctl, pong, str(i).encode(), changed, 10)
            times.append(time.perf_counter() - start)
    finally:
        ctl.xs.unwatch(pong, token)
    result = exp.wait(responder)
    if not result.ok:
        raise RuntimeError(f"the echo responder on {guest}: {result.summary()}")
    ctl.xs.rm(base)
    return times


def _wait_for(ctl: Controller, path: str, value: bytes, changed: threading.Event,
              timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while ctl.xs.read_or_none(path) != value:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"{path} never became {value!r}")
        changed.wait(min(left, 0.5))
        changed.clear()


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

            def on_event(line: str, cid: str = cid, base: str = base) -> None:
                # A read, a subprocess, per event, as SELENA's approach: the
                # final state is in agent/started/<id> once the end marker's
                # event comes (an agent asked for markers, PROTOCOL.md), else
                # in `state`. The watch's first event may come after the
                # command ended, and says neither: both are looked at. (No
                # parse_end here: `--baseline` runs this module against a
                # revision's selena.control from before markers.)
                path = (line.split() or [""])[0]
                keys = ([f"agent/started/{cid}"] if "/end/" in path
                        else [f"out/{cid}/state", f"agent/started/{cid}"])
                for key in keys:
                    state = runner.run(["xenstore-read", f"{base}/{key}"], check=False)
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
        # The agent's `running` markers (PROTOCOL.md), untimed: SELENA's
        # controller knew no such key, and they count against the guest's quota.
        runner.run(["xenstore-rm", f"{base}/agent/started"], check=False)
        return times
    return _spread(worker, list(domids), total)


def _watch(runner: Runner, path: str, on_event: Callable[[str], None]) -> None:
    try:
        runner.stream(["xenstore-watch", path], on_event, check=False, timeout=120)
    except _Final:
        pass


def _shares(total: int, n: int) -> list[int]:
    """`total` split over `n` as evenly as whole numbers go."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


# Called once the workers of _spread have done their work, before they end:
# what a thread used is read from the kernel while it lives (_OwnCpu).
_BEFORE_WORKERS_END: list[Callable[[], None]] = []


def _spread(worker: Callable[[str, int], list[float]], guests: list[str],
            total: int) -> list[float]:
    with ThreadPoolExecutor(len(guests)) as pool:
        parts = list(pool.map(worker, guests, _shares(total, len(guests))))
        for look in _BEFORE_WORKERS_END:
            look()
    return [t for part in parts for t in part]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main_in_dom0(commands: int, baseline_commands: int, guests: int,
                 split_cpus: bool = False, beside: bool = False) -> int:
    runner = Runner()
    topo = Topology("benchctl", tdf=1)
    with cpus_split(runner) if split_cpus else contextlib.nullcontext() as guest_cpus:
        for i in range(1, guests + 1):
            topo.add_host(f"h{i}", cpus=guest_cpus)
        return _measure(runner, topo, commands, baseline_commands, guests, beside)


@contextlib.contextmanager
def cpus_split(runner: Runner, cpu_root: Path = Path("/sys/devices/system/cpu")
               ) -> Iterator[str]:
    """Dom0 on a physical CPU of its own (one vCPU pinned to CPU 0) while
    the block runs, which gets the guests' CPU mask (the other CPUs); Dom0's
    vCPUs are given back after. What Xen's tuning advice gives a busy Dom0:
    under emulation a guest vCPU that preempts Dom0's costs Dom0 more than
    the time it takes (docs/benchmarks.md)."""
    host_cpus = XlBackend(runner).host_info().cpus or 0
    if host_cpus < 2:
        raise RuntimeError(f"splitting the CPUs needs 2 or more, the host has {host_cpus}")
    # `xl vcpu-list 0`: a header, then a line per vCPU.
    dom0_vcpus = len(runner.run(["xl", "vcpu-list", "0"]).stdout.strip().splitlines()) - 1
    guest_cpus = f"1-{host_cpus - 1}" if host_cpus > 2 else "1"
    try:
        runner.run(["xl", "vcpu-set", "0", "1"])
        runner.run(["xl", "vcpu-pin", "0", "all", "0"])
        print(f"  CPUs split: Dom0 on one of its {dom0_vcpus} vCPUs, pinned to CPU 0; the "
              f"guests on CPU(s) {guest_cpus} of {host_cpus}", flush=True)
        yield guest_cpus
    finally:
        runner.run(["xl", "vcpu-set", "0", str(dom0_vcpus)], check=False)
        runner.run(["xl", "vcpu-pin", "0", "all", "all"], check=False)
        _online_cpus(cpu_root, dom0_vcpus)


def _online_cpus(cpu_root: Path, count: int, wait_s: float = 10.0) -> None:
    """Bring Dom0's CPUs 1..count-1 online again: `xl vcpu-set` only makes
    a vCPU present to a PV Dom0, whose kernel leaves it offline until
    something writes its sysfs `online` (udev on a full system; the lab's
    Dom0 has none). A vCPU left offline would make every later
    measurement in the boot one of a one-vCPU Dom0."""
    deadline = time.monotonic() + wait_s
    for cpu in range(1, count):
        online = cpu_root / f"cpu{cpu}" / "online"
        while not online.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            if online.read_text().strip() != "1":
                online.write_text("1")
        except OSError as exc:
            print(f"  CPU {cpu} of Dom0 not brought online again: {exc}", flush=True)


def _measure(runner: Runner, topo: Topology, commands: int, baseline_commands: int,
             guests: int, beside: bool = False) -> int:
    rows = []
    # The guests come up through the experiment lifecycle; the baseline then
    # drives them the way SELENA's original controller did, with one
    # xenstore-* subprocess per operation (the figure this benchmark compares).
    # Without the fidelity monitor: it samples Dom0 on a timer (xl, tc and a
    # packet capture), whatever the commands do, and its cost has its own
    # measurement (docs/fidelity.md); here CPU per command is the channel's.
    with Experiment(topo, command_timeout=None, monitor=False) as exp:
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
        breakdown = _breakdown(exp, sorted(domids), commands, beside)
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
    print("  breakdown of the watch channel's round trip (ms): floor = Xenstore write, "
          "guest watch, write back, with as many guests at once; guest = running `true`; "
          "selena = the rest; Dom0 CPU ms per command")
    print(f"  {'case':<40} {'floor p50':>9} {'p99':>6} {'guest p50':>9} {'p99':>6} "
          f"{'selena p50':>10} {'p99':>6} {'total p50':>9} {'p99':>6} "
          f"{'cpu selena':>10} {'xenstored':>9}")
    for case, floor, executions, totals, cpu, _pump in breakdown:
        base = statistics.median(floor)
        own = [t - base - e for t, e in zip(totals, executions, strict=False)]
        print(f"  {case:<40} {_pct(floor, .5):>9.1f} {_pct(floor, .99):>6.1f} "
              f"{_pct(executions, .5):>9.1f} {_pct(executions, .99):>6.1f} "
              f"{_pct(own, .5):>10.1f} {_pct(own, .99):>6.1f} "
              f"{_pct(totals, .5):>9.1f} {_pct(totals, .99):>6.1f} "
              f"{cpu.selena * 1000:>10.1f} {cpu.xenstored * 1000:>9.1f}")
    print("  Dom0 CPU ms per command: selena's process in user and kernel mode, xenstored, "
          "and the whole Dom0's interrupt (irq + softirq) and stolen time; `own`: selena's "
          "and xenstored's by the kernel's tick accounting, the time Xen ran another vCPU "
          "while theirs was current left out (the run times above count it)")
    print(f"  {'case':<40} {'selena':>7} {'user':>6} {'kernel':>6} {'xenstored':>9} "
          f"{'Dom0 irq':>8} {'steal':>6} {'selena own':>10} {'kernel':>6} "
          f"{'xenstored own':>13}")
    for case, *_, cpu, _pump in breakdown:
        print(f"  {case:<40} {cpu.selena * 1000:>7.1f} {cpu.selena_user * 1000:>6.1f} "
              f"{cpu.selena_system * 1000:>6.1f} {cpu.xenstored * 1000:>9.1f} "
              f"{cpu.dom0_irq * 1000:>8.1f} {cpu.dom0_steal * 1000:>6.1f} "
              f"{cpu.selena_own * 1000:>10.1f} {cpu.selena_own_kernel * 1000:>6.1f} "
              f"{cpu.xenstored_own * 1000:>13.1f}")
    print("  the pump per command: passes that served a guest (0: not counted by this "
          "channel) and watch events that could give work")
    for case, *_, (passes, events) in breakdown:
        print(f"  {case:<40} passes {passes:>5.2f} events {events:>5.2f}")
    # For `selena lab bench-control --baseline`, which compares runs.
    print(CPU_MARKER + json.dumps({case: cpu_ms(cpu) for case, *_, cpu, _pump in breakdown}))
    return 0


CPU_MARKER = "BENCH-CONTROL-CPU "


def cpu_ms(cpu: Dom0Cpu) -> dict[str, float]:
    """One case's Dom0 CPU per command in ms, by name, rounded to 0.01."""
    return {"selena": round(cpu.selena * 1000, 2), "user": round(cpu.selena_user * 1000, 2),
            "kernel": round(cpu.selena_system * 1000, 2),
            "xenstored": round(cpu.xenstored * 1000, 2),
            "steal": round(cpu.dom0_steal * 1000, 2),
            "selena_own": round(cpu.selena_own * 1000, 2),
            "selena_own_kernel": round(cpu.selena_own_kernel * 1000, 2),
            "xenstored_own": round(cpu.xenstored_own * 1000, 2)}


class Dom0Cpu(NamedTuple):
    """CPU seconds used so far in Dom0: this process (the controller's threads
    and the callers') in user and in kernel mode, xenstored, and the whole
    Dom0's interrupt and stolen time. Stolen time is what Xen ran elsewhere
    while a Dom0 vCPU wanted to run. The interrupt time stays 0 on Debian's
    kernel (no IRQ time accounting: an interrupt is charged to whichever
    task it lands on); a kernel with it would show it here.

    The run times in /proc (selena_user, selena_system, xenstored) count the
    time Xen ran another vCPU while the thread was current on Dom0's (a
    kernel without PARAVIRT_TIME_ACCOUNTING, as Debian's, cannot tell it
    apart); selena_own and xenstored_own, from the tick accounting, leave
    it out (_OwnCpu)."""
    selena_user: float
    selena_system: float
    xenstored: float
    dom0_irq: float
    dom0_steal: float
    selena_own: float = 0.0
    selena_own_kernel: float = 0.0
    xenstored_own: float = 0.0

    def per_command(self, since: Dom0Cpu, commands: int) -> Dom0Cpu:
        return Dom0Cpu(*((now - then) / commands for now, then in zip(self, since, strict=True)))

    @property
    def selena(self) -> float:
        return self.selena_user + self.selena_system


def _dom0_cpu_seconds() -> Dom0Cpu:
    tick = os.sysconf("SC_CLK_TCK")

    def used(pid: str) -> tuple[float, float]:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[11]) / tick, int(fields[12]) / tick
    xenstored = _xenstored_pids()
    # /proc/stat's first line: user nice system idle iowait irq softirq steal ...
    totals = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, system = used("self")
    return Dom0Cpu(user, system, sum(sum(used(pid)) for pid in xenstored),
                   (totals[5] + totals[6]) / tick, totals[7] / tick)


class _OwnCpu:
    """CPU seconds of this process's threads and of xenstored's since it was
    made, by the kernel's tick accounting (taskstats: stolen time left out).
    A thread counts from 0 if it started since, and up to the last look at
    it if it has ended: the workers of _spread are looked at before they end
    (_BEFORE_WORKERS_END)."""

    def __init__(self, stats: Taskstats, xenstored: list[str]):
        self._stats = stats
        self._pids = {"selena": ["self"], "xenstored": xenstored}
        self._first = self._threads()
        self._last = {key: dict(seen) for key, seen in self._first.items()}

    def _threads(self) -> dict[tuple[str, str], dict[int, tuple[float, float]]]:
        return {(who, pid): self._stats.threads(pid)
                for who, pids in self._pids.items() for pid in pids}

    def look(self) -> None:
        for key, seen in self._threads().items():
            self._last[key].update(seen)

    def used(self) -> dict[str, tuple[float, float]]:
        """selena's and xenstored's user and system seconds so far."""
        self.look()
        total = {"selena": [0.0, 0.0], "xenstored": [0.0, 0.0]}
        for (who, pid), seen in self._last.items():
            first = self._first[(who, pid)]
            for tid, now in seen.items():
                then = first.get(tid, (0.0, 0.0))
                total[who][0] += now[0] - then[0]
                total[who][1] += now[1] - then[1]
        return {who: (user, system) for who, (user, system) in total.items()}


def _xenstored_pids() -> list[str]:
    return [entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()
            and _comm(entry) in ("oxenstored", "xenstored")]


def _tasks(pid: str) -> list[int]:
    try:
        return [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:
        return []               # exited meanwhile


@contextlib.contextmanager
def beside_xenstored(cpu: int, pids: list[str]) -> Iterator[None]:
    """Every thread of this process and of the processes `pids` (xenstored's,
    or none) on one Dom0 vCPU while the block runs; each thread gets its
    own CPU mask back after, and threads started meanwhile the process's.
    A request and its reply then change hands on one vCPU instead of
    waking the other one through Xen, which the emulation makes dear
    (docs/benchmarks.md: Dom0 on one vCPU cost less per command)."""
    saved: dict[int, set[int]] = {}
    process_mask = os.sched_getaffinity(0)
    try:
        for pid in ["self", *pids]:
            for tid in _tasks(pid):
                with contextlib.suppress(ProcessLookupError):     # a thread that ended
                    saved[tid] = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, {cpu})
        yield
    finally:
        started = {tid: process_mask for tid in _tasks("self") if tid not in saved}
        for tid, mask in {**saved, **started}.items():
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(tid, mask)


def _comm(proc: Path) -> str:
    try:
        return (proc / "comm").read_text().strip()
    except OSError:
        return ""               # exited meanwhile


def _breakdown(exp: Experiment, guests: list[str], commands: int,
               beside: bool = False
               ) -> list[tuple[str, list[float], list[float], list[float], Dom0Cpu,
                                tuple[float, float]]]:
    """Floor, guest execution, total, Dom0 CPU seconds per command (selena's
    process, xenstored) and the pump's passes and watch events per command,
    per case: 1 guest, all but one (a caller thread per
    guest, then one thread for all), and all but one beside the last one
    flooding output. With `beside`, each case but the flooding one is run
    again right after it with selena's and xenstored's threads on one vCPU
    (beside_xenstored), then with selena's alone there."""
    ctl = exp.controller
    assert isinstance(ctl, Controller)     # Xenstore itself: the xl backend's channel
    rows = []
    serving, flooder = guests[:-1] or guests, guests[-1]
    Drive = Callable[[CommandChannel, list[str], int, list[float] | None], list[float]]
    # (case, guests, flood, drive, the other pids on selena's vCPU or None: unpinned)
    cases: list[tuple[str, list[str], bool, Drive, list[str] | None]] = []
    unpinned: list[tuple[str, list[str], bool, Drive]] = [
        ("1 guest", guests[:1], False, channel_round_trips),
        (f"{len(serving)} guests", serving, False, channel_round_trips),
        (f"{len(serving)} guests, one thread", serving, False, pipelined_round_trips),
        (f"{len(serving)} guests + 1 flooding", serving, True, channel_round_trips)]
    for case, names, flood, drive in unpinned:
        cases.append((case, names, flood, drive, None))
        if beside and not flood:
            cases.append((f"{case}, beside xenstored", names, flood, drive, _xenstored_pids()))
            cases.append((f"{case}, selena on one vCPU", names, flood, drive, []))
    with Taskstats() as stats:
        for case, names, flood, drive, pinned in cases:
            with beside_xenstored(0, pinned) if pinned is not None else contextlib.nullcontext():
                flooding = exp.start(flooder, "yes") if flood else None
                floor = floor_round_trips(exp, names, min(commands, 500))
                executions: list[float] = []
                # A baseline's channel (`--baseline`) may not count its passes.
                passes, events = getattr(ctl, "passes_served", 0), ctl.xs.watch_events()
                own = _OwnCpu(stats, _xenstored_pids())
                _BEFORE_WORKERS_END.append(own.look)
                cpu_before = _dom0_cpu_seconds()
                try:
                    totals = drive(ctl, names, commands, executions)
                finally:
                    _BEFORE_WORKERS_END.remove(own.look)
                cpu = _dom0_cpu_seconds().per_command(cpu_before, len(totals))
                used = own.used()
                cpu = cpu._replace(selena_own=sum(used["selena"]) / len(totals),
                                   selena_own_kernel=used["selena"][1] / len(totals),
                                   xenstored_own=sum(used["xenstored"]) / len(totals))
                pump = ((getattr(ctl, "passes_served", 0) - passes) / len(totals),
                        (ctl.xs.watch_events() - events) / len(totals))
                if flooding is not None:
                    exp.kill(flooding)
                    exp.wait(flooding)
            rows.append((case, floor, executions, totals, cpu, pump))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--commands", type=int, default=1000)
    parser.add_argument("--baseline-commands", type=int, default=200)
    parser.add_argument("--guests", type=int, default=8)
    parser.add_argument("--split-cpus", action="store_true")
    parser.add_argument("--beside-xenstored", action="store_true")
    a = parser.parse_args()
    sys.exit(main_in_dom0(a.commands, a.baseline_commands, a.guests, a.split_cpus,
                          a.beside_xenstored))
