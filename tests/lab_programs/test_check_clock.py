"""The Dom0-side checks of check-clock on canned guest output (no lab)."""

from itertools import pairwise

import pytest

from selena.lab import check_clock
from selena.lab.check_clock import (
    Run,
    _cross_checks,
    _parse,
    _steal_checks,
    _timer_rows,
    _tsc_rows,
    _vcpu_rate_rows,
    _watchdog_check,
    default_changes,
)


def _run(lines: list[str]) -> Run:
    run = Run()
    for i, line in enumerate(lines):
        _parse(run, float(i), line)
    return run


def test_every_guest_line_is_parsed_and_garbage_ignored():
    run = _run(["[    1.0] S 100 200 300 400", "P 100 0 10000000", "C 2000000 1 0",
                "W 2 3", "M 1 500 0", "T0 poll@1 5", "T1 poll@1 9", "S 1 2 x 4", "DONE"])
    assert [(s.mono, s.tsc) for s in run.samples] == [(100, 400)]
    assert run.steal == [(100, [0, 10000000])]
    assert run.cpuid == (2000000, 1, 0) and run.watchdog == (2, 3)
    assert run.cross == {1: (500, 0)} and run.timers["poll@1"]["T1"] == (6.0, 9)
    assert run.done


def test_steal_that_decreases_or_exceeds_elapsed_time_fails():
    good = _run([f"P {t * 10**9} {t * 10**8} 0" for t in range(1, 6)])
    assert all(ok for _, _, ok in _steal_checks(good, 2))
    falling = _run(["P 1000000000 50000000", "P 2000000000 40000000"])
    assert [ok for _, _, ok in _steal_checks(falling, 1)] == [False, True]
    wrapped = _run(["P 1000000000 0", "P 2000000000 18446744073000000000"])
    assert not all(ok for _, _, ok in _steal_checks(wrapped, 1))


def test_cross_vcpu_backwards_reads_fail():
    assert _cross_checks(_run(["M 1 100 0"]), 2)[0][2]
    assert not _cross_checks(_run(["M 1 100 2"]), 2)[0][2]
    assert not _cross_checks(_run([]), 2)[0][2]


def test_tsc_rate_must_match_cpuid_and_the_mode():
    lines = ["C 1000000 1 0", "S 0 0 0 0", "S 1000000000 0 0 1000000000"]
    failures: list[str] = []
    run = _run(lines)
    rows = _tsc_rows(run, run.samples, None, failures)
    assert rows[0][4] and not failures
    raw = _run(["C 1000000 1 0", "S 0 0 0 0", "S 1000000000 0 0 10000000000"])
    assert not _tsc_rows(raw, raw.samples, None, failures)[0][4]
    _tsc_rows(run, run.samples, "native", failures)
    assert any("expected native" in f for f in failures)


def test_watchdog_must_be_armed_and_reports_the_largest_increase():
    run = _run(["W 2 3"])
    run.changes = [(1.0, 2.0), (2.0, 10.0)]
    name, detail, ok = _watchdog_check(run, 10.0, 2)
    assert ok and "x5" in detail
    assert not _watchdog_check(_run(["W 2 -1"]), 10.0, 2)[2]


def test_default_changes_go_down_and_back_up():
    assert default_changes(10.0) == [2.0, 10.0]
    assert default_changes(2.0) == [4.0, 2.0]


def _ideal_run(jump_s: float = 0.0) -> Run:
    """A guest whose clocks follow TDF 10, then 2 from real second 20 (the
    change issued at 19.9), with timers, steal, CPUID and the watchdog as a
    faithful guest reports them; `jump_s` of guest time added at the change."""
    from selena.lab.check_clock import TIMER_MS, Sample

    def mono_ns(real: float) -> int:
        guest = real / 10 if real <= 20 else 2.0 + (real - 20) / 2 + jump_s
        return round(guest * 1e9)

    run = Run(changes=[(20.0, 2.0)], issued=[19.9], cpuid=(1_000_000, 1, 0),
              watchdog=(2, 3))
    for i in range(400):
        real = i / 10
        ns = mono_ns(real)
        run.samples.append(Sample(real, ns, ns, ns, ns))     # TSC at 1 GHz
        run.steal.append((ns, [0]))
    for n, kind in enumerate(("nanosleep", "timerfd", "select", "poll")):
        start = 25.0 + n
        run.timers[f"{kind}@0"] = {"T0": (start, mono_ns(start)),
                                   "T1": (start + 2 * TIMER_MS / 1000,
                                          mono_ns(start) + TIMER_MS * 1_000_000)}
    # Armed at the start for 3 guest seconds: pending across the change.
    run.pending_armed = (0.0, 0, 3_000_000_000)
    run.pending_fired = (22.0, 3_001_000_000)
    return run


