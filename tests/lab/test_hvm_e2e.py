"""End to end in the lab: HVM guests on Dom0's device model (issue 32 items
2-4). check-clock in the tiny kernel booted as an HVM guest (firmware,
PCI, the emulated PIT, RTC, HPET, ACPI PM timer and LAPIC, without Xen's
clocksource or timer device): its clocks on each of the HPET, the PM timer
and the TSC, its timers on the LAPIC timer, the RTC's update interrupts and
the PIT's count against guest time, across run-time changes; then as a
PVHVM guest on two vCPUs, its clocks on Xen's clocksource (the pvclock, as
PV and PVH guests read it) and its timers on Xen's timer device; one saved,
restored and migrated (its timers on Xen's timer device: see
selena.lab.dom0; Dom0's wall clock left alone, as Xen moves an HVM
guest's RTC with it, and check-clock's putting the clock back would move
the RTC back an hour while the guest runs); then
scenarios/pvh_pair.py with `--param virt=hvm`: two HVM hosts on an 80 ms link
at TDF 6 through everything a PV node does. One lab boot; make test-long,
for make test's budget."""

import re

import lab_results
import pytest
from guest_pair import assert_pair_run
from lab_output import failures_first
from lab_stats import check

pytestmark = [pytest.mark.lab, pytest.mark.long]

OUT = lab_results.out("test-hvm")
CLOCKSOURCES = ("hpet", "acpi_pm", "tsc", "xen")


def _vcpus(clocksource: str) -> int:
    """Xen's clocksource on two vCPUs: vCPU 1 reads its own pvclock."""
    return 2 if clocksource == "xen" else 1


def _timer_device(clocksource: str) -> str:
    """Xen's clocksource needs the vector callback, which brings Linux's
    timers onto Xen's timer device too (selena.lab.dom0)."""
    return "xen" if clocksource == "xen" else "lapic"


@pytest.fixture(scope="module")
def result(lab):
    script = "".join(
        f"python3 -m selena.lab.check_clock --tdf 10 --guest hvm --clocksource {cs} "
        f"--vcpus {_vcpus(cs)}; echo check-clock-{cs}-rc=$?; " for cs in CLOCKSOURCES)
    script += ("python3 -m selena.lab.check_clock --tdf 5 --guest hvm --save-restore --migrate "
               "--change-to 2 --host-clock-step 0; echo check-clock-saved-rc=$?; ")
    script += (f"rm -rf {OUT}; selena run scenarios/pvh_pair.py --param virt=hvm --out {OUT}; "
               "echo run-rc=$?; echo guests-left=$(xl list | grep -c selena-hvmpair)")
    return lab.run(["sh", "-c", script], timeout=1500)


def _run_of(out: str, clocksource: str) -> str:
    before = out.split(f"check-clock-{clocksource}-rc=", 1)[0]
    for other in CLOCKSOURCES:
        before = before.rsplit(f"check-clock-{other}-rc=", 1)[-1]
    return before


@pytest.mark.parametrize("clocksource", CLOCKSOURCES)
def test_an_hvm_guests_clocks_timers_rtc_and_pit_follow_the_tdf(result, clocksource):
    out = _run_of(result.output, clocksource)
    assert f"check-clock-{clocksource}-rc=0" in result.output, failures_first(out)
    assert (f"TDF 10 (changes 10 -> 2 -> 10); HVM guest; {_vcpus(clocksource)} vCPU(s); TSC "
            f"default mode; clocks on the {clocksource} counter, timers on the "
            f"{_timer_device(clocksource)} timer") in out, out
    rows = {name.strip(): (float(got), float(want)) for name, got, want in re.findall(
        r"^(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+[-+][\d.]+\s+yes$", out, re.M)}
    names = ["CLOCK_MONOTONIC rate", "after change 1 to TDF 2: rate",
             "after change 2 to TDF 10: rate", "RTC seconds per guest second",
             "PIT ticks per guest second", "TSC kHz per guest second",
             "nanosleep 300 ms vCPU 0: real s"]
    if _vcpus(clocksource) == 2:
        names += ["vCPU 1 CLOCK_MONOTONIC rate", "vCPU 1 after change 1 to TDF 2: rate",
                  "vCPU 1 after change 2 to TDF 10: rate"]
    for name in names:
        got, want = rows[name]
        key = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
        check(f"hvm.{clocksource}.{key}_over_expected", got / want, above=0.98, below=1.02,
              context=(name, got, want))
    # The last device pair seen (the TSC is "tsc-early" until Linux refines it).
    assert re.search(rf"^clocksource/timer device\s+(\S+ then )?{clocksource}/"
                     rf"{_timer_device(clocksource)}\s+yes$", out, re.M), out
    assert re.search(r"^watchdog 2 s survived\s+largest TDF increase x5\s+yes$", out, re.M)


def test_an_hvm_guest_keeps_its_tdf_clocks_rtc_and_pit_across_save_restore_and_migration(
        result):
    out = result.output.split(f"check-clock-{CLOCKSOURCES[-1]}-rc=", 1)[-1] \
        .split("check-clock-saved-rc=")[0]
    # The RTC's rate is recorded before check-clock's own verdict is asserted,
    # so that a run it fails on (0.968 on 2026-12-03) is in the data too.
    rtc = re.search(r"^RTC seconds per guest second\s+([\d.]+)\s", out, re.M)
    assert rtc, failures_first(out)
    check("hvm.saved.rtc_seconds_per_guest_second", float(rtc.group(1)), above=0.99,
          below=1.01, context=failures_first(out))
    assert "check-clock-saved-rc=0" in result.output, failures_first(out)
    assert re.search(r"HVM guest; 1 vCPU\(s\); TSC default mode; clocks on the hpet counter, "
                     r"timers on the xen timer; save/restore after [^;]*later\); migrate after",
                     out), out
    for point in ("save/restore", "migrate"):
        assert re.search(rf"^frozen until the thaw \({point}\) +TDF 5, frozen yes/yes, "
                         rf"\+0 ns in 1 s +yes$", out, re.M), out
        for clock in ("CLOCK_MONOTONIC", "CLOCK_REALTIME", "TSC"):
            assert re.search(rf"^{clock} across the {point} .*yes$", out, re.M), (clock, out)
    # The RTC's date came back with the guest's wall clock, not the new
    # domain's: its update interrupts go on, once a guest second (checked
    # above, and by check-clock's own row).
    assert re.search(r"^RTC seconds per guest second\s.*yes$", out, re.M), out
    assert re.search(r"^PIT ticks per guest second\s.*yes$", out, re.M), out


def test_two_hvm_hosts_keep_an_80ms_link_at_tdf6(result):
    assert_pair_run(result.output.rsplit("check-clock-saved-rc=", 1)[-1], OUT, "hvm")
