"""check_hv's hvm check without a lab: its judgement of hvmguest's lines
against a model of the guest's view (each source at its rate in guest time,
guest time running at 1/TDF of real time unless a source is not dilated),
the one-line report of the hypervisor's refusal to dilate the guest, and
the launcher's plumbing with a stand-in launcher program."""

import re
import sys
import textwrap
from pathlib import Path

import pytest

from selena.lab import check_hv
from selena.runner import CommandResult

KHZ = 2_600_000
HPET_FS = 16_000_000
HPET_HZ = 10**15 / HPET_FS


def guest_lines(tdf: float, *, undilated: str = "", wrong_period: str = "",
                late_ms: float = 0.0, pm_start: int = 2**32 - 1_000_000) -> list[tuple[float, str]]:
    """hvmguest's lines with their arrival times: every source at its nominal
    rate in guest time, guest time 1/tdf of real time.  `undilated` names a
    source that runs at its nominal rate in real time instead; `wrong_period`
    one whose period is 20% long; `late_ms` delays each interrupt to the next
    multiple of that many ms of real time (a late platform timer whose missed
    ticks come back to back); pm_start puts a wrap of the PM timer in the run."""
    lines = [(0.0, f"KHZ {KHZ}"), (0.0, f"HPETFS {HPET_FS}")]
    real = 1.0

    def tsc(guest_s: float) -> int:
        return int(guest_s * KHZ * 1000)

    for tag, _, period_ns in check_hv.HVM_TIMERS:
        period = period_ns / 1e9 * (1.2 if tag == wrong_period else 1.0)
        for i in range(51):
            at = real + i * period * (1 if tag == undilated else tdf)
            if late_ms:
                at = (int(at * 1000 / late_ms) + 1) * late_ms / 1000
            # The guest reads its TSC when the interrupt comes.
            lines.append((at, f"{tag} {i} {tsc(at / tdf)}"))
        real = lines[-1][0] + 0.1
    for tag, hz in (("PM", check_hv.PM_TIMER_HZ), ("HPETC", HPET_HZ)):
        start = pm_start if tag == "PM" else 0
        for i in range(51):
            at = real + i * 0.01 * tdf
            counted = hz * (at - real) * (tdf if tag == undilated else 1) / tdf
            lines.append((at, f"{tag} {tsc(at / tdf)} {(start + int(counted)) % 2**32}"))
        real = lines[-1][0] + 0.1
    for i in range(3):
        at = real + i * (1 if undilated == "RTCS" else tdf)
        lines.append((at, f"RTCS {i} {tsc(at / tdf)}"))
    lines.append((lines[-1][0], "DONE"))
    return lines


@pytest.mark.parametrize("tdf", [1.0, 10.0])
def test_every_source_at_its_rate_passes(tdf, capsys):
    assert check_hv.judge_hvm(guest_lines(tdf), tdf) == []
    out = capsys.readouterr().out
    assert f"hvm: 50 PIT channel 0 interrupts (IRQ 0) at TDF {tdf:g}: mean 10.000 ms of guest " \
           "time apart" in out
    # The model's counter is read whole: within a count of the rate.
    assert re.search(rf"hvm: ACPI PM timer at TDF {tdf:g}: 357954[45] Hz by guest time", out)
    assert "hvm: RTC seconds" in out and "hvm: HPET main counter" in out


def test_late_ticks_delivered_back_to_back_pass_by_their_mean(capsys):
    # Half the interrupts 0 ms after the previous one: a median would fail.
    lines = guest_lines(1.0, late_ms=20.0)
    assert check_hv.judge_hvm(lines, 1.0) == []
    assert "shortest 0.000 ms" in capsys.readouterr().out


@pytest.mark.parametrize(("source", "failure"), [
    ("PIT", "PIT 10.0 ms of real time apart, expected 100.002 ms"),
    ("RTC", "RTC 7.8 ms of real time apart, expected 78.125 ms"),
    ("HPET", "HPET 10.0 ms of real time apart, expected 100 ms"),
    ("LAPIC", "LAPIC 10.0 ms of real time apart, expected 100 ms"),
    ("TSCDL", "TSCDL 10.0 ms of real time apart, expected 100 ms"),
    ("PM", "ACPI PM timer: 3579545 Hz by real time, expected 357954.5"),
    ("HPETC", "HPET main counter: 6.25e+07 Hz by real time, expected 6250000"),
    ("RTCS", "RTC seconds: 1 Hz by real time, expected 0.1"),
])
def test_an_undilated_source_fails_by_real_time(source, failure):
    # An undilated source keeps real time: its interrupts come a period of
    # real time apart, its counter counts its nominal rate per real second.
    failures = check_hv.judge_hvm(guest_lines(10.0, undilated=source), 10.0)
    assert failure in failures, failures


