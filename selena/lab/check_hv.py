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
- ticker: a minimal PV guest of our own (xen-patches/tests/tickguest, built on
  the host by `make -C xen-patches tickguest`; Linux stops the default ticker
  at boot) counts the ticks of the default 10 ms PV periodic timer at TDF 10:
  they come 10 ms of guest time apart, so 100 ms of real time apart.
- lapic: a minimal PVH guest of our own (xen-patches/tests/lapicguest, built
  on the host by `make -C xen-patches lapicguest`; Linux on PVH takes the
  Xen timer hypercalls instead) takes its LAPIC timer's interrupts, 10 ms
  of guest time apart in periodic, one-shot and TSC-deadline mode (Xen's
  vLAPIC emulates it whatever CPUID says: the lab's CPUID offers none), at
  TDF 10: they come 10 ms apart by its own (emulated) TSC and 100 ms of
  real time apart; then Xen's periodic timer (VCPUOP_set_periodic_timer,
  10 ms; Linux on PVH stops it and takes the single-shot one): its
  VIRQ_TIMER events likewise.
- hvm: a full HVM guest of our own without a device model
  (xen-patches/tests/hvmguest, started by xen-patches/tests/hvm_launch.c;
  built on the host by `make -C xen-patches hvmguest hvmlaunch`), at TDF
  --tdf (default 10), takes in turn the periodic interrupts of the time
  sources Xen emulates for HVM guests: PIT channel 0 (IRQ 0, 10.0002 ms),
  the RTC's periodic interrupt (IRQ 8, 7.8125 ms), HPET timer 0 (10 ms) and
  the LAPIC timer (10 ms) periodic and in TSC-deadline mode, 50 periods
  each; they must come that far apart on average by its own (emulated) TSC
  and TDF times that in real time
  (the mean: Xen delivers the ticks it was late for back to back).  It
  reads the ACPI PM timer and the HPET main counter every 10 ms for 0.5 s
  and times three ticks of the CMOS seconds: each must count its nominal
  rate per second of guest time and 1/TDF of it per real second.  With
  --change-to the TDF changes after the PIT's 25th interrupt: the PIT's
  interrupts before are judged at --tdf, those after and every later
  source at the new TDF.  At --tdf 1 the guest is not dilated at all (no
  SET).  The same guest with Hyper-V enlightenments (hvm-launch
  --viridian), whose synthetic timers the series does not convert, must
  be refused dilation (EOPNOTSUPP, Xen's reason logged).
- privilege: the hardware domain (Dom0) cannot be dilated or frozen.
- restore: the restore path's pseudo MSRs (factor, virtual time, wall
  clock), written with XEN_DOMCTL_set_vcpu_msrs as libxc's restore writes
  them (xen-patches/tests/tdf_restore.c, built on the host by `make -C
  xen-patches tdfrestore`), are refused without the wall clock's (EINVAL,
  nothing changed: a dilation comes whole), taken by a domain that has never run (frozen, that
  factor, virtual time held at that value, also across `xl unpause`, until
  `selena-tdf thaw`) and refused for the same
  domain once running (EBUSY; EPERM under an XSM policy without the TDF
  permission) and for Dom0, whose virtual time then keeps running as
  before: same factor, not frozen, advancing at 1/TDF of real time.
- xsm (only in a lab booted on the Flask build, tests/lab/test_xsm_e2e.py):
  under Xen's own policy Dom0 sets, reads, freezes and restores a guest's
  time; under the same policy without the series' permissions
  (domain2:gettdf, domain2:settdf) each of them is refused with EACCES,
  nothing changes, and Flask logs the denials; reloading Xen's policy
  allows the same restore again.

Run in Dom0: python3 -m selena.lab.check_hv [freeze] [freeze1] [ticker] [lapic] [privilege]
[restore] (the default: all but xsm and hvm), check_hv xsm or check_hv hvm [--tdf TDF]

Save/restore and migration of a running guest, PV or PVH: check_clock
--save-restore --migrate [--guest pvh].
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Protocol

from selena.errors import SelenaError
from selena.lab.dom0 import (
    FLASK_POLICIES,
    console_log,
    create_paused,
    sh,
    status,
    tiny_guest_config,
    try_sh,
)

