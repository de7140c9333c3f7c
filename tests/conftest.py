"""Fixtures shared by the host tests: the real agent binary and a fake
xenstored (tests/support), and a fake Xen Dom0 built on both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fake_xen import FakeXen
from fake_xenstored import FakeXenstored

from selena.control.xenstore import XenstoreConnection

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "guest-agent" / "build" / "selena-agent"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the real agent (`agent_binary`, directly or through
    `fake_xen`) builds it with the C toolchain: it belongs to the `toolchain`
    tier, not to `make check` (docs/contributing.md)."""
    for item in items:
        if "agent_binary" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.toolchain)


@pytest.fixture(scope="session")
def agent_binary() -> Path:
    subprocess.run(["make", "-s", "-C", str(ROOT / "guest-agent")], check=True)
    return AGENT


@pytest.fixture
def xenstored(tmp_path):
    xs = FakeXenstored(str(tmp_path))
    yield xs
    xs.close()


@pytest.fixture
def fake_xen(xenstored, agent_binary):
    """xl, Xenstore and real agents on this host (tests/support/fake_xen.py)."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xen = FakeXen(store=xenstored, dom0=dom0)
    yield xen
    xen.shutdown()
    dom0.close()
