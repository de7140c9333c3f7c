"""The one call behind every statistical assertion of the lab tests: record
the measured value, then assert its bound.

The lab tier runs once per session, so a threshold's distribution can only
be collected run by run: each check appends one JSON line to a file outside
the tree that survives fresh clones (default ~/.cache/selena/lab-stats.jsonl,
beside the lab cache; SELENA_LAB_STATS names another file), and it does so
BEFORE asserting, so that failing runs are in the data too.
`scripts/lab-thresholds` reads the file (docs/contributing.md)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from selena.paths import cache_dir, project_root

ENV = "SELENA_LAB_STATS"

# The lab boot the values were measured in (set by tests/lab/conftest.py when
# it boots one): values of one boot share its Dom0's state.
_boot: dict[str, str | None] = {"id": None}


def stats_path() -> Path:
    env = os.environ.get(ENV)
    return Path(env) if env else cache_dir() / "lab-stats.jsonl"


def set_boot_id(boot_id: str | None) -> None:
    _boot["id"] = boot_id


@lru_cache(maxsize=1)
def git_revision() -> str | None:
    """HEAD of the tree under test, "+dirty" when it has uncommitted changes
    (a threshold measured on a changed tree is not the commit's)."""
    root = project_root()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def _node_id() -> str | None:
    # pytest sets it to "<nodeid> (<phase>)" while a test runs.
    current = os.environ.get("PYTEST_CURRENT_TEST")
    return current.rsplit(" (", 1)[0] if current else None


def _margin(value: float, low: float | None, high: float | None) -> float:
    """How far inside its bounds a value is (negative: outside)."""
    sides = [value - low if low is not None else math.inf,
             high - value if high is not None else math.inf]
    return min(sides)


def _inside(value: float, bounds: Mapping[str, float | None]) -> bool:
    low, above = bounds["low"], bounds["above"]
    high, below = bounds["high"], bounds["below"]
    return not (math.isnan(value)
                or (low is not None and value < low)
                or (above is not None and value <= above)
                or (high is not None and value > high)
                or (below is not None and value >= below))


def describe(bounds: Mapping[str, float | None]) -> str:
    parts = []
    if bounds["low"] is not None:
        parts.append(f">= {bounds['low']:g}")
    if bounds["above"] is not None:
        parts.append(f"> {bounds['above']:g}")
    if bounds["high"] is not None:
        parts.append(f"<= {bounds['high']:g}")
    if bounds["below"] is not None:
        parts.append(f"< {bounds['below']:g}")
    return " and ".join(parts)


def record(entry: Mapping[str, Any], path: Path | None = None) -> None:
    """Append one JSON line (the directory created). One write call per line,
    in append mode, so that lines of concurrent writers do not interleave."""
    path = path or stats_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        # A line cut by a killed run has no newline: start on a line of our own.
        cut = False
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            cut = f.read(1) != b"\n"
        f.write((("\n" if cut else "") + json.dumps(dict(entry), sort_keys=True)
                 + "\n").encode())


def check(name: str, value: float | Iterable[float], low: float | None = None,
          high: float | None = None, *, above: float | None = None,
          below: float | None = None, unit: str = "", trials: int | None = None,
          samples: Iterable[float] | None = None, context: object = None) -> None:
    """Record `value`, then assert it within its bounds: `low` and `high`
    inclusive, `above` and `below` exclusive (as the assertion it replaces).

    `value` may be several values that must all hold (each interval of a
    capture, say): all are recorded, the one nearest its bound (or farthest
    out) is the line's `value`. `trials`: the value is a count of events out
    of that many (slow flows of all flows), for the binomial view of
    scripts/lab-thresholds. `samples`: the raw measurements a value is a
    statistic of (the pings a median is of), recorded too. `context` is
    added to the failure's message only (a metrics dict, say)."""
    if low is not None and above is not None or high is not None and below is not None:
        raise ValueError(f"{name}: give low or above, high or below, not both")
    values = ([float(value)] if isinstance(value, int | float)
              else [float(v) for v in value])
    if not values:
        raise ValueError(f"{name}: no value to check")
    bounds = {"low": low, "above": above, "high": high, "below": below}
    lo = low if low is not None else above
    hi = high if high is not None else below
    worst = min(values, key=lambda v: (not math.isnan(v), _margin(v, lo, hi)))
    ok = all(_inside(v, bounds) for v in values)
    entry: dict[str, Any] = {
        "name": name, "value": worst, "unit": unit,
        "bounds": {k: v for k, v in bounds.items() if v is not None},
        "passed": ok, "test": _node_id(), "revision": git_revision(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "boot": _boot["id"],
    }
    if len(values) > 1:
        entry["values"] = values
    if trials is not None:
        entry["trials"] = trials
    if samples is not None:
        entry["samples"] = [float(s) for s in samples]
    record(entry)
    if not ok:
        shown = f"{worst:g}{unit}" if len(values) == 1 else \
            f"{worst:g}{unit} (worst of {len(values)}: {values})"
        message = f"{name} = {shown}, want {describe(bounds)}"
        if trials is not None:
            message += f" (a count out of {trials})"
        raise AssertionError(message if context is None else f"{message}: {context}")
