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
from typing import Any

from selena.paths import project_root

TMP = f"build/tmp/lab-tests-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def out(name: str) -> str:
    """A results directory for one test, relative to the tree (Dom0's cwd)."""
    return f"{TMP}/{name}"


def run_scenario_text(lab: Any, name: str, text: str, options: str = "",
                      timeout: float = 600, env: str = "") -> Any:
    """Write `text` as the scenario file <name>.py in the tree (Dom0 sees only
    the tree), `selena run` it with `options` (and `env`, NAME=VALUE words
    before the command) and its results in <name>, then count the selena
    domains left: its output ends with `run-status=N` and
    `<count>\\nleftovers-counted`."""
    path = project_root() / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return lab.run(f"rm -rf {name}; {env} selena run {name}.py {options} --out {name}; "
                   "echo run-status=$?; xl list | grep -c selena- ; echo leftovers-counted",
                   timeout=timeout)
