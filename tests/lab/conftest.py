"""One lab boot shared by the end-to-end tests (a LabSession): each test's
command is a job in the same Dom0, which removes whatever a job left behind
before the next. A test that breaks the session (a time-out, a crashed Dom0)
fails alone; the next test gets a fresh boot."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from selena.lab.qemu import Lab, LabResult, LabSession


class SharedLab:
    def __init__(self) -> None:
        self.lab = Lab()
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
        return self.session.run(command, tdf=tdf, timeout=timeout, on_output=on_output)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


@pytest.fixture(scope="session")
def lab():
    shared = SharedLab()
    yield shared
    shared.close()