FREEZE_TDF = 200.0
GAP_VIRTUAL_MS = 100
FREEZE_REAL_S = 3.0
MAX_FROZEN_STEP_NS = 1_000_000
FREEZE1_VIRTUAL_MS = 12_000  # the TDF 1 guest's reads (real = virtual at TDF 1)
TICK_TDF = 10.0
TICK_VIRTUAL_NS = 10_000_000  # Xen's default PV periodic timer
TICK_TOLERANCE = 0.15
TICKGUEST = Path("xen-patches/build/tickguest")   # relative to the shared tree
LAPICGUEST = Path("xen-patches/build/lapicguest")
LAPIC_TDF = 10.0                  # lapicguest's period is TICK_VIRTUAL_NS too
TDF_RESTORE = Path("xen-patches/build/tdf-restore")  # likewise
HVMGUEST = Path("xen-patches/build/hvmguest")
HVM_LAUNCH = Path("xen-patches/build/hvm-launch")
HVM_TDF = 10.0
# With --change-to, the TDF changes after this PIT interrupt (of 51).
HVM_CHANGE_AT_TICK = 25
# hvmguest's periodic sources (its line tag, what, the programmed period in
# ns): the 8254 at 1193182 Hz counting 11932, the RTC at rate 9 (32768 Hz /
# 2^8), HPET timer 0 and the LAPIC timer at 10 ms, the latter in periodic and
# in TSC-deadline mode (which Xen's vLAPIC emulates whatever CPUID says).
HVM_TIMERS = (("PIT", "PIT channel 0 interrupts (IRQ 0)", 11932 * 10**9 / 1193182),
              ("RTC", "RTC periodic interrupts (IRQ 8)", 10**9 / 128),
              ("HPET", "HPET timer 0 interrupts (legacy route)", 10_000_000),
              ("LAPIC", "LAPIC timer interrupts", 10_000_000),
              ("TSCDL", "TSC-deadline LAPIC timer interrupts", 10_000_000))
PM_TIMER_HZ = 3_579_545
COUNTER_TOLERANCE = 0.02     # of a counter's rate by the guest's TSC (real time: TICK_TOLERANCE)
RESTORE_TDF = 5.0            # set at creation, replaced by the accepted restore
RESTORE_MILLI = 2000         # the accepted restore's factor (TDF 2)
RESTORE_VIRT_NS = 7_000_000_000  # and virtual time
RESTORE_WALL_NS = 1_700_000_000 * 10**9  # and wall clock (November 2023)
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


def check_ticker() -> list[str]:
    kernel = TICKGUEST.resolve()
    if not kernel.exists():
        return [f"{kernel} is missing: run make -C xen-patches tickguest on the host"]
    lines = _run_own_guest(XlGuest("selena-tickguest", "pv", kernel), TICK_TDF)
    ticks = [(real, int(m.group(2))) for real, line in lines
             if (m := re.search(r"\bK (\d+) (\d+)$", line))]
    return _tick_spacing("ticker", "default PV ticks", "ticks", ticks, TICK_TDF)