def test_check_passes_a_faithful_clock_and_names_a_jump(monkeypatch) -> None:
    import selena.lab.check_clock as check_clock

    monkeypatch.setattr(check_clock, "run_guest", lambda *a, **k: _ideal_run())
    assert check_clock.check(10.0, [2.0], 60.0) == []
    monkeypatch.setattr(check_clock, "run_guest", lambda *a, **k: _ideal_run(jump_s=0.5))
    failures = check_clock.check(10.0, [2.0], 60.0)
    assert any("guest time jumped +0.4" in f for f in failures), failures


def _late_poll(real_late_s: float, guest_late_ms: float = 0.0,
               reader_pause_s: float = 0.0) -> tuple[list, list, list[str]]:
    """_ideal_run's timers (at TDF 2, 0.6 s each) with the poll's end line
    stamped `real_late_s` late, fired `guest_late_ms` late in the guest's own
    clock, and stamped by the console reader's first read after a pause."""
    run = _ideal_run()
    (r1, v1) = run.timers["poll@0"]["T1"]
    r1 += real_late_s
    run.timers["poll@0"]["T1"] = (r1, v1 + round(guest_late_ms * 1e6))
    if reader_pause_s:
        run.reader_pauses[r1] = reader_pause_s
    failures: list[str] = []
    rows, checks = _timer_rows(run, 10.0, 1, failures)
    return rows, checks, failures


def test_a_timer_is_judged_in_real_time_from_the_earliest_its_end_can_have_arrived():
    rows, checks, _ = _late_poll(0.0)
    assert [ok for *_, ok in rows] == [True] * 4 and checks[0][2], (rows, checks)
    assert checks[0][1] == "300.0 300.0 300.0 300.0 ms (300..366)"
    # 0.6 s at TDF 2 may take 0.6 x 1.02 + 0.1 + 2 x 0.01 = 0.732 s: 0.19 s late fails ...
    rows, _, _ = _late_poll(0.19)
    assert rows[-1][0] == "poll 300 ms vCPU 0: real s" and not rows[-1][-1]
    # ... unless the reader read nothing for 0.1 s before it stamped the line
    # (it reached the log in that pause), but not a pause of 0.05 s.
    assert _late_poll(0.19, reader_pause_s=0.1)[0][-1][-1]
    assert not _late_poll(0.19, reader_pause_s=0.05)[0][-1][-1]


def test_a_timer_late_or_early_in_the_guests_own_clock_fails_whatever_the_console_says():
    # In time by Dom0's stamps, 67 ms late by the guest's clock (bound 66).
    rows, checks, _ = _late_poll(0.0, guest_late_ms=67)
    assert all(ok for *_, ok in rows)
    assert checks == [("timers vCPU 0 in guest time", "300.0 300.0 300.0 367.0 ms (300..366)",
                       False)]
    _, checks, failures = _late_poll(0.0, guest_late_ms=-1)
    assert not checks[0][2] and failures == [
        "timer poll on vCPU 0 fired early in guest time: 0.2990 s"]


def _vcpu_run(rate_after: float) -> Run:
    """vCPU 1 reading its clock every 0.1 s of real time: 1/5 before a change
    to TDF 2 at real time 10 s, `rate_after` after it."""
    run = Run()
    for k in range(200):
        real = k * 0.1
        mono = real / 5 if real < 10 else 2 + (real - 10) * rate_after
        _parse(run, real, f"V 1 {int(mono * 1e9)} 0")
    run.changes = [(10.0, 2.0)]
    return run


