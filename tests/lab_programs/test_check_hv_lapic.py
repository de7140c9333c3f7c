"""check_hv's lapic check without a lab: its judgement of lapicguest's
lines (periodic, one-shot and TSC-deadline interrupts, and Xen's periodic
timer's events), the TSC-deadline mode required whether the guest's CPUID
offers it or not (Xen's vLAPIC emulates it either way)."""

import pytest

from selena.lab import check_hv

KHZ = 2_600_000


def lapic_lines(*, deadline: str = "dilated", offered: str | None = "0") -> list[tuple[float, str]]:
    """lapicguest's lines at LAPIC_TDF: 10 ms of guest time per interrupt.
    `deadline`: "dilated", "undilated" (its interrupts 10 ms of real time
    apart) or "absent" (none came). `offered`: its CPUID line's value, None
    for no such line (a build from before it ran the mode regardless)."""
    tdf = check_hv.LAPIC_TDF
    lines, real, guest, index = [(0.0, f"KHZ {KHZ}")], 1.0, 0.0, 0
    for tag, count in ("P", 40), ("O", 20), ("D", 0 if deadline == "absent" else 20), ("T", 20):
        if tag == "D" and offered is not None:
            lines.append((real, f"CPUID TSC-DEADLINE {offered}\r"))   # as the console gives it
        for _ in range(count):
            lines.append((real, f"{tag} {index} {int(guest * KHZ * 1000)}"))
            index += 1
            guest += 0.01
            real += 0.01 * (1 if tag == "D" and deadline == "undilated" else tdf)
    return [*lines, (real, "DONE")]


@pytest.fixture
def guest(monkeypatch, tmp_path):
    kernel = tmp_path / "lapicguest"
    kernel.write_bytes(b"")
    monkeypatch.setattr(check_hv, "LAPICGUEST", kernel)

    def use(lines: list[tuple[float, str]]) -> None:
        monkeypatch.setattr(check_hv, "_run_own_guest", lambda *_a, **_k: lines)
    return use


@pytest.mark.parametrize("offered", ["0", "1"])
def test_every_mode_dilated_passes_whatever_cpuid_says(guest, capsys, offered):
    guest(lapic_lines(offered=offered))
    assert check_hv.check_lapic() == []
    out = capsys.readouterr().out
    assert "lapic: 20 TSC-deadline LAPIC timer interrupts at TDF 10: median 10.000 ms" in out
    assert f"CPUID offers TSC-deadline mode: {'yes' if offered == '1' else 'no'}" in out


def test_xens_periodic_timer_events_are_judged_too(guest, capsys):
    guest(lapic_lines())
    assert check_hv.check_lapic() == []
    assert "lapic: 20 periodic timer hypercall events (VIRQ_TIMER) at TDF 10: median 10.000 ms" \
        in capsys.readouterr().out
    guest([line for line in lapic_lines() if not line[1].startswith("T ")])
    assert check_hv.check_lapic() == ["periodic timer hypercall: events: only 0 seen"]


def test_an_undilated_tsc_deadline_timer_fails(guest):
    guest(lapic_lines(deadline="undilated"))
    failures = check_hv.check_lapic()
    assert len(failures) == 1 and failures[0].startswith("LAPIC TSC-deadline: interrupts"), \
        failures


def test_no_tsc_deadline_interrupts_fail_even_without_cpuid_offering_it(guest):
    guest(lapic_lines(deadline="absent"))
    assert check_hv.check_lapic() == ["LAPIC TSC-deadline: interrupts: only 0 seen"]


def test_a_guest_that_does_not_say_what_cpuid_offers_fails(guest):
    guest(lapic_lines(offered=None))
    failures = check_hv.check_lapic()
    assert len(failures) == 1 and "CPUID offers TSC-deadline" in failures[0], failures
