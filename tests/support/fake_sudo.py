"""selena as root through sudo, for the tests of what it hands to the user
who ran sudo (selena.ownership): the effective uid reads 0, SUDO_UID and
SUDO_GID are set, and os.chown records instead of changing anything (so the
tests neither need root nor change owners when run as root). What it
records is each file's inode: a bundle is handed over in its staging
directory, then renamed into place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

UID, GID = 4242, 4343


class FakeSudo:
    def __init__(self):
        self.owners: dict[tuple[int, int], tuple[int, int]] = {}
        self.followed: list[Path] = []

    def chown(self, path, uid, gid, *, follow_symlinks=True):
        if follow_symlinks:
            self.followed.append(Path(path))
        self.owners[_inode(Path(path))] = (uid, gid)

    def owner(self, path: Path) -> tuple[int, int] | None:
        """Who `path` was given to (None: not changed)."""
        return self.owners.get(_inode(path))

    def not_handed(self, top: Path) -> list[Path]:
        """Everything under `top` (itself included) not given to the user."""
        every = [top, *top.rglob("*")]
        return [p for p in every if self.owner(p) != (UID, GID)]


def _inode(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_dev, st.st_ino


def fake_sudo(monkeypatch: pytest.MonkeyPatch) -> FakeSudo:
    sudo = FakeSudo()
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "chown", sudo.chown)
    monkeypatch.setenv("SUDO_UID", str(UID))
    monkeypatch.setenv("SUDO_GID", str(GID))
    return sudo
