"""Where a run's software came from, for results bundles."""

from __future__ import annotations

import hashlib
from pathlib import Path

from selena.paths import project_root

PATCH_HASH_FILE = Path("/usr/share/selena/xen-patches.sha256")


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
