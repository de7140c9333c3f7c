"""End-to-end proof of time dilation, run in the lab's Dom0.

Creates a tiny-host PV guest running `clockcheck` (guest-templates/tools),
paused, sets its TDF before it first runs, and timestamps every line the
guest prints on arrival in Dom0's real clock. It then checks:

- every guest clock (CLOCK_MONOTONIC, CLOCK_REALTIME, gettimeofday) runs at
  1/TDF of Dom0's real clock within 1% (least-squares fit over the samples);
- every timer (nanosleep, timerfd, select, poll) takes TDF x its virtual
  duration of real time within 2%, plus TIMER_SLACK_REAL_S of real time and
  TIMER_SLACK_VIRTUAL_S of guest time for TCG emulation and wake-up latency
  (less CONSOLE_LATENCY_S on the early side: the measurement's own error),
  and never fires early in the guest's own view;
- changing the TDF of the running guest (N -> M -> N) keeps guest time
  monotonic and continuous and the rate follows the new factor (1%).

Run in Dom0: python3 -m selena.lab.check_clock --tdf 10
From the host: selena lab check-clock --tdf 10
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from selena.errors import SelenaError
from selena.lab.dom0 import console_log, create_paused, sh, tiny_guest_config, try_sh

GUEST = "selena-clockcheck"
CLOCK_TOLERANCE = 0.01
TIMER_TOLERANCE = 0.02
TIMER_SLACK_REAL_S = 0.10
TIMER_SLACK_VIRTUAL_S = 0.01
# A timer's real duration is measured between the arrivals of two console
# lines in Dom0; a late first line makes it look short. Early firing itself is
# checked in the guest's own clock, so the lower bound allows this much
# arrival latency (a CI run saw 17 ms at TDF 1).
CONSOLE_LATENCY_S = 0.05
TIMER_MS = 300
SEGMENT_VIRTUAL_S = (3.0, 2.0, 2.0)
SETTLE_REAL_S = 0.5   # samples this close to a TDF change are not used for rates

LINE = re.compile(r"\b(S|T0|T1) (.*)$")


@dataclass
class Sample:
    real: float
    mono: int
    realtime: int
    tod: int


@dataclass
class Run:
    samples: list[Sample] = field(default_factory=list)
    timers: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    changes: list[tuple[float, float]] = field(default_factory=list)  # (real time, new tdf)
    done: bool = False


class CheckFailed(Exception):
    pass


def guest_config(sample_seconds: int) -> str:
    return tiny_guest_config(
        GUEST, f"selena.init=/usr/bin/clockcheck selena.args={sample_seconds},{TIMER_MS}")


def run_guest(tdf: float, change_to: float | None, timeout: float) -> Run:
    total_virtual = sum(SEGMENT_VIRTUAL_S) + 1.0
    domid = create_paused(GUEST, guest_config(int(total_virtual + 0.999)), tdf)
    log = console_log(GUEST)
    got = sh("selena-tdf", "get", domid).strip()
    if float(got) != tdf:
        raise CheckFailed(f"selena-tdf get returned {got}, expected {tdf:g}")
    sh("xl", "unpause", GUEST)
    run = Run()
    plan: list[tuple[float, float]] = []
    planned = change_to is None
    start = time.monotonic()
    buf = b""
    pos = 0
    try:
        while time.monotonic() - start < timeout and not run.done:
            if log.exists():
                with log.open("rb") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos += len(chunk)
                now = time.monotonic()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    _parse(run, now, raw.decode("utf-8", "replace"))
            if run.samples and not planned and change_to is not None:
                planned = True
                t0 = run.samples[0].real
                first = SEGMENT_VIRTUAL_S[0] * tdf
                plan = [(t0 + first, change_to),
                        (t0 + first + SEGMENT_VIRTUAL_S[1] * change_to, tdf)]
            while plan and time.monotonic() >= plan[0][0]:
                _, new = plan.pop(0)
                sh("selena-tdf", "set", domid, f"{new:g}")
                run.changes.append((time.monotonic(), new))
            time.sleep(0.002)
    finally:
        try_sh("xl", "destroy", GUEST)
    if not run.done:
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no console log)"
        raise CheckFailed(f"guest did not finish within {timeout:.0f} s; console:\n{tail}")
    return run


def _parse(run: Run, now: float, line: str) -> None:
    if "DONE" in line:
        run.done = True
        return
    m = LINE.search(line)
    if not m:
        return
    kind, rest = m.group(1), m.group(2).split()
    if kind == "S" and len(rest) == 3:
        run.samples.append(Sample(now, int(rest[0]), int(rest[1]), int(rest[2])))
    elif kind in ("T0", "T1") and len(rest) == 2:
        run.timers.setdefault(rest[0], {})[kind] = (now, int(rest[1]))


def fit_rate(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of guest seconds over real seconds."""
    n = len(points)
    if n < 3:
        raise CheckFailed(f"too few samples to fit a rate ({n} in the segment)")
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    sxy = sum((p[0] - mx) * (p[1] - my) for p in points)
    return sxy / sxx