def test_a_wrong_period_fails_by_guest_time():
    failures = check_hv.judge_hvm(guest_lines(1.0, wrong_period="RTC"), 1.0)
    assert "RTC 9.375 ms of guest time apart, expected 7.8125 ms" in failures


def test_missing_ticks_and_header_fail():
    lines = [x for x in guest_lines(1.0) if not x[1].startswith("HPET ")]
    assert check_hv.judge_hvm(lines, 1.0) == ["HPET: only 0 seen"]
    assert check_hv.judge_hvm([x for x in lines if "KHZ" not in x[1]], 1.0) == [
        "hvmguest gave no TSC frequency or HPET period: {'HPETFS': 16000000}"]


REFUSAL = ('selena-tdf: domain 7 cannot be dilated: an HVM guest with Hyper-V enlightenments '
           '(viridian), or an HVM or PVH guest reading the hardware TSC (give it '
           'tsc_mode="always_emulate"); xl dmesg names which\n')
DMESG = ("(XEN) d0v0 d17: not dilated: hardware TSC (tsc_mode=always_emulate)\n"
         "(XEN) d0v0 d7: not dilated: Hyper-V enlightenments (viridian)\n")


class FakeDom0:
    def __init__(self, *, refuse: bool):
        self.refuse = refuse
        self.calls: list[tuple[str, ...]] = []

    def try_sh(self, *argv: str) -> CommandResult:
        self.calls.append(argv)
        if argv[:2] == ("selena-tdf", "set") and self.refuse:
            return CommandResult(argv, 1, "", REFUSAL, 0.0)
        if argv[:2] == ("xl", "dmesg"):
            return CommandResult(argv, 0, DMESG, "", 0.0)
        return CommandResult(argv, 0, "", "", 0.0)

    def sh(self, *argv: str) -> str:
        self.calls.append(argv)
        return ""


@pytest.fixture
def dom0(monkeypatch):
    def make(*, refuse: bool) -> FakeDom0:
        fake = FakeDom0(refuse=refuse)
        monkeypatch.setattr(check_hv, "try_sh", fake.try_sh)
        monkeypatch.setattr(check_hv, "sh", fake.sh)
        return fake
    return make


def test_refusal_is_one_line_naming_the_errno_and_xens_reason(dom0):
    dom0(refuse=True)
    with pytest.raises(check_hv.CheckError) as exc:
        check_hv.set_tdf_or_refusal("7", 10.0)
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith("selena-tdf set 7 10 refused: EOPNOTSUPP (selena-tdf: domain 7 "
                              "cannot be dilated")
    assert message.endswith("; Xen: not dilated: Hyper-V enlightenments (viridian)")


