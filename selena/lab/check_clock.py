"""End-to-end proof of time dilation, run in the lab's Dom0.

Deploys one tiny-host guest through the experiment lifecycle (created
paused, its TDF set before it first runs), runs `clockcheck`
(guest-templates/tools) in it with its output on the guest console, and
timestamps every line on arrival in Dom0's real clock. It then checks:

- every guest clock (CLOCK_MONOTONIC, CLOCK_REALTIME, gettimeofday) runs at
  1/TDF of Dom0's real clock within 1% (least-squares fit over the samples);
- every timer (nanosleep, timerfd, select, poll) takes TDF x its virtual
  duration of real time within 2%, plus TIMER_SLACK_REAL_S of real time and
  TIMER_SLACK_VIRTUAL_S of guest time for TCG emulation and wake-up latency
  (less CONSOLE_LATENCY_S on the early side: the measurement's own error;
  a timer's last line stamped after a pause of Dom0's console reader is
  judged from the earliest it can have arrived), and in the guest's own
  clock never fires early nor later than those bounds allow;
- changing the TDF of the running guest (N -> 2 -> N, or any sequence
  with --change-to) keeps guest time monotonic and continuous and the rate
  follows the new factor (1%);
- steal time (per vCPU, from the guest's /proc/stat) never decreases and
  never exceeds the virtual time elapsed, across the changes;
- a guest with an armed watchdog (2 s of guest time, pinged every 0.5 s)
  survives the run: raising the TDF x5 kills it unless the hypervisor
  re-arms the watchdog in virtual time;
- a timer armed at the start (an absolute CLOCK_MONOTONIC timerfd),
  pending across the first change, fires at its deadline in guest time
  (never before; no later than the timers' slack; if it fell due while a
  save had the guest's user space frozen, no later than the slack after
  the thaw);
- with --vcpus K: clocks read on every vCPU are monotonic across vCPUs,
  each further vCPU's own CLOCK_MONOTONIC runs at 1/TDF before and after
  every change (1%; user space on every vCPU, not only vCPU 0, sees the
  new rate), and timers on every vCPU take TDF x their duration;
- the TSC the guest reads ticks, per second of guest time, at the frequency
  CPUID leaf 0x40000003 reports (1%): no raw TSC escapes dilation (with
  --tsc emulate or the default mode, the TSC is emulated; --tsc native is
  the opt-out that reads the raw TSC, checked against the dilated CPUID).

With --save-restore and/or --migrate the guest is instead created with xl
directly (the experiment's state would not survive a new domain id), saved
with `xl save` after its first segment and restored with `xl restore`,
and/or migrated to this same host with `xl migrate`, each followed by a
segment at its TDF; then the changes (`selena-tdf set`). Every check above
runs on it, and for each save or migration: the new domain arrives with
the TDF and frozen, and stays so until `selena-tdf thaw` (xl's own unpause
does not start it); CLOCK_MONOTONIC and CLOCK_REALTIME across it, each on
a line of its own, advance by what the guest ran, no more (at most the
save's own duration at 1/TDF, within 0.1 s). Between the save and the
restore Dom0's wall clock is moved forward by --host-clock-step seconds
(default 3600, put back once the guest runs again; none for an HVM guest,
whose RTC Xen moves with that clock): a restore after the host rebooted,
or on another host, finds a different host wall clock, and the guest's
own must not follow it.

With --guest hvm the guest's clocks read --clocksource's counter, its
timers fire on the LAPIC timer (Xen's timer device in a guest to be
saved or on Xen's clocksource, "xen": both need the vector callback),
and the RTC's update interrupts and PIT channel 2's count must follow guest
time across every change and checkpoint (the RTC's rate
between checkpoints, its date after each against the guest's wall clock).

Run in Dom0: python3 -m selena.lab.check_clock --tdf 10 [--vcpus 2]
    [--tsc native|emulate] [--change-to 2,10,1] [--save-restore | --migrate]
From the host: selena lab check-clock --tdf 10 ...
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from selena.errors import SelenaError
from selena.experiment import Experiment
from selena.lab.dom0 import (
    HVM_CLOCKSOURCES,
    console_log,
    create_paused,
    sh,
    status,
    tiny_guest_config,
    try_sh,
)
from selena.model import Topology
from selena.model.topology import GUEST_TYPES
from selena.plan import XL_TSC_MODES

T = TypeVar("T")
EXPERIMENT = "clockcheck"
NODE = "g"
GUEST = f"selena-{EXPERIMENT}-{NODE}"      # its domain, whose console log is read
CLOCK_TOLERANCE = 0.01
TIMER_TOLERANCE = 0.02
TIMER_SLACK_REAL_S = 0.10
TIMER_SLACK_VIRTUAL_S = 0.01
# A timer's real duration is measured between the arrivals of two console
# lines in Dom0; a late first line makes it look short. Early firing itself is
# checked in the guest's own clock, so the lower bound allows this much
# arrival latency (a CI run saw 17 ms at TDF 1).
CONSOLE_LATENCY_S = 0.05
# The console reader polls every 2 ms; a pause longer than this between two
# of its reads (Dom0 busy) is recorded: a line stamped after it arrived
# somewhere in the pause, and is judged from the earliest it can have.
READER_PAUSE_S = 0.01
TIMER_MS = 300
FIRST_SEGMENT_VIRTUAL_S = 3.0
SEGMENT_VIRTUAL_S = 2.0
SEGMENT_MIN_REAL_S = 5.0
SETTLE_REAL_S = 0.5   # samples this close to a TDF change are not used for rates
WATCHDOG_S = 2        # guest time; pinged every 0.5 s of guest time
STEAL_GRANULARITY_NS = 10_000_000   # /proc/stat counts in 10 ms ticks
TSC_TOLERANCE = 0.01

LINE = re.compile(r"\b(S|P|C|W|M|V|T0|T1|Q0|Q1|K|R|I) (.*)$")
PIT_HZ = 1_193_182
PLATFORM_TOLERANCE = 0.01
# After a restore the RTC's date and the guest's CLOCK_REALTIME are both the
# domain's wall clock (Linux sets its clock from Xen's at the resume), so an
# update interrupt comes at a whole second of both; the slack is the
# interrupt's delivery (measured: 3-16 ms of guest time).
RTC_DATE_TOLERANCE_S = 0.1
# The emulated TSC minus CLOCK_MONOTONIC moves only at a resume, by the
# time the guest spent suspended (Xen's virtual time runs until the save
# ends: 45-58 ms for a migration, 0.42-0.49 s for a save, at TDF 5 in the
# lab); read one after the other they differ by the time between the
# reads, more only if the vCPU was descheduled between them (a line's
# alone, not its successor's).
RESUME_STEP_NS = 10_000_000
# The clock event device an HVM guest's timers fire on: the LAPIC timer,
# but Xen's in a guest to be saved or whose clocks read Xen's clocksource
# (both need the vector callback: see selena.lab.dom0.HVM_GUEST_CMDLINE).
def hvm_clockevent(checkpoints: bool, clocksource: str = "hpet") -> str:
    return "xen" if checkpoints or clocksource == "xen" else "lapic"
SAVE_FILE = Path("/tmp/selena-clockcheck.save")
HOST_CLOCK_STEP_S = 3600.0
CHECKPOINT_JUMP_S = 0.1      # as a TDF change's continuity
THAW_WAIT_S = 1.0            # real seconds a restored domain is watched before the thaw


@dataclass
class Sample:
    real: float
    mono: int
    realtime: int
    tod: int
    tsc: int


@dataclass
class Run:
    samples: list[Sample] = field(default_factory=list)
    steal: list[tuple[int, list[int]]] = field(default_factory=list)  # (mono, per vCPU)
    timers: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    changes: list[tuple[float, float]] = field(default_factory=list)  # (real time, new tdf)
    cpuid: tuple[int, int, int] | None = None      # leaf 3: kHz, vtsc, tsc_mode
    watchdog: tuple[int, int] | None = None        # timeout, fd
    cross: dict[int, tuple[int, int]] = field(default_factory=dict)  # cpu: reads, backwards
    # Further vCPUs' own reads: cpu -> [(real time, monotonic ns)].
    vcpu_clock: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    done: bool = False
    exited: bool = False        # the guest's init ended (SELENA-GUEST-EXIT)
    tail: str = ""
    issued: list[float] = field(default_factory=list)  # real time each change was issued
    checkpoints: list[Checkpoint] = field(default_factory=list)
    # The timer pending across the first change or checkpoint: (arrival,
    # monotonic ns, deadline ns) when armed, (arrival, monotonic ns) fired.
    pending_armed: tuple[float, int, int] | None = None
    pending_fired: tuple[float, int] | None = None
    # HVM guests: (clocksource, clock event device) at the start and end,
    # RTC update interrupts (boottime ns, RTC seconds, CLOCK_REALTIME ns,
    # CLOCK_MONOTONIC ns, TSC) and the PIT's channel 2 count (boottime ns,
    # ticks since the start, CLOCK_MONOTONIC ns, TSC).
    devices: list[tuple[str, str]] = field(default_factory=list)
    rtc: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    rtc_stopped: bool = False
    pit: list[tuple[int, int, int, int]] = field(default_factory=list)
    # The console reader's pauses: the stamp of the read after each, and
    # how long it came after the one before.
    reader_pauses: dict[float, float] = field(default_factory=dict)


@dataclass
class Checkpoint:
    """A save and restore (or a migration) of the running guest, in real time:
    `start` when xl save (or migrate) began, `saved` when it returned,
    `thawed` when the restored domain was thawed. Guest time runs until the
    end of the save and stands still from there to the thaw."""
    kind: str
    start: float
    saved: float
    thawed: float
    tdf: float
    host_step_s: float = 0.0
    # selena-tdf status of the new domain as it arrived and THAW_WAIT_S later.
    arrived: dict[str, str] = field(default_factory=dict)
    held: dict[str, str] = field(default_factory=dict)


class CheckFailed(Exception):
    pass


def pending_ms(tdf: float, changes: list[float], checkpoints: int = 0) -> int:
    """The guest timer armed at the start to expire halfway through the
    segment after the first change, or three quarters through the one after
    the first checkpoint (0: nothing happens). At TDF 5 in the lab a save
    lasts 1.1-1.3 s of guest time and reaches the guest somewhere in it;
    Linux keeps its user space frozen from then until the thaw, and halfway
    put the deadline inside that freeze in one run of eight."""
    if checkpoints:
        return int((FIRST_SEGMENT_VIRTUAL_S + segment_virtual_s(tdf) * 3 / 4) * 1000)
    if changes:
        return int((FIRST_SEGMENT_VIRTUAL_S + segment_virtual_s(changes[0]) / 2) * 1000)
    return 0


def segment_virtual_s(tdf: float) -> float:
    """Guest seconds at a TDF after a change: at least SEGMENT_MIN_REAL_S real
    seconds, so that enough samples arrive away from the changes under load."""
    return max(SEGMENT_VIRTUAL_S, SEGMENT_MIN_REAL_S / tdf)


def run_guest(tdf: float, changes: list[float], timeout: float, *, vcpus: int = 1,
              tsc: str | None = None, watchdog: int = WATCHDOG_S) -> Run:
    """One guest through the experiment lifecycle, running clockcheck with its
    output on the guest console; each line is timestamped as it arrives in
    Dom0's console log, and the TDF changes go through exp.set_tdf."""
    total_virtual = (FIRST_SEGMENT_VIRTUAL_S + sum(segment_virtual_s(t) for t in changes)
                     + 1.0)
    topo = Topology(EXPERIMENT, tdf=tdf)
    topo.add_host(NODE, vcpus=vcpus, tsc_mode=tsc)
    log = console_log(GUEST)
    log.unlink(missing_ok=True)
    run = Run()
    with Experiment(topo, command_timeout=None) as exp:
        command = (f"exec /usr/bin/clockcheck {int(total_virtual + 0.999)} {TIMER_MS} "
                   f"{vcpus} {watchdog} {pending_ms(tdf, changes)} >/dev/hvc0 2>&1")
        handle = exp.start(NODE, command)
        # Lines are timestamped by a thread of their own: a TDF change takes
        # real time (the guests are paused around it), and a line read late
        # would look like guest time lost.
        stop = threading.Event()
        lock = threading.Lock()
        reader = threading.Thread(target=_follow, args=([log], run, lock, stop), daemon=True)
        reader.start()
        plan: list[tuple[float, float]] = []
        planned = not changes
        start = time.monotonic()
        try:
            while time.monotonic() - start < timeout and not run.done and not handle.done:
                with lock:
                    first = run.samples[0].real if run.samples else None
                if first is not None and not planned:
                    planned = True
                    at = first + FIRST_SEGMENT_VIRTUAL_S * tdf
                    for new in changes:
                        plan.append((at, new))
                        at += segment_virtual_s(new) * new
                while plan and time.monotonic() >= plan[0][0]:
                    _, new = plan.pop(0)
                    issued = time.monotonic()
                    changed = exp.set_tdf(new)
                    with lock:
                        run.changes.append((changed, new))
                        run.issued.append(issued)
                time.sleep(0.01)
            time.sleep(0.2)         # the last lines
        finally:
            stop.set()
            reader.join()
        if handle.done and not run.done:
            result = exp.wait(handle)
            run.tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise CheckFailed(f"clockcheck ended early ({result.summary()}); console:\n"
                              f"{run.tail}")
    run.tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
    if not run.done:
        raise CheckFailed(f"guest did not finish within {timeout:.0f} s (its watchdog may "
                          f"have fired, see xl dmesg); console:\n{run.tail[-2000:]}")
    return run


