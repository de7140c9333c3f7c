"""The agent builds static, its parser tests pass under ASan/UBSan, and
short libFuzzer runs over the parsers and over the Xenstore framing find
nothing."""

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[2]
AGENT_DIR = ROOT / "guest-agent"


def test_agent_is_a_static_binary_with_no_runtime_dependencies():
    subprocess.run(["make", "-s", "-C", str(AGENT_DIR)], check=True)
    binary = AGENT_DIR / "build" / "selena-agent"
    described = subprocess.run(["file", "-b", str(binary)], capture_output=True,
                               text=True).stdout
    assert "statically linked" in described, described
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    assert "not a dynamic executable" in (ldd.stdout + ldd.stderr)


def test_parser_unit_tests_and_short_fuzz_runs_pass():
    done = subprocess.run(["make", "-s", "-C", str(AGENT_DIR), "check", "FUZZ_SECONDS=8"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test_spec: all checks passed" in done.stdout
    # libFuzzer's summary, once per target (spec parser, Xenstore framing).
    assert done.stderr.count("\nDone ") == 2 and "ERROR" not in done.stderr, \
        done.stderr[-2000:]
