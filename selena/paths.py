"""Well-known locations: the source tree and the artefact cache."""

import os
from pathlib import Path

# Where xenconsoled keeps guests' console logs (`--log=guest`; Debian's
# default log directory): the xl backend reads a lost guest's there, the
# host doctor checks that xenconsoled writes them there.
CONSOLE_LOG_DIR = "/var/log/xen/console"


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


def switch_profiles_dir() -> Path:
    """The switch-model profiles: the source tree's, or those installed in a
    lab Dom0 (/usr/share/selena/switch-model/profiles)."""
    tree = project_root() / "switch-model" / "profiles"
    return tree if tree.is_dir() else Path("/usr/share/selena/switch-model/profiles")


def switch_profiles() -> set[str] | None:
    """Names of the available switch-model profiles (None: none installed)."""
    directory = switch_profiles_dir()
    if not directory.is_dir():
        return None
    return {p.stem for p in directory.glob("*.yaml")}