def test_each_vcpu_must_follow_every_change():
    failures: list[str] = []
    rows = _vcpu_rate_rows(_vcpu_run(0.5), 5.0, 2, failures)
    assert [name for name, *_ in rows] == ["vCPU 1 CLOCK_MONOTONIC rate",
                                            "vCPU 1 after change 1 to TDF 2: rate"]
    assert all(ok for *_, ok in rows) and not failures
    # vCPU 1 still extrapolating at the old rate after the change (stale area).
    stale = _vcpu_rate_rows(_vcpu_run(0.2), 5.0, 2, failures)
    assert [ok for *_, ok in stale] == [True, False]
    _vcpu_rate_rows(Run(), 5.0, 2, failures)
    assert failures == ["vCPU 1: no clock samples (V lines)"]


def _checkpointed_run(realtime_step_s: float = 0.0, tsc_step_s: float = 0.0) -> Run:
    """A guest at TDF 5 sampling every 0.1 s of real time, saved from real
    time 10 s to 12 s (running until 11 s) and thawed at 15 s; its
    CLOCK_REALTIME moved by `realtime_step_s` and its TSC (2 GHz) by
    `tsc_step_s` across the save."""
    run = Run()
    for k in range(300):
        real = k * 0.1
        if 10 <= real <= 15:
            continue
        virtual = real / 5 if real < 10 else 2.2 + (real - 15) / 5
        step = realtime_step_s if real > 15 else 0.0
        tsc = int((virtual + (tsc_step_s if real > 15 else 0.0)) * 2e9)
        _parse(run, real, f"S {int(virtual * 1e9)} {int((1e9 + virtual + step) * 1e9)} 0 {tsc}")
    point = check_clock.Checkpoint("save/restore", 10.0, 12.0, 15.0, 5.0, 3600.0)
    run.checkpoints = [point]
    run.changes = [(15.0, 5.0), (25.0, 2.0)]
    run.issued = [15.0, 24.9]
    return run


def test_clocks_across_a_save_must_advance_by_what_the_guest_ran():
    checks = check_clock._checkpoint_checks(_checkpointed_run())
    assert [name for name, _, _ in checks] == ["CLOCK_MONOTONIC across the save/restore",
                                               "CLOCK_REALTIME across the save/restore"]
    assert all(ok for *_, ok in checks), checks
    # The guest's wall clock following the restoring host's (an hour ahead).
    stepped = check_clock._checkpoint_checks(_checkpointed_run(realtime_step_s=3600.0))
    assert [ok for *_, ok in stepped] == [True, False]
    assert stepped[1][1].endswith("+3599.800"), stepped
    no_samples = Run(checkpoints=_checkpointed_run().checkpoints)
    assert not check_clock._checkpoint_checks(no_samples)[0][2]


def test_an_emulated_tsc_must_continue_across_a_save_as_the_clocks_do():
    run = _checkpointed_run()
    run.cpuid = (2_000_000, 1, 0)         # 2 GHz, emulated
    name, detail, ok = check_clock._checkpoint_checks(run)[-1]
    assert (name, detail, ok) == ("TSC across the save/restore",
                                  "0.240 s (0.040..0.440), +0.000", True)
    # Counting the save's duration, as CLOCK_REALTIME may, is no jump.
    counted = _checkpointed_run(tsc_step_s=0.2)
    counted.cpuid = (2_000_000, 1, 0)
    assert check_clock._checkpoint_checks(counted)[-1][2] is True
    # A restored TSC offset that missed the move of the guest's clock.
    jumped = _checkpointed_run(tsc_step_s=-2.0)
    jumped.cpuid = (2_000_000, 1, 0)
    assert check_clock._checkpoint_checks(jumped)[-1][2] is False
    # The raw TSC (native mode) follows the host: not checked.
    jumped.cpuid = (2_000_000, 0, 2)
    assert [n for n, *_ in check_clock._checkpoint_checks(jumped)][-1].startswith("CLOCK_REAL")


def test_segments_after_a_checkpoint_are_named_for_it_and_skip_the_change_jump_check():
    run = _checkpointed_run()
    assert check_clock._labels(run) == ["save/restore", "change 1 to TDF 2"]
    # The frozen interval would look like a jump to the TDF-change check.
    assert check_clock._jumps(run, 5.0) == []