def run_guest_checkpointed(tdf: float, changes: list[float], timeout: float, *,
                            kinds: list[str], vcpus: int = 1, tsc: str | None = None,
                            watchdog: int = WATCHDOG_S,
                            host_step_s: float = HOST_CLOCK_STEP_S, virt: str = "pv",
                            clocksource: str = "hpet") -> Run:
    """clockcheck in a guest created with xl (as `virt`: "pv", "pvh", or "hvm"
    with its clocks on `clocksource`): after
    its first segment it is saved and restored ("save/restore") and/or
    migrated to this host ("migrate"), in `kinds`' order, each followed by a
    segment at its TDF; then the changes (selena-tdf set)."""
    total_virtual = (FIRST_SEGMENT_VIRTUAL_S + segment_virtual_s(tdf) * len(kinds)
                     + sum(segment_virtual_s(t) for t in changes) + 1.0)
    args = (f"{int(total_virtual + 0.999)},{TIMER_MS},{vcpus},{watchdog},"
            f"{pending_ms(tdf, changes, len(kinds))}")
    lines = (f'tsc_mode = "{XL_TSC_MODES[tsc]}"',) if tsc else ()
    config = tiny_guest_config(GUEST, f"selena.init=/usr/bin/clockcheck selena.args={args}",
                               vcpus=vcpus, lines=lines, virt=virt, clocksource=clocksource,
                               lapic_timer=hvm_clockevent(bool(kinds), clocksource) == "lapic")
    incoming = f"{GUEST}--incoming"
    logs = [console_log(GUEST), console_log(incoming)]
    for log in logs:
        log.unlink(missing_ok=True)
    run = Run()
    stop = threading.Event()
    lock = threading.Lock()
    reader = threading.Thread(target=_follow, args=(logs, run, lock, stop), daemon=True)
    stepped = 0.0
    try:
        domid = create_paused(GUEST, config, tdf)
        reader.start()
        sh("xl", "unpause", GUEST)
        start = time.monotonic()
        next_at: float | None = None
        pending = list(changes)
        points = list(kinds)
        current = tdf
        while time.monotonic() - start < timeout and not run.done and not run.exited:
            with lock:
                first = run.samples[0].real if run.samples else None
                last = run.samples[-1].real if run.samples else None
            if next_at is None and first is not None:
                next_at = first + FIRST_SEGMENT_VIRTUAL_S * tdf
            if next_at is not None and time.monotonic() >= next_at:
                if points:
                    point, domid = _checkpoint(points.pop(0), tdf, host_step_s)
                    stepped = point.host_step_s
                    with lock:
                        run.checkpoints.append(point)
                        run.changes.append((point.thawed, tdf))
                        run.issued.append(point.thawed)
                    next_at = point.thawed + segment_virtual_s(tdf) * tdf
                elif pending:
                    current = pending.pop(0)
                    issued = time.monotonic()
                    sh("selena-tdf", "set", domid, f"{current:g}")
                    changed = time.monotonic()
                    with lock:
                        run.changes.append((changed, current))
                        run.issued.append(issued)
                    next_at += segment_virtual_s(current) * current
                else:
                    next_at = float("inf")
            # The guest reads its wall clock as it resumes: the host's is put
            # back once it runs again.
            if stepped and run.checkpoints and last is not None \
                    and last > run.checkpoints[-1].thawed:
                _step_host_clock(-stepped)
                stepped = 0.0
            time.sleep(0.01)
        time.sleep(0.2)         # the last lines
    finally:
        if stepped:
            _step_host_clock(-stepped)
        stop.set()
        if reader.is_alive():
            reader.join()
        for name in (GUEST, incoming, f"{GUEST}--migratedaway"):
            try_sh("xl", "destroy", name)
        SAVE_FILE.unlink(missing_ok=True)
    run.tail = "".join(log.read_text(errors="replace") for log in logs
                       if log.exists())[-1500:]
    if not run.done:
        ended = "ended early" if run.exited else f"did not finish within {timeout:.0f} s"
        raise CheckFailed(f"guest {ended} (its watchdog may have fired, see xl dmesg); "
                          f"console:\n{run.tail}")
    return run


