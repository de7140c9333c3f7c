"""check_hv's freeze check of a TDF 1 guest against a model of the guest's
view (no lab): it passes when neither the clock nor the TSC counts the
frozen interval, and fails when the TSC does (a TDF 1 domain left on the raw
TSC across a freeze, issue 31 item 3) or the clock does."""

import pytest

from selena.lab import check_hv
from selena.lab import dom0 as dom0_module

MHZ = 2000.0


class FakeDom0:
    def __init__(self, *, tsc_counts_freeze: bool = False, clock_counts_freeze: bool = False):
        self.tsc_counts = tsc_counts_freeze
        self.clock_counts = clock_counts_freeze
        self.frozen = False
        self.virt = 5_000_000_000
        self.calls: list[tuple[str, ...]] = []

    def sh(self, *argv: str) -> str:
        self.calls.append(argv)
        if argv[:2] == ("xl", "info"):
            return f"nr_cpus : 2\ncpu_mhz : {MHZ:g}\n"
        if argv[:2] == ("selena-tdf", "freeze"):
            self.frozen = True
            return "froze 1 domain(s) at virtual 5000000000 ns (Xen time 9 ns)\n"
        if argv[:2] == ("selena-tdf", "thaw"):
            self.frozen = False
            return "thawed 1 domain(s) at virtual 5000000000 ns (Xen time 9 ns)\n"
        if argv[:2] == ("selena-tdf", "status"):
            return (f"tdf 1\nfrozen {'yes' if self.frozen else 'no'}\n"
                    f"virtual_ns {self.virt}\nreal_ns 1\n")
        if argv[:2] == ("xl", "unpause"):
            return ""
        raise AssertionError(f"unexpected command {argv}")

    def gap_line(self) -> str:
        """The guest's GAP: most steps tiny; the one across the 3 s freeze
        counts it in the clock and/or the TSC when the hypervisor lets it."""
        clock = 3_000_000_000 if self.clock_counts else 40_000
        ticks = int((3.0 if self.tsc_counts else 40e-6) * MHZ * 1e6)
        return f"GAP {clock} 400000 {clock} {ticks}"


@pytest.fixture
def run_freeze1(monkeypatch):
    def run(dom0: FakeDom0) -> list[str]:
        class Console:
            def __init__(self, name: str):
                pass

            def wait_for(self, pattern: str, timeout: float) -> list[tuple[float, str]]:
                return [(0.0, "GAPSTART" if "GAPSTART" in pattern else dom0.gap_line())]

        monkeypatch.setattr(check_hv, "sh", dom0.sh)
        monkeypatch.setattr(dom0_module, "sh", dom0.sh)      # status()
        monkeypatch.setattr(check_hv, "try_sh", lambda *argv: None)
        monkeypatch.setattr(check_hv, "create_paused", lambda name, cfg, tdf: "7")
        monkeypatch.setattr(check_hv, "tiny_guest_config", lambda name, extra: "")
        monkeypatch.setattr(check_hv, "Console", Console)
        monkeypatch.setattr(check_hv.time, "sleep", lambda s: None)
        return check_hv.check_freeze_tdf1()
    return run


def test_nothing_counts_the_frozen_interval_passes(run_freeze1, capsys):
    assert run_freeze1(FakeDom0()) == []
    out = capsys.readouterr().out
    assert "freeze1 selena-freeze-tdf1: tdf 1, virtual time advanced 0 ns while frozen 3 s" in out


def test_raw_tsc_counting_the_frozen_interval_fails(run_freeze1):
    failures = run_freeze1(FakeDom0(tsc_counts_freeze=True))
    assert failures == ["TDF 1 guest: TSC stepped 3.000 s: RDTSC counted the frozen interval"]


def test_clock_counting_the_frozen_interval_fails(run_freeze1):
    failures = run_freeze1(FakeDom0(clock_counts_freeze=True))
    assert failures == ["TDF 1 guest: clock stepped 3.000 s: it counted the frozen interval"]
