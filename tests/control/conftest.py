"""Fixtures: a fake xenstored (tests only) and the real agent binary on the host."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fake_xenstored import FakeXenstored

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "guest-agent" / "build" / "selena-agent"


@pytest.fixture(scope="session")
def agent_binary() -> Path:
    subprocess.run(["make", "-s", "-C", str(ROOT / "guest-agent")], check=True)
    return AGENT


@pytest.fixture
def xenstored(tmp_path):
    xs = FakeXenstored(str(tmp_path))
    yield xs
    xs.close()
