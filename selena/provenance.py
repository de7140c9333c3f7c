"""Where a run's software and scenario came from, for results bundles."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Any

from selena.paths import project_root

PATCH_HASH_FILE = Path("/usr/share/selena/xen-patches.sha256")
_COMMIT = re.compile(r"[0-9a-f]{40}")


def patch_series_hash() -> str:
    """sha256 over the series file and every patch it lists, in order.

    From the source tree when there is one; in an installed Dom0 image, from
    the file the image builder wrote."""
    patches = project_root() / "xen-patches"
    series = patches / "series"
    if series.exists():
        digest = hashlib.sha256(series.read_bytes())
        for name in series.read_text().split():
            digest.update((patches / name).read_bytes())
        return digest.hexdigest()
    if PATCH_HASH_FILE.exists():
        return PATCH_HASH_FILE.read_text().strip()
    return "unknown"


def run_provenance(source: str) -> dict[str, Any]:
    """What a bundle's meta.json keeps of where its run came from: the
    scenario (`source`: its file, the --topo spec or the topology's name;
    a file's sha256), the Python script that ran it when that is not the
    scenario file (`python3 my_experiment.py`), the command line, the
    working directory, and selena's own code: the sha256 of its Python
    files, which names the code whether or not it is a checkout, and the
    checkout's commit (uncommitted changes show in the former only)."""
    entry: dict[str, Any] = {"source": source}
    scenario = _file_sha256(Path(source)) if source.endswith(".py") else None
    if scenario is not None:
        entry["source_sha256"] = scenario
    script = sys.argv[0] if sys.argv else ""
    package = Path(__file__).resolve().parent
    if script.endswith(".py") and Path(script).resolve() != Path(source).resolve() \
            and package not in Path(script).resolve().parents:     # not `python3 -m selena`
        digest = _file_sha256(Path(script))
        if digest is not None:
            entry["script"], entry["script_sha256"] = script, digest
    entry["argv"] = list(sys.argv)
    try:
        entry["cwd"] = os.getcwd()
    except OSError:
        entry["cwd"] = None           # removed under us; nothing else depends on it
    entry["selena_source_sha256"] = selena_source_sha256()
    entry["selena_commit"] = git_commit(project_root())
    return entry


@functools.cache
def selena_source_sha256() -> str:
    """sha256 over selena's Python files (each one's path in the package,
    then its bytes), in path order. Once per process: the code that runs
    is the code that was imported."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def git_commit(root: Path) -> str | None:
    """The commit checked out at `root`, read from its .git (no git needed,
    a worktree's too), or None: not a checkout, or one it cannot read."""
    try:
        dot_git = root / ".git"
        if dot_git.is_file():       # a worktree's: "gitdir: <its directory>"
            pointer = dot_git.read_text().strip()
            if not pointer.startswith("gitdir: "):
                return None
            git_dir = (root / pointer.removeprefix("gitdir: ")).resolve()
        elif dot_git.is_dir():
            git_dir = dot_git
        else:
            return None
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head if _COMMIT.fullmatch(head) else None
        ref = head.removeprefix("ref: ")
        common = git_dir
        if (git_dir / "commondir").is_file():
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        for base in (git_dir, common):
            if (base / ref).is_file():
                value = (base / ref).read_text().strip()
                return value if _COMMIT.fullmatch(value) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                value, _, name = line.partition(" ")
                if name == ref and _COMMIT.fullmatch(value):
                    return value
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
