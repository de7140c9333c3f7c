"""check_hv's lapic check without a lab: its judgement of lapicguest's
lines (periodic, one-shot and TSC-deadline interrupts), the TSC-deadline
mode skipped, not failed, where the guest's CPUID offers none."""

import pytest

from selena.lab import check_hv

KHZ = 2_600_000


def lapic_lines(*, deadline: str = "dilated") -> list[tuple[float, str]]:
    """lapicguest's lines at LAPIC_TDF: 10 ms of guest time per interrupt.
    `deadline`: "dilated", "undilated" (its interrupts 10 ms of real time
    apart) or "absent" (the guest's CPUID offers no TSC-deadline timer)."""
    tdf = check_hv.LAPIC_TDF
    lines, real, guest, index = [(0.0, f"KHZ {KHZ}")], 1.0, 0.0, 0
    phases = [("P", 40), ("O", 20)] + ([("D", 20)] if deadline != "absent" else [])
    for tag, count in phases:
        for _ in range(count):
            lines.append((real, f"{tag} {index} {int(guest * KHZ * 1000)}"))
            index += 1
            guest += 0.01
            real += 0.01 * (1 if tag == "D" and deadline == "undilated" else tdf)
    if deadline == "absent":
        lines.append((real, "NO TSC-DEADLINE\r"))     # as the console gives it
    return [*lines, (real, "DONE")]


@pytest.fixture
def guest(monkeypatch, tmp_path):
    kernel = tmp_path / "lapicguest"
    kernel.write_bytes(b"")
    monkeypatch.setattr(check_hv, "LAPICGUEST", kernel)

    def use(lines: list[tuple[float, str]]) -> None:
        monkeypatch.setattr(check_hv, "_run_own_guest", lambda *_a, **_k: lines)
    return use


def test_every_mode_dilated_passes(guest, capsys):
    guest(lapic_lines())
    assert check_hv.check_lapic() == []
    out = capsys.readouterr().out
    assert "lapic: 20 TSC-deadline LAPIC timer interrupts at TDF 10: median 10.000 ms" in out


def test_an_undilated_tsc_deadline_timer_fails(guest):
    guest(lapic_lines(deadline="undilated"))
    failures = check_hv.check_lapic()
    assert len(failures) == 1 and failures[0].startswith("LAPIC TSC-deadline: interrupts"), \
        failures


def test_no_tsc_deadline_timer_is_said_not_failed(guest, capsys):
    guest(lapic_lines(deadline="absent"))
    assert check_hv.check_lapic() == []
    assert "lapic: TSC-deadline mode not run: the guest's CPUID offers none" in \
        capsys.readouterr().out