def test_a_timer_pending_across_the_first_change_must_fire_at_its_deadline():
    def run_with(fired_mono: float, fired_at: float = 20.0) -> Run:
        run = _run(["Q0 0 4000000000"])
        run.changes, run.issued = [(10.0, 2.0)], [9.9]
        _parse(run, fired_at, f"Q1 {int(fired_mono * 1e9)}")
        return run

    (name, detail, ok), = check_clock._pending_checks(run_with(4.004), 5.0)
    assert name == "timer pending across the change 1 to TDF 2" and ok, detail
    assert detail == "+4.0 ms (0..60)"
    assert not check_clock._pending_checks(run_with(3.9), 5.0)[0][2]      # early
    assert not check_clock._pending_checks(run_with(4.5), 5.0)[0][2]      # late
    # Fired before the change: it was not pending across it.
    assert not check_clock._pending_checks(run_with(4.0, fired_at=5.0), 5.0)[0][2]
    assert check_clock._pending_checks(_run(["Q0 0 4000000000"]), 5.0) == []
    missing = _run([])
    missing.changes = [(10.0, 2.0)]
    assert check_clock._pending_checks(missing, 5.0)[0][1:] == ("no result (Q0/Q1 lines)",
                                                                False)


def test_the_pending_timer_expires_after_the_first_event_well_clear_of_a_save():
    first = check_clock.FIRST_SEGMENT_VIRTUAL_S
    assert check_clock.pending_ms(5.0, []) == 0
    assert check_clock.pending_ms(5.0, [2.0]) == int((first + 2.5 / 2) * 1000)
    assert check_clock.pending_ms(5.0, [2.0], checkpoints=1) == int((first + 1.5) * 1000)


def _pending_across_the_save(deadline_s: float, fired_s: float, fired_at: float) -> Run:
    """_checkpointed_run's guest (samples up to 2.0 s of guest time before
    the save, from 2.22 s after the thaw at real 15 s) with a timer armed at
    0 for `deadline_s` that fired at `fired_s` of guest time."""
    run = _checkpointed_run()
    _parse(run, 0.0, f"Q0 0 {int(deadline_s * 1e9)}")
    _parse(run, fired_at, f"Q1 {int(fired_s * 1e9)}")
    return run


def test_a_timer_due_inside_the_save_is_judged_from_the_guests_first_sample_after_it():
    # Due at 2.1 s: the guest's user space was frozen (no sample from 1.98
    # to 2.22 s), so it fires as the first sample after the thaw comes.
    (name, detail, ok), = check_clock._pending_checks(
        _pending_across_the_save(2.1, 2.2205, 15.15), 5.0)
    assert (name, ok) == ("timer pending across the save/restore", True), detail
    assert detail == "+120.5 ms (0..30), due in the guest's suspend: +0.5 ms after it"
    # Late after the thaw: 50 ms after the guest's first sample.
    late = check_clock._pending_checks(_pending_across_the_save(2.1, 2.27, 15.4), 5.0)[0]
    assert late[2] is False and late[1].endswith("+50.0 ms after it"), late
    # Early stays early.
    assert not check_clock._pending_checks(_pending_across_the_save(2.1, 2.05, 15.05),
                                           5.0)[0][2]
    # Due after the first sample after the thaw: judged from its deadline.
    strict = check_clock._pending_checks(_pending_across_the_save(2.5, 2.55, 16.6), 5.0)[0]
    assert strict[1:] == ("+50.0 ms (0..30)", False), strict


TSC_KHZ = 2_600_000


def _tsc(virtual_s: float) -> int:
    """The emulated TSC at a virtual time (CPUID's kHz, the C line)."""
    return round(virtual_s * 1e9) * TSC_KHZ // 1_000_000


