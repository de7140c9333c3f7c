"""scripts/make-test, make test's order of work, with stand-ins for the
lab build, lint and pytest (shell scripts that log what they were asked to
do): the build runs beside lint and the tests outside the lab and never into
their output, the tests that need it only after it succeeded, and the exit
status is the first failure's."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make-test"

# The build says it started, waits until the tests outside the lab have
# started (so the two overlap, or it fails), then ends with $BUILD_RC; the
# tests outside the lab wait for the build's start the same way. Then the
# build outlives them until make-test follows its log (its tail), so that
# the order of the lines on stdout does not depend on timing.
FAKE_SELENA = """#!/bin/sh
echo $$ > "$DIR/build-pid"
echo "build: $*"
touch "$DIR/build-started"
for i in $(seq 100); do [ -e "$DIR/outside-started" ] && break; sleep 0.05; done
[ -e "$DIR/outside-started" ] || { echo "build: never overlapped"; exit 99; }
for i in $(seq 200); do pgrep -P "$PPID" -x tail >/dev/null && break; sleep 0.05; done
echo "build: line of progress"
touch "$DIR/build-done"
exit "$BUILD_RC"
"""

FAKE_PYTEST = """#!/bin/sh
# A failing run writes a JUnit report naming one failed test (its message
# spans lines, as pytest's do), as pytest --junitxml does.
for a in "$@"; do case $a in --junitxml=*) report=${a#--junitxml=};; esac; done
fail() {
    [ -n "$report" ] && cat > "$report" <<XML
<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.$1" name="test_ok"/>
<testcase classname="tests.$1" name="test_broken"><failure message="AssertionError: $1 went
wrong &amp; here">traceback</failure></testcase></testsuite></testsuites>
XML
    exit "$2"
}
case "$*" in
  *"not long --ignore tests/xen_patches/test_deb.py --deselect "*"::test_calibration_"*)
    for i in $(seq 100); do [ -e "$DIR/build-started" ] && break; sleep 0.05; done
    [ -e "$DIR/build-started" ] && touch "$DIR/outside-started"
    echo "outside" >> "$DIR/calls"; echo "outside tests ran"
    [ "$OUTSIDE_RC" = 0 ] || fail outside "$OUTSIDE_RC"; exit 0;;
  *"not lab and not scale and not long tests/xen_patches/test_deb.py "*"::test_calibration_"*)
    [ -e "$DIR/build-done" ] && echo "deb after build" >> "$DIR/calls"
    [ "$DEB_RC" = 0 ] || fail deb "$DEB_RC"; exit 0;;
  *"-m lab and not scale and not long")
    [ -e "$DIR/build-done" ] && echo "lab after build" >> "$DIR/calls"
    [ "$LAB_RC" = 0 ] || fail lab "$LAB_RC"; exit 0;;
esac
echo "unexpected: $*" >> "$DIR/calls"
exit 98
"""


def make_test(tmp_path: Path, *, build: int = 0, outside: int = 0, deb: int = 0, lab: int = 0,
              lint: str = "true", prebuild: str = "true",
              ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    for name, text in (("selena", FAKE_SELENA), ("pytest", FAKE_PYTEST)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "DIR": str(tmp_path), "BUILD_RC": str(build),
           "OUTSIDE_RC": str(outside), "DEB_RC": str(deb), "LAB_RC": str(lab),
           "PREBUILD": prebuild, "LINT": lint,
           "SELENA": str(tmp_path / "selena"), "PYTEST": str(tmp_path / "pytest"),
           "LAB_BUILD_LOG": str(tmp_path / "log" / "lab-build.log"),
           "TEST_REPORTS": str(tmp_path / "reports")}
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    calls = tmp_path / "calls"
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_build_overlaps_the_tests_outside_the_lab_and_the_rest_follow_it(tmp_path):
    done, calls = make_test(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls == ["outside", "deb after build", "lab after build"]
    # The build's own lines are in its log, and on stdout only after the
    # tests outside the lab, never among their lines.
    log = (tmp_path / "log" / "lab-build.log").read_text()
    assert log.startswith("build: lab build\n")
    out = done.stdout
    assert out.index("outside tests ran") < out.index("build: line of progress"), out
    assert "selena lab build done in" in out


def test_a_failed_build_fails_with_its_log_and_runs_nothing_that_needs_it(tmp_path):
    done, calls = make_test(tmp_path, build=3)
    assert done.returncode == 3
    assert calls == ["outside"]
    assert "selena lab build failed (exit 3)" in done.stderr
    assert "build: line of progress" in done.stderr      # the log's tail is shown


@pytest.mark.parametrize("failed", ["outside", "deb"])
def test_a_failure_outside_the_lab_still_runs_the_lab_tests_and_fails(tmp_path, failed):
    done, calls = make_test(tmp_path, **{failed: 1})
    assert done.returncode == 1
    assert calls == ["outside", "deb after build", "lab after build"]
    assert "tests outside the lab failed (pytest exit 1)" in done.stderr


def test_a_lab_failure_is_the_exit_status(tmp_path):
    done, calls = make_test(tmp_path, lab=2)
    assert done.returncode == 2 and len(calls) == 3


def test_the_last_lines_name_every_failed_test_with_its_message(tmp_path):
    """A log's tail is what a reader of a long run sees: it names each failure."""
    done, _ = make_test(tmp_path, outside=1, lab=2)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-3:] == [
        "make test: FAILURE tests.outside::test_broken: AssertionError: outside went wrong & here",
        "make test: FAILURE tests.lab::test_broken: AssertionError: lab went wrong & here",
        "make test: tests outside the lab failed (pytest exit 1)"]
    # A later run starts from no reports: a passing one recaps nothing.
    done, _ = make_test(tmp_path)
    assert done.returncode == 0 and "FAILURE" not in done.stderr


def test_a_failed_lint_stops_the_build_and_runs_no_test(tmp_path):
    # Lint fails once the build is under way.
    lint = (f"for i in $(seq 100); do [ -e {tmp_path}/build-pid ] && break; sleep 0.05; done; "
            "exit 4")
    done, calls = make_test(tmp_path, lint=lint)
    assert done.returncode == 4 and calls == []
    assert "lint failed; the lab build is stopped" in done.stderr
    pid = int((tmp_path / "build-pid").read_text())
    deadline = time.monotonic() + 2      # the stand-in alone would run 5 s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert not (tmp_path / "build-done").exists()


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped has stopped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_failed_prebuild_stops_before_anything_else(tmp_path):
    done, calls = make_test(tmp_path, prebuild="false")
    assert done.returncode == 1 and calls == []
    assert not (tmp_path / "build-started").exists()
    assert "building the agent or the guest tools failed" in done.stderr
    assert not os.path.exists(tmp_path / "log")