def _checkpoint(kind: str, tdf: float, host_step_s: float) -> tuple[Checkpoint, str]:
    """Save and restore the guest (Dom0's wall clock stepped in between, a
    step still in force on return: the checkpoint's host_step_s), or migrate
    it to this host; thaw it. The checkpoint and the new domain id."""
    SAVE_FILE.unlink(missing_ok=True)
    stepped = 0.0
    start = time.monotonic()
    if kind == "migrate":
        # An empty ssh command runs the "host" itself: the receiver is local.
        sh("xl", "migrate", "-s", "", GUEST, "xl migrate-receive")
        saved = time.monotonic()
    else:
        sh("xl", "save", GUEST, str(SAVE_FILE))
        saved = time.monotonic()
        if host_step_s:
            _step_host_clock(host_step_s)
            stepped = host_step_s
        try:
            sh("xl", "restore", str(SAVE_FILE))
        except BaseException:
            if stepped:
                _step_host_clock(-stepped)
            raise
    domid = sh("xl", "domid", GUEST).strip()
    # It arrives frozen: the toolstack's own unpause must not start it.
    arrived = status(domid)
    time.sleep(THAW_WAIT_S)
    held = status(domid)
    sh("selena-tdf", "thaw", domid)
    thawed = time.monotonic()
    return Checkpoint(kind, start, saved, thawed, tdf, stepped, arrived, held), domid


def _step_host_clock(seconds: float) -> None:
    """Move Dom0's wall clock; Linux passes it on to Xen (XENPF_settime64),
    which moves every domain's shared-info wall clock."""
    time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME) + seconds)


def _follow(logs: list[Path], run: Run, lock: threading.Lock, stop: threading.Event) -> None:
    """Parse the console logs as they grow, each line timestamped on arrival
    (a guest migrated to this host writes to its incoming name's log)."""
    bufs = {log: b"" for log in logs}
    pos = dict.fromkeys(logs, 0)
    last = time.monotonic()
    while not stop.is_set():
        for log in logs:
            if not log.exists():
                continue
            with log.open("rb") as f:
                f.seek(pos[log])
                chunk = f.read()
                pos[log] += len(chunk)
            now = time.monotonic()
            *lines, bufs[log] = (bufs[log] + chunk).split(b"\n")
            with lock:
                if now - last > READER_PAUSE_S:
                    run.reader_pauses[now] = now - last
                last = now
                for raw in lines:
                    _parse(run, now, raw.decode("utf-8", "replace"))
        time.sleep(0.002)


