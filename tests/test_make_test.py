"""scripts/make-test, make test's order of work, with stand-ins for the
lab build and pytest (shell scripts that log what they were asked to do):
the build runs beside the tests outside the lab and never into their output,
the lab tests only after it succeeded, and the exit status is the first
failure's."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "make-test"

# The build says it started, waits until the tests outside the lab have
# started (so the two overlap, or it fails), then ends with $BUILD_RC; the
# tests outside the lab wait for the build's start the same way. Then the
# build outlives them until make-test follows its log (its tail), so that
# the order of the lines on stdout does not depend on timing.
FAKE_SELENA = """#!/bin/sh
echo "build: $*"
touch "$DIR/build-started"
for i in $(seq 100); do [ -e "$DIR/outside-started" ] && break; sleep 0.05; done
[ -e "$DIR/outside-started" ] || { echo "build: never overlapped"; exit 99; }
# Still running when the tests outside the lab end: make-test follows the log.
for i in $(seq 200); do pgrep -P "$PPID" -x tail >/dev/null && break; sleep 0.05; done
echo "build: line of progress"
touch "$DIR/build-done"
exit "$BUILD_RC"
"""

FAKE_PYTEST = """#!/bin/sh
case "$*" in
  *"not lab and not scale"*)
    for i in $(seq 100); do [ -e "$DIR/build-started" ] && break; sleep 0.05; done
    [ -e "$DIR/build-started" ] && touch "$DIR/outside-started"
    echo "outside: $*" >> "$DIR/calls"; echo "outside tests ran"; exit "$OUTSIDE_RC";;
  *"lab and not scale"*)
    [ -e "$DIR/build-done" ] && echo "lab after build: $*" >> "$DIR/calls"; exit "$LAB_RC";;
esac
exit 98
"""


def make_test(tmp_path: Path, *, build: int = 0, outside: int = 0, lab: int = 0,
              prebuild: str = "true") -> tuple[subprocess.CompletedProcess[str], list[str]]:
    for name, text in (("selena", FAKE_SELENA), ("pytest", FAKE_PYTEST)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "DIR": str(tmp_path), "BUILD_RC": str(build),
           "OUTSIDE_RC": str(outside), "LAB_RC": str(lab), "PREBUILD": prebuild,
           "SELENA": str(tmp_path / "selena"), "PYTEST": str(tmp_path / "pytest"),
           "LAB_BUILD_LOG": str(tmp_path / "log" / "lab-build.log")}
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    calls = tmp_path / "calls"
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_build_overlaps_the_tests_outside_the_lab_and_the_lab_tests_follow(tmp_path):
    done, calls = make_test(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls == ["outside: -v --durations=30 -m not lab and not scale",
                     "lab after build: -v --durations=30 -m lab and not scale"]
    # The build's own lines are in its log, and on stdout only after the
    # tests outside the lab, never among their lines.
    log = (tmp_path / "log" / "lab-build.log").read_text()
    assert log.startswith("build: lab build\n")
    out = done.stdout
    assert out.index("outside tests ran") < out.index("build: line of progress"), out
    assert "selena lab build done in" in done.stdout


def test_a_failed_build_fails_with_its_log_and_runs_no_lab_test(tmp_path):
    done, calls = make_test(tmp_path, build=3)
    assert done.returncode == 3
    assert calls == ["outside: -v --durations=30 -m not lab and not scale"]
    assert "selena lab build failed (exit 3)" in done.stderr
    assert "build: line of progress" in done.stderr      # the log's tail is shown


def test_a_failure_outside_the_lab_still_runs_the_lab_tests_and_fails(tmp_path):
    done, calls = make_test(tmp_path, outside=1)
    assert done.returncode == 1
    assert len(calls) == 2 and calls[1].startswith("lab after build")
    assert "the tests outside the lab failed (pytest exit 1)" in done.stderr


def test_a_lab_failure_is_the_exit_status(tmp_path):
    done, calls = make_test(tmp_path, lab=1)
    assert done.returncode == 1 and len(calls) == 2


def test_a_failed_prebuild_stops_before_anything_else(tmp_path):
    done, calls = make_test(tmp_path, prebuild="false")
    assert done.returncode == 1 and calls == []
    assert not (tmp_path / "build-started").exists()
    assert "building the patched Xen, the agent or the guest tools failed" in done.stderr