def check_lapic() -> list[str]:
    """lapicguest (a PVH guest of our own, `make -C xen-patches lapicguest`)
    takes its LAPIC timer's interrupts, periodic, one-shot, then in
    TSC-deadline mode (whether its CPUID offers the mode or not: Xen's vLAPIC
    emulates it in software either way), 10 ms of guest time apart, at TDF
    10: they must come 100 ms of real time apart, and 10 ms apart by the
    guest's own (emulated) TSC."""
    kernel = LAPICGUEST.resolve()
    if not kernel.exists():
        return [f"{kernel} is missing: run make -C xen-patches lapicguest on the host"]
    lines = _run_own_guest(XlGuest("selena-lapicguest", "pvh", kernel,
                                   'tsc_mode = "always_emulate"'), LAPIC_TDF)
    khz = next((int(m.group(1)) for _, line in lines if (m := re.search(r"\bKHZ (\d+)$", line))),
               0)
    if not khz:
        return ["lapicguest gave no TSC frequency"]
    failures: list[str] = []
    # Xen's CPUID offers the mode to HVM containers only where the CPU has it
    # (QEMU's software CPU, the lab's, has none); its vLAPIC runs it anyway.
    offered = next((m.group(1) for _, line in lines
                    if (m := re.search(r"\bCPUID TSC-DEADLINE ([01])\b", line))), None)
    if offered is None:
        return ["lapicguest did not say whether its CPUID offers TSC-deadline mode "
                "(an older build? run make -C xen-patches lapicguest)"]
    print(f"lapic: the guest's CPUID offers TSC-deadline mode: {'yes' if offered == '1' else 'no'}")
    sources = [(f"{mode} LAPIC timer interrupts", f"LAPIC {mode}: interrupts", tag)
               for mode, tag in (("periodic", "P"), ("one-shot", "O"), ("TSC-deadline", "D"))]
    # The timer hypercall Linux on PVH leaves unused (xen/common, as for PV).
    sources.append(("periodic timer hypercall events (VIRQ_TIMER)",
                    "periodic timer hypercall: events", "T"))
    for what, label, tag in sources:
        # Guest ns from its TSC ticks.
        ticks = [(real, int(m.group(1)) * 1_000_000 // khz) for real, line in lines
                 if (m := re.search(rf"\b{tag} \d+ (\d+)$", line))]
        failures += _tick_spacing("lapic", what, label, ticks, LAPIC_TDF)
    return failures


class OwnGuest(Protocol):
    """One of our minimal guests, as _run_own_guest drives it."""

    def create(self, tdf: float) -> str:
        """Create it paused at `tdf`; its domid."""

    def wait_for(self, pattern: str, timeout: float) -> list[tuple[float, str]]:
        """Its lines up to the first matching `pattern`, with their arrival times."""

    def destroy(self) -> None:
        """Destroy it (whether or not create() finished)."""


class XlGuest:
    """A guest xl creates (32 MB, one vCPU) from `kernel`, its console's lines
    read from xenconsoled's log."""

    def __init__(self, name: str, virt: str, kernel: Path, *lines: str):
        self.name = name
        self.config = "\n".join([f'name = "{name}"', f'type = "{virt}"',
                                 f'kernel = "{kernel}"', "memory = 32", "vcpus = 1", *lines,
                                 'on_poweroff = "destroy"', 'on_crash = "destroy"']) + "\n"
        self.console: Console | None = None

    def create(self, tdf: float) -> str:
        domid = create_paused(self.name, self.config, tdf)
        self.console = Console(self.name)
        return domid

    def wait_for(self, pattern: str, timeout: float) -> list[tuple[float, str]]:
        assert self.console is not None
        return self.console.wait_for(pattern, timeout)

    def destroy(self) -> None:
        try_sh("xl", "destroy", self.name)


# selena-tdf's explanation of each refusal (xen-patches/tool/selena-tdf.c explain()).
TDF_REFUSALS = (("cannot be dilated", "EOPNOTSUPP"), ("XSM policy does not allow", "EACCES"),
                ("not privileged", "EPERM"), ("TDF out of range", "EINVAL"),
                ("not patched for time dilation", "ENOSYS"), ("no such domain", "ESRCH"))


def set_tdf_or_refusal(domid: str, tdf: float) -> None:
    """`selena-tdf set domid tdf`; a refusal raises CheckError in one line
    naming its errno and the reason Xen logged (`xl dmesg`)."""
    out = try_sh("selena-tdf", "set", domid, f"{tdf:g}")
    if out.returncode == 0:
        return
    err = out.stderr.strip()
    name = next((n for phrase, n in TDF_REFUSALS if phrase in err), f"rc {out.returncode}")
    logged = re.findall(rf"\bd{domid}: (not dilated: .*)", try_sh("xl", "dmesg").stdout)
    reason = f"; Xen: {logged[-1].strip()}" if logged else ""
    raise CheckError(f"selena-tdf set {domid} {tdf:g} refused: {name} ({err}){reason}")


class LaunchedGuest:
    """A guest a launcher program creates, paused, printing "domid N" and then
    each console line stamped with its CLOCK_MONOTONIC time (hvm-launch), and
    destroys when it ends or is terminated.  At TDF 1 no factor is set."""

    def __init__(self, argv: list[str]):
        self.argv = argv
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.domid = ""

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _next(self, deadline: float) -> str | None:
        try:
            return self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def _ended(self, what: str) -> CheckError:
        stderr = ""
        if self.proc is not None and self.proc.stderr is not None and self.proc.poll() is not None:
            stderr = self.proc.stderr.read().strip()
        return CheckError(f"{Path(self.argv[0]).name}: {what}" + (f": {stderr}" if stderr else ""))

    def create(self, tdf: float) -> str:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        threading.Thread(target=self._read, daemon=True).start()
        first = self._next(time.monotonic() + 60)
        m = re.fullmatch(r"domid (\d+)", first or "")
        if m is None:
            if first is None:
                self.proc.wait(timeout=10)
            raise self._ended(f"no domid: {first!r}")
        self.domid = m.group(1)
        if tdf != 1:
            set_tdf_or_refusal(self.domid, tdf)
        return self.domid

    def wait_for(self, pattern: str, timeout: float) -> list[tuple[float, str]]:
        seen: list[tuple[float, str]] = []
        deadline = time.monotonic() + timeout
        while (line := self._next(deadline)) is not None:
            m = re.fullmatch(r"(\d+\.\d+) (.*)", line)
            if m is None:           # "end REASON": the domain is gone
                tail = "\n".join(text for _, text in seen[-20:])
                raise CheckError(f"guest {self.domid}: {line} before {pattern!r}:\n{tail}")
            seen.append((float(m.group(1)), m.group(2)))
            if re.search(pattern, m.group(2)):
                return seen
        tail = "\n".join(text for _, text in seen[-20:])
        raise CheckError(f"guest {self.domid}: no {pattern!r} within {timeout:.0f} s:\n{tail}")

    def destroy(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()       # it destroys the domain
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.domid:
            try_sh("xl", "destroy", self.domid)     # in case it could not


def _run_own_guest(guest: OwnGuest, tdf: float, timeout: float = 120) -> list[
        tuple[float, str]]:
    """One of our minimal guests at `tdf` until it prints DONE: its console
    lines with their arrival times; destroyed in the end, always."""
    try:
        domid = guest.create(tdf)
        sh("xl", "unpause", domid)
        return guest.wait_for(r"DONE", timeout)
    finally:
        guest.destroy()


def _tick_spacing(check: str, what: str, label: str, ticks: list[tuple[float, int]],
                  tdf: float, period_ns: float = TICK_VIRTUAL_NS, *,
                  mean: bool = False) -> list[str]:
    """Ticks (arrival in real s, guest ns) meant period_ns of guest time
    apart: their median spacing in guest time (their mean with `mean`, for a
    source that delivers missed ticks back to back) and their mean spacing
    in real time, each within TICK_TOLERANCE."""
    if len(ticks) < 10:
        return [f"{label}: only {len(ticks)} seen"]
    steps = sorted(b[1] - a[1] for a, b in zip(ticks, ticks[1:], strict=False))
    guest = (ticks[-1][1] - ticks[0][1]) / (len(ticks) - 1) if mean else steps[len(steps) // 2]
    real_per_tick = (ticks[-1][0] - ticks[0][0]) / (len(ticks) - 1)
    want_real = period_ns / 1e9 * tdf
    print(f"{check}: {len(ticks)} {what} at TDF {tdf:g}: {'mean' if mean else 'median'} "
          f"{guest / 1e6:.3f} ms of guest time apart (shortest {steps[0] / 1e6:.3f} ms), "
          f"{real_per_tick * 1e3:.1f} ms of real time apart (expected "
          f"{period_ns / 1e6:g} and {want_real * 1e3:g} ms)")
    failures = []
    if abs(guest - period_ns) > TICK_TOLERANCE * period_ns:
        failures.append(f"{label} {guest / 1e6:.3f} ms of guest time apart, expected "
                        f"{period_ns / 1e6:g} ms")
    if abs(real_per_tick - want_real) > TICK_TOLERANCE * want_real:
        failures.append(f"{label} {real_per_tick * 1e3:.1f} ms of real time apart, expected "
                        f"{want_real * 1e3:g} ms")
    return failures


def check_hvm(tdf: float = HVM_TDF, change_to: float | None = None) -> list[str]:
    """hvmguest, a full HVM guest without a device model (hvm-launch), at
    `tdf`, changed to `change_to` halfway through its PIT's interrupts: see
    the module's docstring."""
    kernel, launcher = HVMGUEST.resolve(), HVM_LAUNCH.resolve()
    missing = [str(p) for p in (kernel, launcher) if not p.exists()]
    if missing:
        return [f"{' and '.join(missing)} missing: run make -C xen-patches hvmguest hvmlaunch "
                "on the host"]
    failures = _viridian_refused(launcher, kernel)
    guest = LaunchedGuest([str(launcher), str(kernel)])
    if change_to is None:
        return failures + judge_hvm(_run_own_guest(guest, tdf), tdf)
    try:
        domid = guest.create(tdf)
        sh("xl", "unpause", domid)
        lines = guest.wait_for(rf"^PIT {HVM_CHANGE_AT_TICK} ", 60 * tdf)
        set_tdf_or_refusal(domid, change_to)
        changed = time.monotonic()
        print(f"hvm: TDF {tdf:g} -> {change_to:g} after PIT interrupt {HVM_CHANGE_AT_TICK}")
        lines += guest.wait_for(r"DONE", 120 * change_to)
    finally:
        guest.destroy()
    return failures + judge_hvm(lines, change_to, (changed, tdf))


def _viridian_refused(launcher: Path, kernel: Path) -> list[str]:
    """The same guest with Hyper-V enlightenments, whose synthetic timers
    the series does not convert: SET must be refused (EOPNOTSUPP) with
    Xen's reason."""
    guest = LaunchedGuest([str(launcher), "--viridian", str(kernel)])
    try:
        domid = guest.create(HVM_TDF)
    except CheckError as exc:
        if "EOPNOTSUPP" in str(exc) and "Hyper-V" in str(exc):
            print(f"hvm: with viridian: {exc}")
            return []
        raise
    finally:
        guest.destroy()
    return [f"a guest with Hyper-V enlightenments (domain {domid}) was dilated to TDF "
            f"{HVM_TDF:g}"]


def judge_hvm(lines: list[tuple[float, str]], tdf: float,
              before: tuple[float, float] | None = None) -> list[str]:
    """hvmguest's lines (arrival in real s, text) at `tdf`: each periodic
    source's spacing, each counter's rate (see the module's docstring).
    `before`: (real s, TDF) of a change to `tdf` during the PIT's
    interrupts; those before it are judged at that TDF, those after at
    `tdf` (the one spanning the change in neither)."""
    def values(tag: str) -> list[tuple[float, int, int]]:
        return [(real, int(m.group(1)), int(m.group(2))) for real, line in lines
                if (m := re.fullmatch(rf"{tag} (\d+) (\d+)", line))]

    header = {m.group(1): int(m.group(2)) for _, line in lines
              if (m := re.fullmatch(r"(KHZ|HPETFS) (\d+)", line))}
    khz, hpet_fs = header.get("KHZ", 0), header.get("HPETFS", 0)
    if not khz or not hpet_fs:
        return [f"hvmguest gave no TSC frequency or HPET period: {header}"]
    failures: list[str] = []
    for tag, what, period_ns in HVM_TIMERS:
        # The first interrupt comes at an arbitrary phase of the period.  The
        # mean: Xen delivers the ticks its late timers missed back to back
        # (libxl's timer_mode no_delay_for_missed_ticks).
        ticks = [(real, tsc * 1_000_000 // khz) for real, _, tsc in values(tag)][1:]
        if before is not None and tag == "PIT":
            changed, old_tdf = before
            failures += _tick_spacing("hvm", what + " before the change", tag,
                                      [t for t in ticks if t[0] < changed], old_tdf, period_ns,
                                      mean=True)
            ticks = [t for t in ticks if t[0] >= changed][1:]
        failures += _tick_spacing("hvm", what, tag, ticks, tdf, period_ns, mean=True)
    # A counter's lines are "TAG tsc value", but "RTCS index tsc" for each
    # tick of the CMOS seconds (its value, BCD, wraps at 60: counted instead).
    counters = (("PM", "ACPI PM timer", PM_TIMER_HZ, 2**32, False),
                ("HPETC", "HPET main counter", 10**15 / hpet_fs, 2**32, False),
                ("RTCS", "RTC seconds", 1.0, None, True))
    for tag, what, hz, modulus, index_first in counters:
        samples = []
        for real, a, b in values(tag):
            tsc, value = (b, a) if index_first else (a, b)
            samples.append((real, tsc * 1_000_000 // khz, value))
        failures += _counter_rate(what, samples, hz, modulus, tdf)
    return failures


def _counter_rate(what: str, samples: list[tuple[float, int, int]], hz: float,
                  modulus: int | None, tdf: float) -> list[str]:
    """Samples (arrival in real s, guest ns, counter value; the value modulo
    `modulus`) of a counter meant to count `hz` per guest second: its rate by
    guest time within COUNTER_TOLERANCE and by real time within TICK_TOLERANCE
    of hz/tdf."""
    if len(samples) < 3:
        return [f"{what}: only {len(samples)} samples"]
    counted = sum((b[2] - a[2]) % modulus if modulus else b[2] - a[2]
                  for a, b in zip(samples, samples[1:], strict=False))
    guest_s = (samples[-1][1] - samples[0][1]) / 1e9
    real_s = samples[-1][0] - samples[0][0]
    if guest_s <= 0 or real_s <= 0:
        return [f"{what}: samples over {guest_s:g} s of guest and {real_s:g} s of real time"]
    by_guest, by_real = counted / guest_s, counted / real_s
    print(f"hvm: {what} at TDF {tdf:g}: {by_guest:.7g} Hz by guest time, {by_real:.7g} Hz by "
          f"real time ({len(samples)} samples over {guest_s:.3f} s of guest time, {real_s:.3f} s "
          f"of real time; expected {hz:.7g} and {hz / tdf:.7g} Hz)")
    failures = []
    if abs(by_guest - hz) > COUNTER_TOLERANCE * hz:
        failures.append(f"{what}: {by_guest:.7g} Hz by guest time, expected {hz:.7g}")
    if abs(by_real - hz / tdf) > TICK_TOLERANCE * hz / tdf:
        failures.append(f"{what}: {by_real:.7g} Hz by real time, expected {hz / tdf:.7g}")
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


def _tdf_restore(domid: str, milli: int, virt_ns: int, wall_ns: int | None = None) -> str:
    """Write the pseudo MSRs to vCPU 0 of domid (without the wall clock's if
    wall_ns is None): "ok" or "errno N NAME"."""
    wall = [] if wall_ns is None else [str(wall_ns)]
    return sh(str(TDF_RESTORE.resolve()), domid, str(milli), str(virt_ns), *wall).strip()


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
        # A dilation without its wall clock (an older series' stream) is not
        # taken at all: the domain keeps its factor and is not frozen.
        partial = _tdf_restore(domid, RESTORE_MILLI, RESTORE_VIRT_NS)
        kept = status(domid)
        print(f"restore: never-run domain, factor and virtual time only -> {partial}; "
              f"tdf {kept['tdf']}, frozen {kept['frozen']}")
        if partial != "errno 22 EINVAL" or kept["tdf"] != f"{RESTORE_TDF:g}" \
                or kept["frozen"] != "no":
            failures.append(f"never-run domain: a partial restore -> {partial}, status {kept}")
        # Never run yet: what the toolstack's restore does is taken.
        out = _tdf_restore(domid, RESTORE_MILLI, RESTORE_VIRT_NS, RESTORE_WALL_NS)
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
        out = _tdf_restore(domid, 1000, 1, RESTORE_WALL_NS)
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
        out = _tdf_restore("0", 2000, 1, RESTORE_WALL_NS)
        after = status("0")
        print(f"restore: Dom0 -> {out}")
        if not out.startswith("errno "):
            failures.append(f"Dom0: restore -> {out!r}, expected a refusal")
        failures += _runs_on("Dom0", before, after, 1000)
    finally:
        try_sh("xl", "destroy", name)
    return failures


def _load_policy(name: str) -> None:
    sh("xl", "loadpolicy", str((FLASK_POLICIES / name).resolve()))
    print(f"xsm: loaded {name}")


def _refused(*argv: str) -> str | None:
    """None if `selena-tdf argv` was refused by the XSM policy, else what happened."""
    out = try_sh("selena-tdf", *argv)
    print(f"xsm: selena-tdf {' '.join(argv)} -> rc {out.returncode}: {out.stderr.strip()}")
    if out.returncode != 0 and "XSM policy does not allow" in out.stderr:
        return None
    return f"selena-tdf {' '.join(argv)}: rc {out.returncode}, {out.stderr.strip()!r}"


def check_xsm() -> list[str]:
    enforcing = try_sh("xl", "getenforce").stdout.strip()
    if enforcing != "Enforcing":
        return [f"Flask is {enforcing or 'absent'!r}, not enforcing: boot the Flask build "
                "(tests/lab/test_xsm_e2e.py)"]
    failures: list[str] = []
    names = ("selena-xsm", "selena-xsm-restore")
    _load_policy("xenpolicy")
    try:
        # Xen's policy: Dom0 may dilate a guest it creates (SET at creation).
        domid, restore_domid = (create_paused(n, tiny_guest_config(n, ""), RESTORE_TDF)
                                for n in names)
        before = status(domid)
        if before["tdf"] != f"{RESTORE_TDF:g}":
            failures.append(f"Xen's policy: TDF {before['tdf']} after set {RESTORE_TDF:g}")
        _load_policy("xenpolicy-no-tdf")
        for argv in (["status", domid], ["set", domid, "2"], ["freeze", domid]):
            if (what := _refused(*argv)) is not None:
                failures.append(f"without the tdf permissions: {what}")
        out = _tdf_restore(restore_domid, RESTORE_MILLI, RESTORE_VIRT_NS, RESTORE_WALL_NS)
        print(f"xsm: restore into a never-run domain without settdf -> {out}")
        if out != "errno 13 EACCES":
            failures.append(f"without the tdf permissions: restore -> {out!r}, expected EACCES")
        denials = sh("xl", "dmesg")
        for perm in ("gettdf", "settdf"):
            if not re.search(r"avc:\s+denied\s+\{ " + perm + r" \}", denials):
                failures.append(f"Flask logged no denial of domain2:{perm}")
        _load_policy("xenpolicy")
        after = status(domid)
        print(f"xsm: after: tdf {after['tdf']}, frozen {after['frozen']}")
        if (after["tdf"], after["frozen"]) != (before["tdf"], "no"):
            failures.append(f"a refused change changed the domain: {before} -> {after}")
        out = _tdf_restore(restore_domid, RESTORE_MILLI, RESTORE_VIRT_NS, RESTORE_WALL_NS)
        print(f"xsm: the same restore under Xen's policy -> {out}")
        if out != "ok":
            failures.append(f"Xen's policy: restore -> {out!r}, expected ok")
    finally:
        _load_policy("xenpolicy")
        for n in names:
            try_sh("xl", "destroy", n)
    return failures


DEFAULT_CHECKS = {"freeze": check_freeze, "freeze1": check_freeze_tdf1, "ticker": check_ticker,
          "privilege": check_privilege, "restore": check_restore, "lapic": check_lapic}
CHECKS = {**DEFAULT_CHECKS, "xsm": check_xsm, "hvm": check_hvm}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checks", nargs="*", help=f"of {', '.join(CHECKS)} (default: all "
                        "but xsm, which needs the Flask build, and hvm)")
    parser.add_argument("--tdf", type=float, default=HVM_TDF,
                        help=f"the hvm check's TDF (default {HVM_TDF:g}; at 1 no factor is set)")
    parser.add_argument("--change-to", type=float, default=None, metavar="TDF",
                        help=f"hvm: change to this TDF after PIT interrupt {HVM_CHANGE_AT_TICK}; "
                             "every later source is judged at it")
    args = parser.parse_args(argv)
    unknown = [c for c in args.checks if c not in CHECKS]
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    if os.geteuid() != 0 or not Path("/proc/xen/capabilities").exists():
        print("check_hv must run as root in a Xen Dom0 (use: selena lab run)", file=sys.stderr)
        return 2
    failures: list[str] = []
    for name in args.checks or list(DEFAULT_CHECKS):
        start = time.monotonic()
        try:
            found = check_hvm(args.tdf, args.change_to) if name == "hvm" else CHECKS[name]()
            failures += [f"{name}: {f}" for f in found]
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