def _parse(run: Run, now: float, line: str) -> None:
    if "DONE" in line:
        run.done = True
        return
    if "SELENA-GUEST-EXIT" in line:
        run.exited = True
        return
    m = LINE.search(line)
    if not m:
        return
    kind, rest = m.group(1), m.group(2).split()
    try:
        if kind == "S" and len(rest) == 4:
            run.samples.append(Sample(now, *(int(x) for x in rest)))
        elif kind == "P" and len(rest) >= 2:
            run.steal.append((int(rest[0]), [int(x) for x in rest[1:]]))
        elif kind == "C" and len(rest) == 3:
            run.cpuid = (int(rest[0]), int(rest[1]), int(rest[2]))
        elif kind == "W" and len(rest) == 2:
            run.watchdog = (int(rest[0]), int(rest[1]))
        elif kind == "M" and len(rest) == 3:
            run.cross[int(rest[0])] = (int(rest[1]), int(rest[2]))
        elif kind == "V" and len(rest) == 3:
            run.vcpu_clock.setdefault(int(rest[0]), []).append((now, int(rest[1])))
        elif kind in ("T0", "T1") and len(rest) == 2:
            run.timers.setdefault(rest[0], {})[kind] = (now, int(rest[1]))
        elif kind == "Q0" and len(rest) == 2:
            run.pending_armed = (now, int(rest[0]), int(rest[1]))
        elif kind == "Q1" and len(rest) == 1:
            run.pending_fired = (now, int(rest[0]))
        else:
            _parse_platform(run, kind, rest)
    except ValueError:
        return  # a line garbled by kernel messages on the console


def _parse_platform(run: Run, kind: str, rest: list[str]) -> None:
    """The lines only an HVM guest prints in full (K, R, I)."""
    if kind == "K" and len(rest) == 2:
        run.devices.append((rest[0], rest[1]))
    elif kind == "R" and rest == ["none"]:
        run.rtc_stopped = True
    elif kind == "R" and len(rest) == 5:
        boot, secs, real, mono, tsc = (int(x) for x in rest)
        run.rtc.append((boot, secs, real, mono, tsc))
    elif kind == "I" and len(rest) == 4:
        boot, ticks, mono, tsc = (int(x) for x in rest)
        run.pit.append((boot, ticks, mono, tsc))


