"""check_hv's restore check against a model of the hypervisor (no lab): it
passes on the fixed restore path and fails on the ones issue 31 describes
(a running domain's clock moved back and frozen; a restored clock started
by a side effect of the toolstack's unpause instead of the explicit thaw;
a thaw that does not start it; a dilation taken without its wall clock)."""

from dataclasses import dataclass

import pytest

from selena.lab import check_hv, dom0

NOW0 = 10**12


@dataclass
class Dom:
    milli: int = 1000
    real0: int = NOW0
    virt0: int = NOW0
    frozen: bool = False
    started: bool = False


class FakeXen:
    """Just enough of Dom0's view: xl, selena-tdf status/thaw and tdf-restore."""

    def __init__(self, *, refuse_running: bool = True, start_on_unpause: bool = False,
                 thaw_starts: bool = True, partial_taken: bool = False):
        self.refuse_running = refuse_running
        self.partial_taken = partial_taken
        self.start_on_unpause = start_on_unpause
        self.thaw_starts = thaw_starts
        self.now = NOW0
        self.doms = {"0": Dom(started=True)}
        self.names: dict[str, str] = {}

    def virt(self, d: Dom) -> int:
        return d.virt0 if d.frozen else d.virt0 + (self.now - d.real0) * 1000 // d.milli

    def create_paused(self, name: str, config: str, tdf: float) -> str:
        domid = str(len(self.doms))
        d = self.doms[domid] = Dom()
        d.virt0, d.real0, d.milli = self.virt(d), self.now, int(tdf * 1000)
        self.names[name] = domid
        return domid

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)

    def _thaw(self, d: Dom) -> None:
        if d.frozen:
            d.real0, d.frozen = self.now, False

    def sh(self, *argv: str) -> str:
        self.now += 1_000_000          # every command takes a millisecond
        if argv[:2] == ("xl", "unpause"):
            d = self.doms[self.names[argv[2]]]
            if self.start_on_unpause:
                self._thaw(d)
            d.started = True
            return ""
        if argv[:2] == ("selena-tdf", "thaw"):
            if self.thaw_starts:
                self._thaw(self.doms[argv[2]])
            return f"thawed 1 domain(s) at virtual 0 ns (Xen time {self.now} ns)\n"
        if argv[:2] == ("selena-tdf", "status"):
            d = self.doms[argv[2]]
            return (f"tdf {d.milli / 1000:g}\nfrozen {'yes' if d.frozen else 'no'}\n"
                    f"virtual_ns {self.virt(d)}\nreal_ns {self.now}\n")
        if argv[0].endswith("tdf-restore"):
            domid, milli, virt = argv[1], int(argv[2]), int(argv[3])
            d = self.doms[domid]
            if len(argv) == 4 and not self.partial_taken:
                return "errno 22 EINVAL\n"
            if domid == "0":
                return "errno 1 EPERM\n"
            if d.started and self.refuse_running:
                return "errno 16 EBUSY\n"
            d.milli, d.virt0, d.real0, d.frozen = milli, virt, self.now, True
            return "ok\n"
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def run_check(monkeypatch, tmp_path):
    tool = tmp_path / "tdf-restore"
    tool.write_text("")

    def run(xen: FakeXen) -> list[str]:
        monkeypatch.setattr(check_hv, "TDF_RESTORE", tool)
        monkeypatch.setattr(check_hv, "sh", xen.sh)
        monkeypatch.setattr(dom0, "sh", xen.sh)      # status()
        monkeypatch.setattr(check_hv, "try_sh", lambda *argv: None)
        monkeypatch.setattr(check_hv, "create_paused", xen.create_paused)
        monkeypatch.setattr(check_hv, "tiny_guest_config", lambda name, extra: "")
        monkeypatch.setattr(check_hv.time, "sleep", xen.sleep)
        return check_hv.check_restore()
    return run


def test_fixed_restore_path_passes(run_check, capsys):
    assert run_check(FakeXen()) == []
    out = capsys.readouterr().out
    assert ("restore: never-run domain, factor and virtual time only -> errno 22 EINVAL; "
            "tdf 5, frozen no") in out
    assert "restore: never-run domain -> ok; tdf 2, frozen yes, virtual_ns 7000000000" in out
    assert "restore: after xl unpause frozen yes, virtual_ns 7000000000" in out
    assert "restore: running domain -> errno 16 EBUSY" in out


def test_running_domain_moved_back_and_frozen_fails(run_check):
    failures = run_check(FakeXen(refuse_running=False))
    assert any("running domain: restore -> 'ok'" in f for f in failures), failures
    assert any("virtual time advanced 0 ns" in f for f in failures), failures
    assert any("became 1/yes" in f for f in failures), failures


def test_a_dilation_restored_without_its_wall_clock_fails(run_check):
    failures = run_check(FakeXen(partial_taken=True))
    assert any("a partial restore -> ok" in f for f in failures), failures


def test_restored_clock_started_by_the_toolstacks_unpause_fails(run_check):
    failures = run_check(FakeXen(start_on_unpause=True))
    assert any("xl unpause started its clock" in f for f in failures), failures


def test_restored_clock_not_started_by_the_thaw_fails(run_check):
    failures = run_check(FakeXen(thaw_starts=False))
    assert any("running domain: virtual time advanced 0 ns" in f for f in failures), failures


def test_missing_helper_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(check_hv, "TDF_RESTORE", tmp_path / "tdf-restore")
    assert check_hv.check_restore() == [
        f"{tmp_path / 'tdf-restore'} is missing: run make -C xen-patches tdfrestore on the host"]