def _hvm_run(rtc_per_guest_s: float, pit_hz: float, devices: tuple[str, str]) -> Run:
    """An HVM guest's platform lines over 12 guest seconds: RTC updates one
    RTC second apart and PIT counts at the given rates of guest time."""
    lines = [f"K {devices[0]} {devices[1]}", f"C {TSC_KHZ} 1 0"]
    for k in range(12):
        # CLOCK_REALTIME as Linux's boot left it: 0.27 s into the RTC's second.
        boot = int(k / rtc_per_guest_s * 1e9)
        lines.append(f"R {boot} {1_800_000_000 + k} "
                     f"{(1_800_000_000 + k) * 10**9 + 270_000_000} {boot} {_tsc(boot / 1e9)}")
    for k in range(120):
        lines.append(f"I {k * 100_000_000} {int(k * 0.1 * pit_hz)} {k * 100_000_000} "
                     f"{_tsc(k * 0.1)}")
    lines.append(f"K {devices[0]} {devices[1]}")
    return _run(lines)


def test_an_hvm_guests_rtc_and_pit_must_count_guest_time():
    from selena.lab.check_clock import PIT_HZ, _platform_rows

    failures: list[str] = []
    rows = _platform_rows(_hvm_run(1.0, PIT_HZ, ("hpet", "lapic")), failures)
    assert [r[0] for r in rows] == ["RTC seconds per guest second", "PIT ticks per guest second"]
    assert all(r[4] for r in rows) and not failures
    # An RTC or a PIT left in real time at TDF 10 counts ten times too fast
    # in guest time.
    rows = _platform_rows(_hvm_run(10.0, PIT_HZ * 10, ("hpet", "lapic")), failures)
    assert [r[4] for r in rows] == [False, False]
    stopped = _run(["R 0 100 0 0 0", "R 1000000000 101 0 1000000000 2600000000", "R none"])
    _platform_rows(stopped, failures)
    assert any("RTC: 2 update interrupts, then none" in f for f in failures)
    assert any("PIT: 0 samples" in f for f in failures)


def _saved_hvm_run(rtc_date_after_s: float = 0.0, rtc_per_guest_s: float = 1.0,
                   suspended_s: float = 0.67, linux_ahead_s: float = 0.27,
                   late_tsc_read_s: float = 0.0) -> Run:
    """Six RTC updates, a save/restore, seven more, the last update before
    the save delivered after the restore (as the console does), and PIT
    counts every 100 ms, in the guest's virtual time v (which the emulated
    TSC and the RTC count). The guest is suspended at v = 5.5 s for
    `suspended_s` (CLOCK_MONOTONIC leaves it out). Linux's boot set its clock
    `linux_ahead_s` ahead of the RTC's second (hctosys); at the resume it
    takes Xen's wall clock's gain less that offset as suspended time
    (CLOCK_BOOTTIME gains it; nothing when the suspend was shorter), and
    so lands on the wall clock. After the restore the RTC's date is
    `rtc_date_after_s` ahead of the wall clock. `late_tsc_read_s`: the TSC of
    the third update after the restore read that late (its vCPU
    descheduled between the two reads)."""
    from selena.lab.check_clock import PIT_HZ

    injected = max(0.0, suspended_s - linux_ahead_s)

    def clocks(v: float) -> tuple[float, float, float]:
        """CLOCK_BOOTTIME, CLOCK_MONOTONIC and CLOCK_REALTIME at v."""
        if v < 5.5:
            return v, v, 100 + v + linux_ahead_s
        mono = v - suspended_s
        return mono + injected, mono, 100 + v + linux_ahead_s - suspended_s + injected

    def ns(seconds: float) -> int:
        return round(seconds * 1e9)

    lines = [f"C {TSC_KHZ} 1 0"]
    for k in range(13):
        # Second 106's edge came while Linux was suspended: taken 0.23 s late.
        v = k / rtc_per_guest_s if k < 6 else \
            (k - rtc_date_after_s) / rtc_per_guest_s + (0.23 if k == 6 else 0.005)
        boot, mono, real = clocks(v)
        tsc = _tsc(v + (late_tsc_read_s if k == 8 else 0.0))
        lines.append(f"R {ns(boot)} {100 + k} {ns(real)} {ns(mono)} {tsc}")
    lines.insert(7, lines.pop(6))     # after the first update of the restored guest
    for k in range(130):
        v = k * 0.1 + (suspended_s if k >= 55 else 0.0)
        boot, mono, _ = clocks(v)
        # The guest unwraps the count by CLOCK_BOOTTIME: across the resume
        # it is off by however many wraps the suspend was not counted.
        ticks = int(PIT_HZ * (boot if k >= 55 else v))
        lines.append(f"I {ns(boot)} {ticks} {ns(mono)} {_tsc(v)}")
    run = _run(lines)
    run.checkpoints.append(check_clock.Checkpoint("save/restore", 6.0, 7.0, 8.0, 5.0))
    return run


