"""Hypervisor checks beyond clock rates, run in the lab's Dom0.

- freeze: two tiny-host guests read CLOCK_MONOTONIC back to back at TDF 200
  (`clockcheck gap`); both are frozen together (`selena-tdf freeze A B`)
  for FREEZE_REAL_S seconds, then thawed together.  While frozen the
  hypervisor's virtual time of each stands still (`selena-tdf status`),
  `xl unpause` does not thaw them, and in each guest the step between the
  two consecutive clock reads that span the freeze (the pair with the most
  native-TSC ticks in between, i.e. real time) stays below 1 ms of guest
  time (FREEZE_REAL_S unfrozen would be 15 ms at TDF 200).
- freeze1: a TDF 1 guest (never dilated) in the default TSC mode reads
  CLOCK_MONOTONIC and RDTSC back to back while it is frozen for
  FREEZE_REAL_S seconds and thawed: its virtual time stands still while
  frozen, and across the freeze neither its clock nor its TSC counts the
  frozen interval (a freeze goes through the same hook as a TDF change,
  which moves a domain off the raw TSC).  In the lab (no invariant TSC
  under QEMU) the default mode emulates the TSC anyway, so this checks the
  outcome, not the switch itself.
- save/restore: a guest sampling its clocks at TDF 5 is saved with
  `xl save` and restored with `xl restore`, which leaves it frozen and
  paused (`xl restore`'s own unpause does not start it) until
  `selena-tdf thaw`; the restored domain has TDF 5, its clocks run at 1/5
  of real time, and neither CLOCK_MONOTONIC nor CLOCK_REALTIME jumps
  across the save by more than the save's own duration at 1/TDF (the clock
  runs on from the suspend to the end of the save, and stands still from
  there to the thaw).
- ticker: a minimal PV guest of our own (xen-patches/tests/tickguest, built on
  the host by `make -C xen-patches tickguest`; Linux stops the default ticker
  at boot) counts the ticks of the default 10 ms PV periodic timer at TDF 10:
  they come 10 ms of guest time apart, so 100 ms of real time apart.
- privilege: the hardware domain (Dom0) cannot be dilated or frozen.
- restore: the restore path's pseudo MSRs (factor, virtual time), written
  with XEN_DOMCTL_set_vcpu_msrs as libxc's restore writes them
  (xen-patches/tests/tdf_restore.c, built on the host by `make -C xen-patches
  tdfrestore`), are taken by a domain that has never run (frozen, that
  factor, virtual time held at that value, also across `xl unpause`, until
  `selena-tdf thaw`) and refused for the same
  domain once running (EBUSY; EPERM under an XSM policy without the TDF
  permission) and for Dom0, whose virtual time then keeps running as
  before: same factor, not frozen, advancing at 1/TDF of real time.

Run in Dom0: python3 -m selena.lab.check_hv [freeze] [freeze1] [save] [ticker] [privilege]
    [restore]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from selena.errors import SelenaError
from selena.lab.check_clock import fit_rate
from selena.lab.dom0 import console_log, create_paused, sh, tiny_guest_config, try_sh

FREEZE_TDF = 200.0
GAP_VIRTUAL_MS = 100
FREEZE_REAL_S = 3.0
MAX_FROZEN_STEP_NS = 1_000_000
FREEZE1_VIRTUAL_MS = 12_000  # the TDF 1 guest's reads (real = virtual at TDF 1)
SAVE_TDF = 5.0
SAVE_SAMPLE_S = 8            # guest seconds of samples (40 s real at TDF 5)
SAVE_AFTER_REAL_S = 8.0      # real seconds of samples before the save
SAVE_FILE = Path("/tmp/selena-save.img")
RATE_TOLERANCE = 0.02
MAX_JUMP_S = 0.5             # guest seconds across the save, beyond the save's own
                             # duration at 1/TDF (samples are 0.1 s apart)
THAW_WAIT_S = 1.0            # real seconds a restored domain is watched before the thaw
TICK_TDF = 10.0
TICK_VIRTUAL_NS = 10_000_000  # Xen's default PV periodic timer
TICK_TOLERANCE = 0.15
TICKGUEST = Path("xen-patches/build/tickguest")   # relative to the shared tree
TDF_RESTORE = Path("xen-patches/build/tdf-restore")  # likewise
RESTORE_TDF = 5.0            # set at creation, replaced by the accepted restore
RESTORE_MILLI = 2000         # the accepted restore's factor (TDF 2)
RESTORE_VIRT_NS = 7_000_000_000  # and virtual time
RESTORE_RUN_S = 2.0          # real seconds the refused domain is watched
RESTORE_SLACK_NS = 1_000     # rounding of the hypervisor's own virtual time


class CheckError(Exception):
    pass


class Console:
    """New lines of a guest's console log, each with its arrival time."""

    def __init__(self, name: str):
        self.path = console_log(name)
        self.pos = 0
        self.buf = b""

    def lines(self) -> list[tuple[float, str]]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(self.pos)
            chunk = f.read()
        self.pos += len(chunk)
        now = time.monotonic()
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        return [(now, ln.decode("utf-8", "replace").rstrip("\r")) for ln in done]

    def wait_for(self, pattern: str, timeout: float) -> list[tuple[float, str]]:
        """Lines up to and including the first matching `pattern`."""
        seen: list[tuple[float, str]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for item in self.lines():
                seen.append(item)
                if re.search(pattern, item[1]):
                    return seen
            time.sleep(0.01)
        tail = "\n".join(line for _, line in seen[-20:])
        raise CheckError(f"{self.path.name}: no {pattern!r} within {timeout:.0f} s:\n{tail}")


def status(domid: str) -> dict[str, str]:
    out = sh("selena-tdf", "status", domid)
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def check_freeze() -> list[str]:
    failures: list[str] = []
    names = ["selena-freeze-a", "selena-freeze-b"]
    domids = []
    consoles = []
    for name in names:
        # A native TSC counts real time: the guest finds the step across the
        # freeze as the one that took the most TSC ticks.
        cfg = tiny_guest_config(name, f"selena.init=/usr/bin/clockcheck "
                                      f"selena.args=gap,{GAP_VIRTUAL_MS}",
                                lines=('tsc_mode = "native"',))
        domids.append(create_paused(name, cfg, FREEZE_TDF))
        consoles.append(Console(name))
    try:
        for name in names:
            sh("xl", "unpause", name)
        for c in consoles:
            c.wait_for(r"GAPSTART", 120)
        time.sleep(1.0)
        froze = sh("selena-tdf", "freeze", *domids)
        print(froze.strip())
        first = [status(d) for d in domids]
        time.sleep(FREEZE_REAL_S / 2)
        for name in names:
            try_sh("xl", "unpause", name)     # must not thaw: the freeze holds its own pause
        time.sleep(FREEZE_REAL_S / 2)
        second = [status(d) for d in domids]
        thawed = sh("selena-tdf", "thaw", *domids)
        print(thawed.strip())
        for name, a, b in zip(names, first, second, strict=True):
            advanced = int(b["virtual_ns"]) - int(a["virtual_ns"])
            real = (int(b["real_ns"]) - int(a["real_ns"])) / 1e9
            print(f"freeze {name}: frozen={a['frozen']}/{b['frozen']}, virtual time advanced "
                  f"{advanced} ns in {real:.2f} s of real time while frozen")
            if a["frozen"] != "yes" or b["frozen"] != "yes":
                failures.append(f"{name}: not reported frozen while frozen")
            if advanced != 0:
                failures.append(f"{name}: virtual time advanced {advanced} ns while frozen")
        for name, c in zip(names, consoles, strict=True):
            lines = c.wait_for(r"\bGAP \d+", 300)
            m = re.search(r"\bGAP (\d+) (\d+) (\d+) (\d+)", lines[-1][1])
            if m is None:
                failures.append(f"{name}: no GAP result: {lines[-1][1]!r}")
                continue
            largest, reads, step, ticks = (int(x) for x in m.groups())
            print(f"freeze {name}: guest clock step across the freeze {step / 1e6:.3f} ms "
                  f"(the step that took the most real time: {ticks} TSC ticks); largest "
                  f"step {largest / 1e6:.3f} ms in {reads} reads (limit "
                  f"{MAX_FROZEN_STEP_NS / 1e6:g} ms; {FREEZE_REAL_S:g} s unfrozen would be "
                  f"{FREEZE_REAL_S / FREEZE_TDF * 1e3:g} ms)")
            if step >= MAX_FROZEN_STEP_NS:
                failures.append(f"{name}: guest clock stepped {step / 1e6:.3f} ms across "
                                "the freeze")
    finally:
        for name in names:
            try_sh("xl", "destroy", name)
    return failures


def _cpu_hz() -> float:
    """The host's TSC frequency as Xen reports it (`xl info` cpu_mhz): a TDF 1
    guest's TSC, native or emulated, ticks at it."""
    m = re.search(r"^cpu_mhz\s*:\s*([\d.]+)", sh("xl", "info"), re.M)
    if m is None:
        raise CheckError("xl info printed no cpu_mhz")
    return float(m.group(1)) * 1e6


def check_freeze_tdf1() -> list[str]:
    failures: list[str] = []
    name = "selena-freeze-tdf1"
    # The default TSC mode (no tsc_mode line): on a host with a reliable TSC
    # a TDF 1 guest reads the raw TSC until something moves it off it.
    cfg = tiny_guest_config(name, f"selena.init=/usr/bin/clockcheck "
                                  f"selena.args=gap,{FREEZE1_VIRTUAL_MS}")
    domid = create_paused(name, cfg, 1.0)
    console = Console(name)
    try:
        sh("xl", "unpause", name)
        console.wait_for(r"GAPSTART", 120)
        time.sleep(1.0)
        print(sh("selena-tdf", "freeze", domid).strip())
        first = status(domid)
        time.sleep(FREEZE_REAL_S)
        second = status(domid)
        print(sh("selena-tdf", "thaw", domid).strip())
        lines = console.wait_for(r"\bGAP \d+", 120)
    finally:
        try_sh("xl", "destroy", name)
    advanced = int(second["virtual_ns"]) - int(first["virtual_ns"])
    if first["frozen"] != "yes" or advanced != 0:
        failures.append(f"TDF 1 guest: frozen={first['frozen']}, virtual time advanced "
                        f"{advanced} ns while frozen")
    m = re.search(r"\bGAP (\d+) (\d+) (\d+) (\d+)", lines[-1][1])
    if m is None:
        return failures + [f"TDF 1 guest: no GAP result: {lines[-1][1]!r}"]
    largest, reads, _step, ticks = (int(x) for x in m.groups())
    hz = _cpu_hz()
    # What the frozen interval would add to one step if it were counted.
    limit_s = FREEZE_REAL_S / 2
    print(f"freeze1 {name}: tdf {first['tdf']}, virtual time advanced {advanced} ns while "
          f"frozen {FREEZE_REAL_S:g} s; in {reads} back-to-back reads the largest clock step "
          f"{largest / 1e9:.3f} s and the largest TSC step {ticks / hz:.3f} s "
          f"({ticks} ticks at {hz / 1e6:g} MHz; limit {limit_s:g} s each)")
    if largest / 1e9 >= limit_s:
        failures.append(f"TDF 1 guest: clock stepped {largest / 1e9:.3f} s: it counted the "
                        "frozen interval")
    if ticks / hz >= limit_s:
        failures.append(f"TDF 1 guest: TSC stepped {ticks / hz:.3f} s: RDTSC counted the "
                        "frozen interval")
    return failures


def _samples(lines: list[tuple[float, str]]) -> list[tuple[float, int, int]]:
    out = []
    for real, line in lines:
        m = re.search(r"\bS (\d+) (\d+) (\d+) (\d+)$", line)
        if m:
            out.append((real, int(m.group(1)), int(m.group(2))))
    return out


def check_save_restore() -> list[str]:
    failures: list[str] = []
    name = "selena-save"
    cfg = tiny_guest_config(name, f"selena.init=/usr/bin/clockcheck "
                                  f"selena.args={SAVE_SAMPLE_S},100,1,0")
    create_paused(name, cfg, SAVE_TDF)
    console = Console(name)
    try:
        sh("xl", "unpause", name)
        lines = console.wait_for(r"\bS \d+", 120)
        deadline = time.monotonic() + SAVE_AFTER_REAL_S
        while time.monotonic() < deadline:
            lines += console.lines()
            time.sleep(0.05)
        SAVE_FILE.unlink(missing_ok=True)
        t0 = time.monotonic()
        sh("xl", "save", name, str(SAVE_FILE))
        t1 = time.monotonic()
        lines += console.lines()
        before = _samples(lines)
        # The restored guest writes to a new console log.
        console_log(name).unlink(missing_ok=True)
        console = Console(name)
        # xl restore unpauses the domain; it arrives frozen, with a pause of
        # its own, and starts only at the thaw (docs/hypervisor.md).
        sh("xl", "restore", str(SAVE_FILE))
        domid = sh("xl", "domid", name).strip()
        restored = status(domid)
        time.sleep(THAW_WAIT_S)
        held = status(domid)
        print(sh("selena-tdf", "thaw", domid).strip())
        t2 = time.monotonic()
        running = status(domid)
        after_lines = console.wait_for(r"DONE", 300)
        after = _samples(after_lines)
        held_ns = int(held["virtual_ns"]) - int(restored["virtual_ns"])
        print(f"save/restore: xl save {t1 - t0:.1f} s, xl restore and thaw {t2 - t1:.1f} s; "
              f"restored TDF {restored['tdf']} (frozen={restored['frozen']}, "
              f"{THAW_WAIT_S:g} s after xl restore {held['frozen']}, advanced {held_ns} ns; "
              f"after thaw {running['frozen']}); {len(before)} samples before, "
              f"{len(after)} after")
        if restored["tdf"] != f"{SAVE_TDF:g}":
            failures.append(f"restored TDF {restored['tdf']}, expected {SAVE_TDF:g}")
        if (restored["frozen"], held["frozen"], running["frozen"]) != ("yes", "yes", "no") \
                or held_ns != 0:
            failures.append("restored domain: expected frozen (virtual time held) until "
                            "the thaw, also after xl restore's unpause")
        if len(before) < 5 or len(after) < 5:
            failures.append(f"too few samples around the save ({len(before)}, {len(after)})")
            return failures
        rate = fit_rate([(r, mono / 1e9) for r, mono, _ in after[1:]])
        err = (rate - 1 / SAVE_TDF) * SAVE_TDF
        print(f"save/restore: guest clock rate after restore {rate:.5f} "
              f"(expected {1 / SAVE_TDF:.5f}, {err * 100:+.2f}%)")
        if abs(err) > RATE_TOLERANCE:
            failures.append(f"rate after restore {rate:.5f}, expected {1 / SAVE_TDF:.5f}")
        mono_jump = (after[0][1] - before[-1][1]) / 1e9
        real_jump = (after[0][2] - before[-1][2]) / 1e9
        # The clock runs on from the suspend to the end of the save.
        limit = (t1 - t0) / SAVE_TDF + MAX_JUMP_S
        print(f"save/restore: across the save the guest's CLOCK_MONOTONIC advanced "
              f"{mono_jump:.3f} s and CLOCK_REALTIME {real_jump:.3f} s "
              f"(limit {limit:.3f} s; samples 0.1 s apart; {t2 - t0:.1f} s of real time "
              f"passed)")
        for clock, jump in (("CLOCK_MONOTONIC", mono_jump), ("CLOCK_REALTIME", real_jump)):
            if not 0 <= jump <= limit:
                failures.append(f"{clock} jumped {jump:+.3f} s across the save")
    finally:
        try_sh("xl", "destroy", name)
        SAVE_FILE.unlink(missing_ok=True)
    return failures


def check_ticker() -> list[str]:
    failures: list[str] = []
    name = "selena-tickguest"
    kernel = TICKGUEST.resolve()
    if not kernel.exists():
        return [f"{kernel} is missing: run make -C xen-patches tickguest on the host"]
    cfg = "\n".join([f'name = "{name}"', 'type = "pv"', f'kernel = "{kernel}"',
                     "memory = 32", "vcpus = 1", 'on_poweroff = "destroy"',
                     'on_crash = "destroy"']) + "\n"
    create_paused(name, cfg, TICK_TDF)
    console = Console(name)
    try:
        sh("xl", "unpause", name)
        lines = console.wait_for(r"DONE", 120)
    finally:
        try_sh("xl", "destroy", name)
    ticks = [(real, int(m.group(2))) for real, line in lines
             if (m := re.search(r"\bK (\d+) (\d+)$", line))]
    if len(ticks) < 10:
        return [f"only {len(ticks)} ticks seen"]
    steps = sorted(b[1] - a[1] for a, b in zip(ticks, ticks[1:], strict=False))
    median = steps[len(steps) // 2]
    real_per_tick = (ticks[-1][0] - ticks[0][0]) / (len(ticks) - 1)
    want_real = TICK_VIRTUAL_NS / 1e9 * TICK_TDF
    print(f"ticker: {len(ticks)} default PV ticks at TDF {TICK_TDF:g}: median "
          f"{median / 1e6:.3f} ms of guest time apart (shortest {steps[0] / 1e6:.3f} ms), "
          f"{real_per_tick * 1e3:.1f} ms of real time apart (expected "
          f"{TICK_VIRTUAL_NS / 1e6:g} and {want_real * 1e3:g} ms)")
    if abs(median - TICK_VIRTUAL_NS) > TICK_TOLERANCE * TICK_VIRTUAL_NS:
        failures.append(f"ticks {median / 1e6:.3f} ms of guest time apart, expected 10 ms")
    if abs(real_per_tick - want_real) > TICK_TOLERANCE * want_real:
        failures.append(f"ticks {real_per_tick * 1e3:.1f} ms of real time apart, expected "
                        f"{want_real * 1e3:g} ms")
    return failures


def check_privilege() -> list[str]:
    failures = []
    for argv in (["set", "0", "2"], ["freeze", "0"]):
        out = try_sh("selena-tdf", *argv)
        print(f"privilege: selena-tdf {' '.join(argv)} -> rc {out.returncode}: "
              f"{out.stderr.strip()}")
        if out.returncode == 0 or "keep real time" not in out.stderr:
            failures.append(f"selena-tdf {' '.join(argv)} was not refused for Dom0")
    return failures


def _tdf_restore(domid: str, milli: int, virt_ns: int) -> str:
    """Write the pseudo MSRs to vCPU 0 of domid: "ok" or "errno N NAME"."""
    return sh(str(TDF_RESTORE.resolve()), domid, str(milli), str(virt_ns)).strip()


def _runs_on(name: str, before: dict[str, str], after: dict[str, str],
             milli: int) -> list[str]:
    """Failures unless virtual time ran from `before` to `after` at 1000/milli."""
    real = int(after["real_ns"]) - int(before["real_ns"])
    virt = int(after["virtual_ns"]) - int(before["virtual_ns"])
    want = real * 1000 // milli
    print(f"restore {name}: virtual time advanced {virt} ns in {real} ns of real time "
          f"(expected {want} ns), tdf {after['tdf']}, frozen {after['frozen']}")
    failures = []
    if real <= 0 or abs(virt - want) > RESTORE_SLACK_NS:
        failures.append(f"{name}: virtual time advanced {virt} ns in {real} ns of real "
                        f"time, expected {want} ns")
    if after["tdf"] != before["tdf"] or after["frozen"] != "no":
        failures.append(f"{name}: tdf/frozen {before['tdf']}/{before['frozen']} became "
                        f"{after['tdf']}/{after['frozen']}")
    return failures


def check_restore() -> list[str]:
    tool = TDF_RESTORE.resolve()
    if not tool.exists():
        return [f"{tool} is missing: run make -C xen-patches tdfrestore on the host"]
    failures: list[str] = []
    name = "selena-restore"
    domid = create_paused(name, tiny_guest_config(name, ""), RESTORE_TDF)
    try:
        # Never run yet: what the toolstack's restore does is taken.
        out = _tdf_restore(domid, RESTORE_MILLI, RESTORE_VIRT_NS)
        held = status(domid)
        print(f"restore: never-run domain -> {out}; tdf {held['tdf']}, frozen "
              f"{held['frozen']}, virtual_ns {held['virtual_ns']}")
        if out != "ok" or held["tdf"] != f"{RESTORE_MILLI / 1000:g}" \
                or held["frozen"] != "yes" or int(held["virtual_ns"]) != RESTORE_VIRT_NS:
            failures.append(f"never-run domain: restore -> {out}, status {held}")
        # The toolstack's unpause does not start the restored clock: the thaw does.
        sh("xl", "unpause", name)
        time.sleep(0.5)
        unpaused = status(domid)
        print(f"restore: after xl unpause frozen {unpaused['frozen']}, virtual_ns "
              f"{unpaused['virtual_ns']}")
        if unpaused["frozen"] != "yes" or int(unpaused["virtual_ns"]) != RESTORE_VIRT_NS:
            failures.append(f"never-run domain: xl unpause started its clock: {unpaused}")
        sh("selena-tdf", "thaw", domid)
        time.sleep(0.5)
        # Running: the same write, TDF 1 and virtual time back to 1 ns, refused.
        before = status(domid)
        out = _tdf_restore(domid, 1000, 1)
        after = status(domid)
        time.sleep(RESTORE_RUN_S)
        later = status(domid)
        print(f"restore: running domain -> {out}")
        if not re.fullmatch(r"errno \d+ (EBUSY|EPERM)", out):
            failures.append(f"running domain: restore -> {out!r}, expected EBUSY or EPERM")
        failures += _runs_on("running domain", before, after, RESTORE_MILLI)
        failures += _runs_on("running domain", after, later, RESTORE_MILLI)
        # Dom0 (the caller, the hardware domain): refused, its time untouched.
        before = status("0")
        out = _tdf_restore("0", 2000, 1)
        after = status("0")
        print(f"restore: Dom0 -> {out}")
        if not out.startswith("errno "):
            failures.append(f"Dom0: restore -> {out!r}, expected a refusal")
        failures += _runs_on("Dom0", before, after, 1000)
    finally:
        try_sh("xl", "destroy", name)
    return failures


CHECKS = {"freeze": check_freeze, "freeze1": check_freeze_tdf1, "save": check_save_restore,
          "ticker": check_ticker, "privilege": check_privilege, "restore": check_restore}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="*", help=f"of {', '.join(CHECKS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    if os.geteuid() != 0 or not Path("/proc/xen/capabilities").exists():
        print("check_hv must run as root in a Xen Dom0 (use: selena lab run)", file=sys.stderr)
        return 2
    failures: list[str] = []
    for name in args.checks or list(CHECKS):
        start = time.monotonic()
        try:
            failures += [f"{name}: {f}" for f in CHECKS[name]()]
        except (CheckError, SelenaError, OSError) as exc:
            failures.append(f"{name}: {exc}")
        print(f"{name}: {time.monotonic() - start:.1f} s")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nall hypervisor checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
