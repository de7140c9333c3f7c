"""Results belong to the researcher who asked for them.

selena runs as root on a Dom0 (xl and the bridges need it), most often as
`sudo selena run ...` from the researcher's own clone. What it writes there
for them (bundles, sweeps and their reports) is handed to the user who ran
sudo (SUDO_UID, SUDO_GID), with the directories selena created to hold it:
root-owned, they could not move, remove or add to their own results. Files
selena keeps for itself (state, caches, the host's calibration) stay root's.
Bundles are made readable as the umask says (unique_dir).
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger(__name__)


def invoking_user() -> tuple[int, int] | None:
    """(uid, gid) of the user who ran selena through sudo, or None: not
    root, not through sudo, or sudo by root itself."""
    if os.geteuid() != 0:
        return None
    try:
        uid, gid = int(os.environ["SUDO_UID"]), int(os.environ["SUDO_GID"])
    except (KeyError, ValueError):
        return None
    return None if uid == 0 else (uid, gid)


def missing_dirs(path: Path) -> list[Path]:
    """`path` and those of its ancestors that do not exist yet, outermost
    first: what creating `path` with parents=True will create."""
    missing = []
    for p in [path.absolute(), *path.absolute().parents]:
        if p.exists() or p.is_symlink():
            break
        missing.append(p)
    return missing[::-1]


def hand_over(*paths: Path) -> None:
    """Give each path (a directory with everything in it) to the user who
    ran sudo; nothing when there is none. Symbolic links are changed, never
    followed. One that cannot be changed is said, naming it and the fix; the
    results themselves are whole either way."""
    user = invoking_user()
    if user is None:
        return
    for path in paths:
        try:
            _chown_tree(path, *user)
        except OSError as exc:
            log.warning("%s stays owned by root (%s); `sudo chown -R %d:%d %s` gives it "
                        "to you", path, exc.strerror or exc, user[0], user[1], path)


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    os.chown(path, uid, gid, follow_symlinks=False)
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


def unique_dir(parent: Path, prefix: str) -> Path:
    """A new directory `<parent>/<prefix><random>`, created with the
    permissions the umask gives (tempfile.mkdtemp's are 0700: a bundle
    renamed from one could be read by no one but its owner)."""
    while True:
        path = parent / f"{prefix}{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
