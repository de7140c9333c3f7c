"""One lab boot shared by the end-to-end tests (a LabSession): each test's
command is a job in the same Dom0, which removes whatever a job left behind
before the next. A test that breaks the session (a time-out, a crashed Dom0)
fails alone; the next test gets a fresh boot."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence

import lab_results
import lab_stats
import pytest

from selena.lab.images import scenario_variants
from selena.lab.qemu import Lab, LabResult, LabSession
from selena.paths import project_root

# Scenarios whose Debian package variants the lab tests need built.
VARIANT_SCENARIOS = ("scenarios/debian_memcached.py",)


class SharedLab:
    def __init__(self) -> None:
        self.lab = Lab(variants=scenario_variants(project_root() / s
                                                  for s in VARIANT_SCENARIOS))
        self.share = self.lab.share
        self.session: LabSession | None = None

    def run(self, command: Sequence[str] | str, *, tdf: float | None = None,
            timeout: float = 1800.0,
            on_output: Callable[[str], None] | None = None) -> LabResult:
        if self.session is None or self.session.broken:
            self.close()
            session = self.lab.session()
            session.__enter__()
            self.session = session
            lab_stats.set_boot_id(session.run_id)     # the values measured in this boot
        return self.session.run(command, tdf=tdf, timeout=timeout, on_output=on_output)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that boot a lab of their own run before the shared boot exists:
    it holds the lab lock for the whole session (one lab at a time)."""
    own = [item for item in items if item.get_closest_marker("own_lab")]
    if not own:
        return
    rest = [item for item in items if item not in own]
    first = next((i for i, item in enumerate(rest)
                  if "lab" in getattr(item, "fixturenames", ())), len(rest))
    items[:] = rest[:first] + own + rest[first:]


@pytest.fixture
def own_lab(lab: SharedLab) -> None:
    """For a test that boots its own lab: the shared one is powered off first
    (the next shared test boots it again)."""
    lab.close()


@pytest.fixture(scope="session")
def lab(request: pytest.FixtureRequest):
    """The shared lab, and the session's temporary results directory
    (lab_results.py): removed at the end unless a test failed."""
    results = project_root() / lab_results.TMP
    results.mkdir(parents=True, exist_ok=True)
    shared = SharedLab()
    yield shared
    shared.close()
    if request.session.testsfailed:
        print(f"\nlab tests' results kept in {results}")
    else:
        shutil.rmtree(results, ignore_errors=True)
