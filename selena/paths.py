"""Well-known locations: the source tree and the artefact cache."""

import os
from pathlib import Path


def project_root() -> Path:
    """The selena source tree (the directory holding pyproject.toml)."""
    return Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Where heavy build artefacts are cached, keyed by input hash.

    SELENA_CACHE overrides; the default survives fresh clones on one machine.
    """
    env = os.environ.get("SELENA_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "selena"