def segments(run: Run, base_tdf: float) -> list[tuple[float, list[Sample]]]:
    bounds = [(float("-inf"), base_tdf)] + run.changes
    result = []
    for i, (t_start, tdf) in enumerate(bounds):
        t_end = bounds[i + 1][0] if i + 1 < len(bounds) else float("inf")
        chosen = [s for s in run.samples
                  if t_start + SETTLE_REAL_S <= s.real <= t_end - SETTLE_REAL_S]
        result.append((tdf, chosen))
    return result


def check(tdf: float, change_to: float | None, timeout: float) -> list[str]:
    run = run_guest(tdf, change_to, timeout)
    rows: list[tuple[str, float, float, float, bool]] = []
    failures: list[str] = []
    segs = segments(run, tdf)
    first_tdf, first = segs[0]
    for name, attr in (("CLOCK_MONOTONIC", "mono"), ("CLOCK_REALTIME", "realtime"),
                       ("gettimeofday", "tod")):
        rate = fit_rate([(s.real, getattr(s, attr) / 1e9) for s in first])
        rows.append(_row(f"{name} rate", rate, 1 / first_tdf, CLOCK_TOLERANCE))
    for i, (seg_tdf, samples) in enumerate(segs[1:], start=1):
        rate = fit_rate([(s.real, s.mono / 1e9) for s in samples])
        rows.append(_row(f"after change {i} to TDF {seg_tdf:g}: rate", rate, 1 / seg_tdf,
                         CLOCK_TOLERANCE))
    monos = [s.mono for s in run.samples]
    backwards = sum(1 for a, b in zip(monos, monos[1:], strict=False) if b < a)
    if backwards:
        failures.append(f"guest CLOCK_MONOTONIC went backwards {backwards} time(s)")
    # Continuity: around each change, guest time advanced by what the factors imply.
    for t_change, new in run.changes:
        before = [s for s in run.samples if s.real <= t_change]
        after = [s for s in run.samples if s.real > t_change]
        if before and after:
            a, b = before[-1], after[0]
            old = _tdf_at(run, tdf, a.real)
            expected = (t_change - a.real) / old + (b.real - t_change) / new
            jump = (b.mono - a.mono) / 1e9 - expected
            if abs(jump) > 0.1:
                failures.append(f"guest time jumped {jump:+.3f} s at the change to TDF {new:g}")
    for kind in ("nanosleep", "timerfd", "select", "poll"):
        marks = run.timers.get(kind, {})
        if "T0" not in marks or "T1" not in marks:
            failures.append(f"timer {kind}: no result")
            continue
        (r0, v0), (r1, v1) = marks["T0"], marks["T1"]
        virtual = TIMER_MS / 1000
        real = r1 - r0
        expected = tdf * virtual
        slack = TIMER_SLACK_REAL_S + tdf * TIMER_SLACK_VIRTUAL_S
        ok = (expected * (1 - TIMER_TOLERANCE) - CONSOLE_LATENCY_S <= real
              <= expected * (1 + TIMER_TOLERANCE) + slack)
        rows.append((f"{kind} {TIMER_MS} ms: real s", real, expected,
                     (real - expected) / expected * 100, ok))
        if (v1 - v0) / 1e9 < virtual:
            failures.append(f"timer {kind} fired early in guest time: {(v1 - v0) / 1e9:.4f} s")
    print(f"\nTDF {tdf:g}" + (f" (changes {tdf:g} -> {change_to:g} -> {tdf:g})"
                            if change_to else ""))
    print(f"{'measure':<36} {'measured':>12} {'expected':>12} {'error %':>9}  ok")
    for name, got, want, err, ok in rows:
        print(f"{name:<36} {got:>12.6f} {want:>12.6f} {err:>+9.3f}  {'yes' if ok else 'NO'}")
        if not ok:
            failures.append(f"{name}: {got:.6f}, expected {want:.6f} ({err:+.3f}%)")
    print(f"samples: {len(run.samples)}; timer tolerance {TIMER_TOLERANCE:.0%} + "
          f"{TIMER_SLACK_REAL_S * 1000:.0f} ms real + {TIMER_SLACK_VIRTUAL_S * 1000:.0f} ms "
          f"virtual (TCG slack), - {CONSOLE_LATENCY_S * 1000:.0f} ms (console arrival)")
    return failures


def _tdf_at(run: Run, base: float, t: float) -> float:
    current = base
    for t_change, new in run.changes:
        if t_change <= t:
            current = new
    return current


def _row(name: str, got: float, want: float, tol: float) -> tuple[str, float, float, float, bool]:
    err = (got - want) / want
    return (name, got, want, err * 100, abs(err) <= tol)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tdf", type=float, action="append", required=True,
                        help="TDF to check (repeatable)")
    parser.add_argument("--no-change", action="store_true",
                        help="skip changing the TDF of the running guest")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or not Path("/proc/xen/capabilities").exists():
        print("check-clock must run as root in a Xen Dom0 (use: selena lab check-clock)",
              file=sys.stderr)
        return 2
    failures: list[str] = []
    for tdf in args.tdf:
        change_to = None if args.no_change else (2.0 if tdf != 2.0 else 4.0)
        try:
            failures += [f"TDF {tdf:g}: {f}" for f in check(tdf, change_to, args.timeout)]
        except (CheckFailed, SelenaError) as exc:
            failures.append(f"TDF {tdf:g}: {exc}")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nall clocks and timers follow the TDF")
    return 0


if __name__ == "__main__":
    sys.exit(main())