def fit_rate(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of guest seconds over real seconds."""
    if len(points) < 3:
        raise CheckFailed(f"too few samples to fit a rate ({len(points)} in the segment)")
    return fit_common_rate([points])


def segments(run: Run, base_tdf: float) -> list[tuple[float, list[Sample]]]:
    return _split(run, base_tdf, run.samples, lambda s: s.real)


def _split(run: Run, base_tdf: float, items: list[T],
           real: Callable[[T], float]) -> list[tuple[float, list[T]]]:
    """`items` by the TDF in force when they arrived, without those within
    SETTLE_REAL_S of a change."""
    bounds = [(float("-inf"), base_tdf)] + run.changes
    result = []
    for i, (t_start, tdf) in enumerate(bounds):
        t_end = bounds[i + 1][0] if i + 1 < len(bounds) else float("inf")
        chosen = [s for s in items if t_start + SETTLE_REAL_S <= real(s) <= t_end - SETTLE_REAL_S]
        result.append((tdf, chosen))
    return result


Row = tuple[str, float, float, float, bool]     # measure, measured, expected, error %, ok


def check(tdf: float, changes: list[float], timeout: float, *, vcpus: int = 1,
          tsc: str | None = None, watchdog: int = WATCHDOG_S,
          checkpoints: tuple[str, ...] = (),
          host_step_s: float = HOST_CLOCK_STEP_S, guest: str = "pv",
          clocksource: str = "hpet") -> list[str]:
    if checkpoints or guest != "pv":
        # PVH and HVM guests are created with xl, as checkpointed ones are
        # (a new domain id would orphan the experiment's state).
        run = run_guest_checkpointed(tdf, changes, timeout, kinds=list(checkpoints),
                                     vcpus=vcpus, tsc=tsc, watchdog=watchdog,
                                     host_step_s=host_step_s, virt=guest,
                                     clocksource=clocksource)
    else:
        run = run_guest(tdf, changes, timeout, vcpus=vcpus, tsc=tsc, watchdog=watchdog)
    failures: list[str] = []
    segs = segments(run, tdf)
    first = segs[0][1]
    if len(first) < 3:
        raise CheckFailed(f"{len(first)} samples before the first change "
                          f"({len(run.samples)} in all); console tail:\n{run.tail}")
    rows = _rate_rows(run, segs, failures)
    rows += _vcpu_rate_rows(run, tdf, vcpus, failures)
    monos = [s.mono for s in run.samples]
    backwards = sum(1 for a, b in zip(monos, monos[1:], strict=False) if b < a)
    if backwards:
        failures.append(f"guest CLOCK_MONOTONIC went backwards {backwards} time(s)")
    failures += _jumps(run, tdf)
    rows += _tsc_rows(run, first, tsc, failures)
    timer_rows, timer_checks = _timer_rows(run, tdf, vcpus, failures)
    rows += timer_rows
    checks = timer_checks + _checkpoint_checks(run) + _pending_checks(run, tdf) \
        + _steal_checks(run, vcpus) + _cross_checks(run, vcpus)
    checks.append(_watchdog_check(run, tdf, watchdog))
    clockevent = hvm_clockevent(bool(checkpoints), clocksource)
    if guest == "hvm":
        rows += _platform_rows(run, failures)
        checks += _rtc_date_checks(run)
        checks.append(_devices_check(run, clocksource, clockevent))
    sequence = " -> ".join(f"{t:g}" for t in [tdf, *changes])
    print(f"\nTDF {tdf:g}" + (f" (changes {sequence})" if changes else "")
          + f"; {guest.upper()} guest; {vcpus} vCPU(s); TSC {tsc or 'default mode'}"
          + (f"; clocks on the {clocksource} counter, timers on the {clockevent} timer"
             if guest == "hvm" else "")
          + "".join(f"; {p.kind} after {FIRST_SEGMENT_VIRTUAL_S:g} guest s "
                    f"({p.saved - p.start:.1f} s, thawed {p.thawed - p.saved:.1f} s later"
                    + (f", host clock {p.host_step_s:+g} s" if p.host_step_s else "") + ")"
                    for p in run.checkpoints))
    print(f"{'measure':<42} {'measured':>12} {'expected':>12} {'error %':>9}  ok")
    for name, got, want, err, ok in rows:
        print(f"{name:<42} {got:>12.6f} {want:>12.6f} {err:>+9.3f}  {'yes' if ok else 'NO'}")
        if not ok:
            failures.append(f"{name}: {got:.6f}, expected {want:.6f} ({err:+.3f}%)")
    for name, detail, ok in checks:
        print(f"{name:<42} {detail:>34}  {'yes' if ok else 'NO'}")
        if not ok:
            failures.append(f"{name}: {detail}")
    print(f"samples: {len(run.samples)}; timer tolerance {TIMER_TOLERANCE:.0%} + "
          f"{TIMER_SLACK_REAL_S * 1000:.0f} ms real + {TIMER_SLACK_VIRTUAL_S * 1000:.0f} ms "
          f"virtual (TCG slack), - {CONSOLE_LATENCY_S * 1000:.0f} ms (console arrival); "
          f"console reader's longest pause "
          f"{max(run.reader_pauses.values(), default=0.0) * 1000:.0f} ms")
    return failures


def _rate_rows(run: Run, segs: list[tuple[float, list[Sample]]],
               failures: list[str]) -> list[Row]:
    """Each clock's rate before the first change, and the monotonic clock's
    after each change."""
    rows: list[Row] = []
    first_tdf, first = segs[0]
    for name, attr in (("CLOCK_MONOTONIC", "mono"), ("CLOCK_REALTIME", "realtime"),
                       ("gettimeofday", "tod")):
        rate = fit_rate([(s.real, getattr(s, attr) / 1e9) for s in first])
        rows.append(_row(f"{name} rate", rate, 1 / first_tdf, CLOCK_TOLERANCE))
    for label, (seg_tdf, samples) in zip(_labels(run), segs[1:], strict=True):
        try:
            rate = fit_rate([(s.real, s.mono / 1e9) for s in samples])
        except CheckFailed as exc:
            failures.append(f"after {label}: {exc}")
            continue
        rows.append(_row(f"after {label}: rate", rate, 1 / seg_tdf, CLOCK_TOLERANCE))
    return rows


def _labels(run: Run) -> list[str]:
    """What starts each segment after the first: a change or a checkpoint."""
    thawed = {p.thawed: p.kind for p in run.checkpoints}
    labels, n = [], 0
    for t, new in run.changes:
        if t in thawed:
            labels.append(thawed[t])
        else:
            n += 1
            labels.append(f"change {n} to TDF {new:g}")
    return labels


def _vcpu_rate_rows(run: Run, tdf: float, vcpus: int, failures: list[str]) -> list[Row]:
    """Each further vCPU's CLOCK_MONOTONIC rate before and after each
    change: after a change user space on every vCPU must see the new rate
    (with the vDSO, every vCPU reads vCPU 0's secondary time area)."""
    rows: list[Row] = []
    for cpu in range(1, vcpus):
        points = run.vcpu_clock.get(cpu, [])
        if not points:
            failures.append(f"vCPU {cpu}: no clock samples (V lines)")
            continue
        labels = ["", *_labels(run)]
        for i, (seg_tdf, seg) in enumerate(_split(run, tdf, points, lambda p: p[0])):
            name = (f"vCPU {cpu} after {labels[i]}: rate" if i
                    else f"vCPU {cpu} CLOCK_MONOTONIC rate")
            try:
                rate = fit_rate([(real, mono / 1e9) for real, mono in seg])
            except CheckFailed as exc:
                failures.append(f"{name}: {exc}")
                continue
            rows.append(_row(name, rate, 1 / seg_tdf, CLOCK_TOLERANCE))
    return rows


def _jumps(run: Run, tdf: float) -> list[str]:
    """Continuity: around each change, guest time advanced by what the
    factors imply. The change took effect between the command's start and
    its return."""
    failures = []
    thawed = {p.thawed for p in run.checkpoints}
    for (t_change, new), t_issued in zip(run.changes, run.issued, strict=True):
        if t_change in thawed:
            continue            # _checkpoint_checks
        before = [s for s in run.samples if s.real <= t_issued]
        after = [s for s in run.samples if s.real > t_change]
        if before and after:
            a, b = before[-1], after[0]
            old = _tdf_at(run, tdf, a.real)
            advanced = (b.mono - a.mono) / 1e9
            bounds = [(t - a.real) / old + (b.real - t) / new for t in (t_issued, t_change)]
            jump = min(advanced - min(bounds), advanced - max(bounds), key=abs) \
                if not min(bounds) <= advanced <= max(bounds) else 0.0
            if abs(jump) > 0.1:
                failures.append(f"guest time jumped {jump:+.3f} s at the change to TDF {new:g}")
    return failures


def _timer_rows(run: Run, tdf: float, vcpus: int,
                failures: list[str]) -> tuple[list[Row], list[tuple[str, str, bool]]]:
    """Each kind of timer on each vCPU: real time to fire against the TDF's,
    and per vCPU the four in the guest's own clock, where the console's
    delivery plays no part: never early, and late by no more than the
    real-time bound allows."""
    rows: list[Row] = []
    checks: list[tuple[str, str, bool]] = []
    for cpu in range(vcpus):
        in_guest: list[str] = []
        guest_ok = True
        for kind in ("nanosleep", "timerfd", "select", "poll"):
            marks = run.timers.get(f"{kind}@{cpu}", {})
            if "T0" not in marks or "T1" not in marks:
                failures.append(f"timer {kind} on vCPU {cpu}: no result")
                continue
            (r0, v0), (r1, v1) = marks["T0"], marks["T1"]
            virtual = TIMER_MS / 1000
            real = r1 - r0
            at = _tdf_at(run, tdf, r0)      # the timers run after the last change
            expected = at * virtual
            latest_real = expected * (1 + TIMER_TOLERANCE) + TIMER_SLACK_REAL_S \
                + at * TIMER_SLACK_VIRTUAL_S
            # T1 reached the log somewhere in the reader's pause before its stamp.
            earliest = real - run.reader_pauses.get(r1, 0.0)
            ok = (expected * (1 - TIMER_TOLERANCE) - CONSOLE_LATENCY_S <= real
                  and earliest <= latest_real)
            rows.append((f"{kind} {TIMER_MS} ms vCPU {cpu}: real s", real, expected,
                         (real - expected) / expected * 100, ok))
            guest_s = (v1 - v0) / 1e9
            in_guest.append(f"{guest_s * 1000:.1f}")
            if guest_s < virtual:
                failures.append(f"timer {kind} on vCPU {cpu} fired early in guest time: "
                                f"{guest_s:.4f} s")
            latest_s = latest_real / at        # the same bound in the guest's clock
            guest_ok &= virtual <= guest_s <= latest_s
        if in_guest:
            checks.append((f"timers vCPU {cpu} in guest time",
                           f"{' '.join(in_guest)} ms ({TIMER_MS}..{latest_s * 1000:.0f})",
                           guest_ok))
    return rows, checks


def _tsc_rows(run: Run, first: list[Sample], tsc: str | None,
              failures: list[str]) -> list[Row]:
    """The TSC per second of guest time against CPUID leaf 0x40000003."""
    if run.cpuid is None or run.cpuid[0] == 0:
        failures.append("no CPUID leaf 0x40000003 from the guest")
        return []
    khz, vtsc, _mode = run.cpuid
    want_vtsc = 0 if tsc == "native" else 1
    if vtsc != want_vtsc:
        failures.append(f"CPUID says the TSC is {'emulated' if vtsc else 'native'}, expected "
                        f"{'emulated' if want_vtsc else 'native'}")
    a, b = first[0], first[-1]
    rate_khz = (b.tsc - a.tsc) / ((b.mono - a.mono) / 1e9) / 1000
    return [_row("TSC kHz per guest second", rate_khz, float(khz), TSC_TOLERANCE)]


def _steal_checks(run: Run, vcpus: int) -> list[tuple[str, str, bool]]:
    """Steal per vCPU never decreases, and never grows by more than the guest
    time elapsed, between any two samples (so across the changes). Totals
    include the time a vCPU spent offline before the guest booted it, so
    increments, not totals, are compared with elapsed time."""
    if not run.steal:
        return [("steal time", "no samples", False)]
    checks = []
    for cpu in range(vcpus):
        series = [(mono, st[cpu]) for mono, st in run.steal if len(st) > cpu]
        if len(series) < 2:
            checks.append((f"steal vCPU {cpu}", "no samples", False))
            continue
        pairs = list(zip(series, series[1:], strict=False))
        drops = sum(1 for (_, a), (_, b) in pairs if b < a)
        excess = max((b - a) - (mb - ma) for (ma, a), (mb, b) in pairs)
        grown = series[-1][1] - series[0][1]
        elapsed = series[-1][0] - series[0][0]
        checks.append((f"steal vCPU {cpu} monotonic", f"{drops} decrease(s) in {len(series)}",
                       drops == 0))
        checks.append((f"steal vCPU {cpu} <= elapsed",
                       f"+{grown / 1e9:.2f} s in {elapsed / 1e9:.2f} s",
                       excess <= STEAL_GRANULARITY_NS and grown <= elapsed))
    return checks


def _cross_checks(run: Run, vcpus: int) -> list[tuple[str, str, bool]]:
    checks = []
    for cpu in range(1, vcpus):
        if cpu not in run.cross:
            checks.append((f"monotonic across vCPUs ({cpu})", "no result", False))
            continue
        reads, back = run.cross[cpu]
        checks.append((f"monotonic across vCPUs ({cpu})", f"{back} backwards in {reads} reads",
                       back == 0 and reads > 0))
    return checks


def _watchdog_check(run: Run, tdf: float, timeout: int) -> tuple[str, str, bool]:
    if timeout <= 0:
        return ("watchdog", "not armed (--watchdog 0)", True)
    if run.watchdog is None or run.watchdog[1] < 0:
        return ("watchdog", "the guest could not open /dev/watchdog", False)
    steps = [tdf] + [new for _, new in run.changes]
    raise_x = max((b / a for a, b in zip(steps, steps[1:], strict=False)), default=1.0)
    return (f"watchdog {timeout} s survived",
            f"largest TDF increase x{raise_x:g}", True)


def _platform_rows(run: Run, failures: list[str]) -> list[Row]:
    """An HVM guest's RTC and PIT against its CLOCK_BOOTTIME, across every
    change: each counts guest time (whose rate against real time the clock
    rows check), never real time. Not CLOCK_MONOTONIC: a save is a suspend
    to Linux, and its monotonic clock leaves out the time spent suspended,
    which the RTC and PIT count. Each rate is one slope over the stretches
    between resumes, each with its own offset: at a resume CLOCK_BOOTTIME
    gains only what Linux takes for the time suspended, Xen's wall clock's
    gain less how far Linux's clock was off it (its boot set it from the
    RTC, half a second into the RTC's second: Linux's hctosys), nothing at
    all when the suspend was as short as that offset (seen in the lab on
    2026-12-05); the RTC's own date across each checkpoint is
    _rtc_date_checks'."""
    rows: list[Row] = []
    rate = _count_per_guest_second(_rtc_stretches(run))
    if run.rtc_stopped or rate is None:
        failures.append(f"RTC: {len(run.rtc)} update interrupts"
                        + (", then none for 3 guest seconds" if run.rtc_stopped else ""))
    else:
        rows.append(_row("RTC seconds per guest second", rate, 1.0, PLATFORM_TOLERANCE))
    rate = _count_per_guest_second(_between_resumes(run, run.pit))
    if rate is None:
        failures.append(f"PIT: {len(run.pit)} samples of channel 2's count")
    else:
        rows.append(_row("PIT ticks per guest second", rate, PIT_HZ, PLATFORM_TOLERANCE))
    return rows


def _count_per_guest_second(stretches: Sequence[Sequence[tuple[int, ...]]]) -> float | None:
    """The slope of R or I lines' count (RTC seconds, PIT ticks: the second
    column) over their CLOCK_BOOTTIME, shared by the stretches between
    resumes; None with fewer than three points in stretches of two or more."""
    if sum(len(s) for s in stretches if len(s) > 1) < 3:
        return None
    return fit_common_rate([[(line[0] / 1e9, float(line[1])) for line in s]
                            for s in stretches])


_Line = TypeVar("_Line", bound=tuple[int, ...])


def _between_resumes(run: Run, lines: Sequence[_Line]) -> list[list[_Line]]:
    """R or I lines (CLOCK_BOOTTIME first, CLOCK_MONOTONIC and the TSC
    last) in the stretches between the guest's resumes, told apart by the
    guest's own clocks, not by when the console delivered them (a line
    written just before a save reaches Dom0 after the restore): the
    emulated TSC gains on CLOCK_MONOTONIC at each resume, by the time
    suspended. A stretch starts at a line that, with the one after it,
    is more than RESUME_STEP_NS above the lowest gap of the stretch before
    (a line whose two reads the vCPU's descheduling held apart is above it
    alone). Needs the emulated TSC, a dilated HVM guest's default mode (a
    native one counts real time: main refuses it with checkpoints)."""
    ordered = sorted(lines)
    khz = run.cpuid[0] if run.cpuid else 0
    if not run.checkpoints or not ordered or not khz:
        return [ordered]
    gaps = [line[-1] * 1_000_000 // khz - line[-2] for line in ordered]
    stretches = [[ordered[0]]]
    floor = gaps[0]
    for i in range(1, len(ordered)):
        if gaps[i] - floor > RESUME_STEP_NS and \
                (i + 1 == len(gaps) or gaps[i + 1] - floor > RESUME_STEP_NS):
            stretches.append([])
            floor = gaps[i]
        stretches[-1].append(ordered[i])
        floor = min(floor, gaps[i])
    return stretches


def _rtc_stretches(run: Run) -> list[list[tuple[int, int, int, int, int]]]:
    """The RTC's update lines between the guest's resumes. The first
    update after a resume is left out: it fell due while Linux was
    suspended and is taken at the resume, up to a second after its edge
    (0.23 s measured)."""
    stretches = _between_resumes(run, run.rtc)
    return stretches[:1] + [s[1:] for s in stretches[1:]]


def fit_common_rate(stretches: list[list[tuple[float, float]]]) -> float:
    """Least-squares slope shared by several stretches, each with its own
    intercept (a stretch of one point says nothing of the slope)."""
    sxx = sxy = 0.0
    for points in stretches:
        if len(points) < 2:
            continue
        mx = sum(p[0] for p in points) / len(points)
        my = sum(p[1] for p in points) / len(points)
        sxx += sum((p[0] - mx) ** 2 for p in points)
        sxy += sum((p[0] - mx) * (p[1] - my) for p in points)
    if sxx <= 0:
        raise CheckFailed("too few samples to fit a rate")
    return sxy / sxx


def _rtc_date_checks(run: Run) -> list[tuple[str, str, bool]]:
    """After each save or migration the RTC's date is the restored wall
    clock (series patch 0015 reads it again), which Linux's clock takes at
    the resume too: an update interrupt comes at a whole second of the
    guest's CLOCK_REALTIME, within RTC_DATE_TOLERANCE_S. Before the first
    checkpoint the two differ by where the boot set Linux's clock, shown."""
    if not run.checkpoints:
        return []
    stretches = _rtc_stretches(run)
    if len(stretches) != len(run.checkpoints) + 1:
        return [("RTC updates between resumes",
                 f"{len(stretches)} stretches for {len(run.checkpoints)} checkpoint(s)", False)]

    def offsets(lines: list[tuple[int, int, int, int, int]]) -> list[float]:
        return [real / 1e9 - secs for _, secs, real, *_ in lines]
    boot = offsets(stretches[0])
    checks = []
    for p, after in zip(run.checkpoints, stretches[1:], strict=True):
        got = offsets(after)
        name = f"RTC date after the {p.kind}"
        if not got:
            checks.append((name, "no update after the one taken at the resume", False))
            continue
        mean = statistics.fmean(got)
        since = f"; at boot {statistics.fmean(boot):+.3f} s" if boot else ""
        checks.append((name, f"{mean:+.3f} s off CLOCK_REALTIME ({len(got)} updates){since}",
                       abs(mean) <= RTC_DATE_TOLERANCE_S))
    return checks


def _devices_check(run: Run, clocksource: str,
                   clockevent: str = "lapic") -> tuple[str, str, bool]:
    """The clocks read the counter asked for and the timers fire on the
    expected device, from the start to the end: otherwise the rates above
    would be some other device's."""
    want = (clocksource, clockevent)
    seen = " then ".join(f"{cs}/{ce}" for cs, ce in dict.fromkeys(run.devices))
    # Linux reads the TSC as "tsc-early" until its calibration is refined,
    # about a second after boot: the same counter.
    read = [("tsc" if cs == "tsc-early" else cs, ce) for cs, ce in run.devices]
    return ("clocksource/timer device", seen or "not reported",
            bool(read) and all(d == want for d in read))


def _tdf_at(run: Run, base: float, t: float) -> float:
    current = base
    for t_change, new in run.changes:
        if t_change <= t:
            current = new
    return current


def _row(name: str, got: float, want: float, tol: float) -> Row:
    err = (got - want) / want
    return (name, got, want, err * 100, abs(err) <= tol)


def _pending_checks(run: Run, tdf: float) -> list[tuple[str, str, bool]]:
    """The timer armed at the start, pending across the first change or
    checkpoint, fires at its deadline in guest time: never before, and no
    later than the timers' slack (a deadline left at the old rate would fire
    early after a rise of the TDF and late after a fall); one that fell due
    inside a save's suspend, no later than the slack after the guest's first
    sample after the thaw."""
    if not run.changes:
        return []
    label = _labels(run)[0]
    name = f"timer pending across the {label}"
    if run.pending_armed is None or run.pending_fired is None:
        return [(name, "no result (Q0/Q1 lines)", False)]
    (armed_at, _, deadline), (fired_at, fired) = run.pending_armed, run.pending_fired
    event = run.changes[0][0]
    late_s = (fired - deadline) / 1e9
    at = _tdf_at(run, tdf, fired_at)
    slack_s = TIMER_SLACK_VIRTUAL_S + TIMER_SLACK_REAL_S / at
    spans = armed_at < event < fired_at
    detail = f"{late_s * 1000:+.1f} ms (0..{slack_s * 1000:.0f})"
    resumed = _resumed_after(run, deadline)
    if resumed is not None:
        # Due while Linux had its user space frozen for the save: no process
        # can see it before the thaw, so it is judged from the first sample
        # after the thaw (that sample is a timer too, and comes within one
        # sampling interval of the thaw).
        detail += f", due in the guest's suspend: {(fired - resumed) / 1e6:+.1f} ms after it"
        on_time = 0 <= late_s and fired - resumed <= slack_s * 1e9
    else:
        on_time = 0 <= late_s <= slack_s
    return [(name, detail + ("" if spans else ", not pending across it"), spans and on_time)]


def _resumed_after(run: Run, deadline: int) -> int | None:
    """CLOCK_MONOTONIC of the first sample after the thaw of the checkpoint
    whose suspend the deadline fell in: the last sample before the deadline
    arrived before that thaw and the first at or after it arrived after it
    (a line written before the freeze and delivered after the thaw makes it
    None: judged strictly)."""
    ordered = sorted(run.samples, key=lambda s: s.mono)
    before = [s for s in ordered if s.mono < deadline]
    after = [s for s in ordered if s.mono >= deadline]
    if not before or not after:
        return None
    prev, nxt = before[-1], after[0]
    if any(prev.real < p.thawed < nxt.real for p in run.checkpoints):
        return nxt.mono
    return None


def _checkpoint_checks(run: Run) -> list[tuple[str, str, bool]]:
    """Across each save (or migration), CLOCK_MONOTONIC and CLOCK_REALTIME
    advance by what the guest ran: at its TDF until the save began and from
    the thaw on, plus between nothing and the save's own duration (it runs
    until it suspends, its clock until the end of the save), within
    CHECKPOINT_JUMP_S."""
    checks = []
    for p in run.checkpoints:
        a_, h_ = p.arrived, p.held
        if a_ and h_:
            advanced_ns = int(h_["virtual_ns"]) - int(a_["virtual_ns"])
            checks.append((f"frozen until the thaw ({p.kind})",
                           f"TDF {a_['tdf']}, frozen {a_['frozen']}/{h_['frozen']}, "
                           f"+{advanced_ns} ns in {THAW_WAIT_S:g} s",
                           a_["tdf"] == f"{p.tdf:g}" and (a_["frozen"], h_["frozen"])
                           == ("yes", "yes") and advanced_ns == 0))
        before = [s for s in run.samples if s.real <= p.start]
        after = [s for s in run.samples if s.real > p.thawed]
        for clock, attr in (("CLOCK_MONOTONIC", "mono"), ("CLOCK_REALTIME", "realtime")):
            name = f"{clock} across the {p.kind}"
            if not before or not after:
                checks.append((name, f"{len(before)} samples before, {len(after)} after",
                               False))
                continue
            a, b = before[-1], after[0]
            checks.append(_across(name, p, a, b, (getattr(b, attr) - getattr(a, attr)) / 1e9))
        # An emulated TSC counts virtual time as the clocks do (the save's
        # duration included, as CLOCK_REALTIME may); the raw TSC (native
        # mode) follows the host, not the guest, and is not checked.
        if before and after and run.cpuid and run.cpuid[0] and run.cpuid[1]:
            a, b = before[-1], after[0]
            checks.append(_across(f"TSC across the {p.kind}", p, a, b,
                                  (b.tsc - a.tsc) / (run.cpuid[0] * 1000)))
    return checks


def _across(name: str, p: Checkpoint, a: Sample, b: Sample,
            advanced: float) -> tuple[str, str, bool]:
    """A counter that advanced `advanced` guest seconds between samples a
    (before the checkpoint) and b (after its thaw): what the guest ran at
    its TDF, plus between nothing and the save's own duration, within
    CHECKPOINT_JUMP_S."""
    low = ((p.start - a.real) + (b.real - p.thawed)) / p.tdf
    high = low + (p.saved - p.start) / p.tdf
    jump = 0.0 if low <= advanced <= high else min(advanced - low, advanced - high, key=abs)
    return name, f"{advanced:.3f} s ({low:.3f}..{high:.3f}), {jump:+.3f}", \
        abs(jump) <= CHECKPOINT_JUMP_S


def default_changes(tdf: float) -> list[float]:
    """N -> 2 -> N (4 for N = 2): both directions, and x5 up from 2 to 10."""
    return [2.0 if tdf != 2.0 else 4.0, tdf]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tdf", type=float, action="append", required=True,
                        help="TDF to check (repeatable)")
    parser.add_argument("--no-change", action="store_true",
                        help="skip changing the TDF of the running guest")
    parser.add_argument("--change-to", type=_tdf_list, default=None,
                        help="TDFs to change the running guest to, in order (e.g. 2,10,1)")
    parser.add_argument("--vcpus", type=int, default=1, help="guest vCPUs (default 1)")
    parser.add_argument("--guest", choices=GUEST_TYPES, default="pv",
                        help="the guest's type: pv (default), pvh (the same tiny kernel "
                             "in an HVM container) or hvm (on Dom0's device model, with the "
                             "RTC and PIT checked too); created with xl")
    parser.add_argument("--clocksource", choices=HVM_CLOCKSOURCES, default="hpet",
                        help="with --guest hvm: the counter the guest's clocks read "
                             "(default hpet)")
    parser.add_argument("--tsc", choices=("native", "emulate"), default=None,
                        help="xl tsc_mode: native (raw TSC, dilated pvclock scale) or "
                             "always_emulate; default: Xen's default mode")
    parser.add_argument("--watchdog", type=int, default=WATCHDOG_S,
                        help="guest watchdog timeout in guest seconds (0: none)")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--save-restore", action="store_true",
                        help="save and restore the guest after its first segment")
    parser.add_argument("--migrate", action="store_true",
                        help="migrate the guest to this same host after its first segment "
                             "(after the save/restore's, with both)")
    parser.add_argument("--host-clock-step", type=float, default=None,
                        help="with --save-restore: seconds Dom0's wall clock is moved "
                             "between the save and the restore (default 3600, 0 for an HVM "
                             "guest: Xen moves its RTC with that clock)")
    args = parser.parse_args(argv)
    checkpoints = (("save/restore",) if args.save_restore else ()) + \
        (("migrate",) if args.migrate else ())
    if args.guest == "hvm" and args.tsc == "native" and checkpoints:
        parser.error("--tsc native cannot be checked across a save or migration of an HVM "
                     "guest: its RTC's and PIT's lines are told apart at the resumes by the "
                     "emulated TSC (drop --tsc native)")
    if os.geteuid() != 0 or not Path("/proc/xen/capabilities").exists():
        print("check-clock must run as root in a Xen Dom0 (use: selena lab check-clock)",
              file=sys.stderr)
        return 2
    failures: list[str] = []
    for tdf in args.tdf:
        changes = [] if args.no_change else (args.change_to or default_changes(tdf))
        try:
            failures += [f"TDF {tdf:g}: {f}" for f in check(
                tdf, changes, args.timeout, vcpus=args.vcpus, tsc=args.tsc,
                watchdog=args.watchdog, checkpoints=checkpoints,
                host_step_s=host_clock_step(args.host_clock_step, args.guest), guest=args.guest,
                clocksource=args.clocksource)]
        except (CheckFailed, SelenaError) as exc:
            failures.append(f"TDF {tdf:g}: {exc}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nall clocks and timers follow the TDF")
    return 0


def host_clock_step(asked: float | None, guest: str) -> float:
    """Seconds Dom0's clock moves between a save and its restore: none for
    an HVM guest unless asked, as Xen moves its RTC with Dom0's clock (as
    upstream does) and putting the clock back would move the RTC back an
    hour while the guest runs."""
    if asked is not None:
        return asked
    return 0.0 if guest == "hvm" else HOST_CLOCK_STEP_S


def _tdf_list(text: str) -> list[float]:
    values = [float(x) for x in text.split(",") if x.strip()]
    if not values or any(not 1 <= v <= 1000 for v in values):
        raise argparse.ArgumentTypeError(f"TDFs from 1 to 1000, comma-separated: {text!r}")
    return values


if __name__ == "__main__":
    sys.exit(main())
