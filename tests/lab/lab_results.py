"""Where the lab tests put what their runs write: one temporary directory
per test session, never the tree's own results (build/results/, where
`make demo`, `make reproduce-*` and users' runs put theirs).

Dom0 sees only the project tree (shared over 9p at /selena-src, the cwd of
its commands), so the directory is inside the tree, under build/tmp/ (ignored
by git). The `lab` fixture (conftest.py) creates it before the first lab run
and removes it at the end of a session in which no test failed; otherwise it
is kept for inspection and its path printed."""

from __future__ import annotations

import os
import time

TMP = f"build/tmp/lab-tests-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def out(name: str) -> str:
    """A results directory for one test, relative to the tree (Dom0's cwd)."""
    return f"{TMP}/{name}"