def test_the_rtcs_rate_is_judged_between_checkpoints_and_its_date_after_each():
    from selena.lab.check_clock import _platform_rows, _rtc_date_checks, fit_rate

    run = _saved_hvm_run()
    # Over the whole run the jump of Linux's clock alone reads as 2.5 % fast.
    whole = fit_rate([(boot / 1e9, float(secs)) for boot, secs, *_ in run.rtc])
    assert whole > 1.02
    failures: list[str] = []
    rtc, pit = _platform_rows(run, failures)
    assert len(run.rtc) == 13 and len(run.pit) == 130 and not failures
    assert rtc[0] == "RTC seconds per guest second" and rtc[1] == pytest.approx(1.0) and rtc[4]
    assert pit[0] == "PIT ticks per guest second" and pit[1] == pytest.approx(pit[2]) and pit[4]
    ((name, detail, ok),) = _rtc_date_checks(run)
    assert name == "RTC date after the save/restore" and ok, detail
    assert detail == "+0.005 s off CLOCK_REALTIME (6 updates); at boot +0.270 s"
    # A date a second off after the restore, or an RTC at the wrong rate,
    # fails.
    assert not _rtc_date_checks(_saved_hvm_run(1.0))[0][2]
    assert not _platform_rows(_saved_hvm_run(rtc_per_guest_s=1.05), [])[0][4]
    # No update after the restore: said, and a failure.
    quiet = _run([f"C {TSC_KHZ} 1 0"] + [
        f"R {k * 10**9} {100 + k} {(100 + k) * 10**9} {k * 10**9} {_tsc(k)}" for k in range(6)])
    quiet.checkpoints.append(check_clock.Checkpoint("migrate", 6.0, 7.0, 8.0, 5.0))
    assert _rtc_date_checks(quiet) == [("RTC updates between resumes",
                                        "1 stretches for 1 checkpoint(s)", False)]


@pytest.mark.parametrize(("suspended_s", "linux_ahead_s"), [
    (0.487, 0.481),     # the lab, 2026-12-05: Linux took 6 ms as suspended
    (0.40, 0.48),       # a suspend shorter than the offset: none at all
])
def test_a_resume_is_told_by_the_tsc_when_linux_counts_little_or_no_time_suspended(
        suspended_s, linux_ahead_s):
    from selena.lab.check_clock import RESUME_STEP_NS, _platform_rows, _rtc_date_checks

    run = _saved_hvm_run(suspended_s=suspended_s, linux_ahead_s=linux_ahead_s)
    # CLOCK_BOOTTIME does not mark the resume...
    steps = [abs((b[0] - b[3]) - (a[0] - a[3])) for a, b in pairwise(sorted(run.rtc))]
    assert max(steps) < RESUME_STEP_NS
    # ...the TSC does: both rates are right and the date is checked.
    failures: list[str] = []
    rtc, pit = _platform_rows(run, failures)
    assert not failures and rtc[1] == pytest.approx(1.0) and rtc[4]
    assert pit[1] == pytest.approx(pit[2]) and pit[4]
    ((name, detail, ok),) = _rtc_date_checks(run)
    assert name == "RTC date after the save/restore" and ok, detail


def test_a_late_tsc_read_alone_is_no_resume():
    from selena.lab.check_clock import _platform_rows, _rtc_date_checks, _rtc_stretches

    run = _saved_hvm_run(late_tsc_read_s=0.05)
    assert [len(s) for s in _rtc_stretches(run)] == [6, 6]
    assert _platform_rows(run, [])[0][4] and _rtc_date_checks(run)[0][2]
    # Without CPUID's TSC frequency the resumes cannot be told: a failure.
    run.cpuid = None
    assert _rtc_date_checks(run) == [("RTC updates between resumes",
                                      "1 stretches for 1 checkpoint(s)", False)]