def fake_launcher(tmp_path: Path, body: str) -> list[str]:
    """A stand-in for hvm-launch: prints `domid 7`, then runs `body`."""
    script = tmp_path / "launcher.py"
    script.write_text("import sys, time\nprint('domid 7', flush=True)\n" + textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_launched_guest_at_tdf1_sets_no_factor_and_is_destroyed(tmp_path, dom0):
    fake = dom0(refuse=True)                # a SET would fail: none is made
    argv = fake_launcher(tmp_path, """
        time.sleep(0.2)
        print('12.500000000 KHZ 2600000', flush=True)
        print('12.600000000 DONE', flush=True)
        time.sleep(30)
    """)
    guest = check_hv.LaunchedGuest(argv)
    lines = check_hv._run_own_guest(guest, 1.0, timeout=20)
    assert lines == [(12.5, "KHZ 2600000"), (12.6, "DONE")]
    assert ("xl", "unpause", "7") in fake.calls
    assert not any(c[:2] == ("selena-tdf", "set") for c in fake.calls)
    assert ("xl", "destroy", "7") in fake.calls
    assert guest.proc is not None and guest.proc.returncode is not None   # terminated


def test_launched_guest_refused_is_destroyed_without_unpausing(tmp_path, dom0):
    fake = dom0(refuse=True)
    guest = check_hv.LaunchedGuest(fake_launcher(tmp_path, "time.sleep(30)\n"))
    with pytest.raises(check_hv.CheckError, match="refused: EOPNOTSUPP"):
        check_hv._run_own_guest(guest, 10.0, timeout=20)
    assert ("xl", "unpause", "7") not in fake.calls
    assert ("xl", "destroy", "7") in fake.calls


def test_guest_ending_before_done_fails_with_its_last_lines(tmp_path, dom0):
    dom0(refuse=False)
    argv = fake_launcher(tmp_path, """
        print('1.000000000 PIT 0 5', flush=True)
        print('end crash', flush=True)
    """)
    with pytest.raises(check_hv.CheckError, match=r"guest 7: end crash before 'DONE':\nPIT 0 5"):
        check_hv._run_own_guest(check_hv.LaunchedGuest(argv), 10.0, timeout=20)


def test_launcher_failing_before_its_domid_reports_its_stderr(tmp_path, dom0):
    dom0(refuse=False)
    script = tmp_path / "broken.py"
    script.write_text("import sys\nsys.exit('hvm-launch: xc_domain_create failed: Operation "
                      "not permitted')\n")
    with pytest.raises(check_hv.CheckError, match="no domid: None: hvm-launch: xc_domain_create "
                                                   "failed: Operation not permitted"):
        check_hv._run_own_guest(check_hv.LaunchedGuest([sys.executable, str(script)]), 1.0)


def test_main_passes_the_tdf_to_the_hvm_check(monkeypatch, capsys):
    seen: list[tuple[float, float | None]] = []
    monkeypatch.setattr(check_hv, "check_hvm",
                        lambda tdf, change_to: seen.append((tdf, change_to)) or [])
    monkeypatch.setattr(check_hv.os, "geteuid", lambda: 0)
    monkeypatch.setattr(check_hv.Path, "exists", lambda self: True)
    assert check_hv.main(["hvm", "--tdf", "1"]) == 0
    assert check_hv.main(["hvm", "--change-to", "4"]) == 0
    assert seen == [(1.0, None), (check_hv.HVM_TDF, 4.0)]
    assert "all hypervisor checks passed" in capsys.readouterr().out



def changed_lines(old: float, new: float, pit_after: float) -> tuple[list[tuple[float, str]],
                                                                      float]:
    """guest_lines(new), but with the TDF `old` until PIT interrupt
    HVM_CHANGE_AT_TICK and the PIT's interrupts then `pit_after` apart per
    guest period: the lines and the real time of the change."""
    period = next(p for tag, _, p in check_hv.HVM_TIMERS if tag == "PIT") / 1e9
    lines = [x for x in guest_lines(new) if not x[1].startswith("PIT ")]
    real, guest, changed = 1.0, 0.0, 0.0
    for i in range(51):
        if i:
            real += period * (old if i <= check_hv.HVM_CHANGE_AT_TICK else pit_after)
            guest += period
        lines.append((real, f"PIT {i} {int(guest * KHZ * 1000)}"))
        if i == check_hv.HVM_CHANGE_AT_TICK:
            changed = real + 0.001
    return lines, changed


def test_a_change_during_the_pit_judges_each_side_at_its_tdf(capsys):
    lines, changed = changed_lines(10.0, 4.0, pit_after=4.0)
    assert check_hv.judge_hvm(lines, 4.0, (changed, 10.0)) == []
    out = capsys.readouterr().out
    assert "hvm: 25 PIT channel 0 interrupts (IRQ 0) before the change at TDF 10:" in out
    assert "hvm: 24 PIT channel 0 interrupts (IRQ 0) at TDF 4:" in out


def test_a_pit_left_at_the_old_tdf_after_a_change_fails(capsys):
    lines, changed = changed_lines(10.0, 4.0, pit_after=10.0)
    failures = check_hv.judge_hvm(lines, 4.0, (changed, 10.0))
    assert failures == ["PIT 100.0 ms of real time apart, expected 40.0006 ms"], failures


def executable_launcher(tmp_path: Path) -> Path:
    """A stand-in hvm-launch run by path: prints `domid 7`, records its
    arguments, then waits to be destroyed."""
    script = tmp_path / "hvm-launch"
    script.write_text(f"#!{sys.executable}\nimport sys, time\n"
                      f"open({str(tmp_path / 'argv')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                      "print('domid 7', flush=True)\ntime.sleep(30)\n")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("refuse", [True, False])
def test_a_guest_with_viridian_must_be_refused(tmp_path, dom0, refuse, capsys):
    fake = dom0(refuse=refuse)
    launcher = executable_launcher(tmp_path)
    failures = check_hv._viridian_refused(launcher, tmp_path / "hvmguest")
    assert (tmp_path / "argv").read_text() == f"--viridian {tmp_path / 'hvmguest'}"
    assert ("xl", "destroy", "7") in fake.calls and ("xl", "unpause", "7") not in fake.calls
    if refuse:
        assert failures == []
        assert "hvm: with viridian: selena-tdf set 7 10 refused: EOPNOTSUPP" in \
            capsys.readouterr().out
    else:
        assert failures == ["a guest with Hyper-V enlightenments (domain 7) was dilated to TDF 10"]