def test_an_hvm_guests_clocks_must_read_the_asked_counter_and_fire_on_the_lapic():
    from selena.lab.check_clock import _devices_check

    assert _devices_check(_hvm_run(1.0, 1.0, ("acpi_pm", "lapic")), "acpi_pm")[2]
    name, detail, ok = _devices_check(_hvm_run(1.0, 1.0, ("xen", "xen")), "hpet")
    assert not ok and detail == "xen/xen"
    # Swapped mid-run (the clocksource watchdog): both named, and a failure.
    run = _run(["K tsc lapic", "K hpet lapic"])
    assert _devices_check(run, "tsc") == ("clocksource/timer device",
                                          "tsc/lapic then hpet/lapic", False)
    assert not _devices_check(_run([]), "hpet")[2]
    assert _devices_check(_run(["K hpet xen"]), "hpet", "xen")[2]
    # The TSC before and after Linux refines its calibration.
    assert _devices_check(_run(["K tsc-early lapic", "K tsc lapic"]), "tsc")[2]
    assert not _devices_check(_run(["K tsc-early lapic", "K hpet lapic"]), "tsc")[2]


def test_an_hvm_guest_config_boots_the_tiny_kernel_on_the_device_model(monkeypatch):
    import pytest

    from selena.lab import dom0

    monkeypatch.setattr(dom0, "template_memory_mb", lambda: 32)
    config = dom0.tiny_guest_config("g", "selena.init=/usr/bin/clockcheck", virt="hvm",
                                    clocksource="acpi_pm")
    assert 'type = "hvm"' in config and 'device_model_version = "qemu-xen"' in config
    # The same emulated PC as an HVM node's (one list of settings for both).
    from selena.backends.xl import HVM_XL_LINES
    assert all(f"\n{line}\n" in config for line in HVM_XL_LINES) and "viridian = 0" in config
    assert "clocksource=acpi_pm xen_no_vector_callback " in config
    assert "clocksource=xen" not in config and "memory = 64" in config
    assert "tsc=reliable" in dom0.tiny_guest_config("g", "", virt="hvm", clocksource="tsc")
    # A guest to be saved keeps Xen's callback (and timer device).
    saved = dom0.tiny_guest_config("g", "", virt="hvm", lapic_timer=False)
    assert "xen_no_vector_callback" not in saved and "clocksource=hpet" in saved
    pv = dom0.tiny_guest_config("g", "", virt="pv")
    assert "device_model" not in pv and "clocksource=xen" in pv and "memory = 32" in pv
    with pytest.raises(ValueError, match="clocksource 'jiffies'"):
        dom0.tiny_guest_config("g", "", virt="hvm", clocksource="jiffies")


def test_an_hvm_guest_on_xens_clocksource_keeps_the_vector_callback_and_xens_timers():
    from selena.lab.check_clock import hvm_clockevent

    # Linux registers Xen's clocksource only with the vector callback, which
    # puts its timers on Xen's timer device: the device check wants that.
    assert hvm_clockevent(False, "xen") == "xen" and hvm_clockevent(True, "hpet") == "xen"
    assert hvm_clockevent(False, "hpet") == "lapic"


def test_dom0s_clock_stays_put_around_an_hvm_guests_restore_unless_asked():
    from selena.lab.check_clock import HOST_CLOCK_STEP_S, host_clock_step

    assert host_clock_step(None, "pv") == host_clock_step(None, "pvh") == HOST_CLOCK_STEP_S
    assert host_clock_step(None, "hvm") == 0.0
    assert host_clock_step(60.0, "hvm") == 60.0 and host_clock_step(0.0, "pv") == 0.0


def test_an_hvm_guests_native_tsc_is_refused_across_a_checkpoint(capsys):
    with pytest.raises(SystemExit) as exited:
        check_clock.main(["--tdf", "5", "--guest", "hvm", "--tsc", "native", "--migrate"])
    assert exited.value.code == 2
    assert "--tsc native cannot be checked across a save" in capsys.readouterr().err
