"""Guest templates: what a template.yaml says, and how a Debian package
variant of a disk-image template is named.

The builder (on a machine with Debian's mirror) and the planner (in Dom0)
both name a variant from the base image's file name and the sorted package
list, so the planner finds the image the builder made, or says which one is
missing, before any guest is created.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from selena.errors import TemplateError

# Debian policy 5.6.1: lower case letters, digits, '+', '-', '.'; at least two
# characters, starting with a letter or digit.
PACKAGE_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+\Z")
# Without a template.yaml (old installs, unit tests), a template is a kernel
# and an initramfs with the tiny templates' command line.
DEFAULT_CMDLINE = "console=hvc0 clocksource=xen tsc=unstable quiet"


@dataclass(frozen=True)
class TemplateSpec:
    name: str
    kernel: Path
    ramdisk: Path
    cmdline: str = DEFAULT_CMDLINE
    memory_mb: int | None = None
    # A disk image shared read-only by every guest of the template (xvda).
    disk: Path | None = None
    # A derived template: the template it extends, and its extra packages.
    base: str | None = None
    packages: tuple[str, ...] = ()

    @property
    def takes_packages(self) -> bool:
        """Only disk-image (Debian) templates can have packages added."""
        return self.disk is not None


def bad_packages(packages: Iterable[object]) -> list[str]:
    """The entries of a package list that cannot be Debian package names."""
    return [repr(p) for p in packages if not isinstance(p, str) or not PACKAGE_RE.match(p)]


def normalise_packages(packages: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(packages)))


def variant_disk(base_disk: Path, packages: Iterable[str]) -> Path:
    """The image of `base_disk` with `packages` installed, beside it."""
    listed = " ".join(normalise_packages(packages))
    key = hashlib.sha256(f"{base_disk.name}\0{listed}".encode()).hexdigest()[:12]
    stem = base_disk.name.split("+", 1)[0].removesuffix(".ext4")
    return base_disk.with_name(f"{stem}+{key}.ext4")


def read_spec(path: Path, *, name: str | None = None) -> TemplateSpec:
    """A template.yaml; relative kernel, ramdisk and disk paths are taken
    relative to its directory."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise TemplateError(f"{path}: cannot read the template ({exc})") from exc
    if not isinstance(data, dict):
        raise TemplateError(f"{path}: a template is a mapping of keys to values")
    where = path.parent
    name = name or str(data.get("name") or where.name)

    def file(key: str, default: str | None) -> Path | None:
        value = data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise TemplateError(f"{path}: {key} must be a file name")
        return where / value

    packages = data.get("packages") or []
    if not isinstance(packages, list):
        raise TemplateError(f"{path}: packages must be a list of Debian package names")
    bad = bad_packages(packages)
    if bad:
        raise TemplateError(f"{path}: not Debian package names: {', '.join(bad)}")
    memory = data.get("memory_mb")
    if memory is not None and (not isinstance(memory, int) or memory <= 0):
        raise TemplateError(f"{path}: memory_mb must be a positive number of MB")
    base = data.get("base")
    if base is not None and not isinstance(base, str):
        raise TemplateError(f"{path}: base must name a template")
    kernel, ramdisk = file("kernel", "vmlinuz"), file("ramdisk", "initrd.gz")
    assert kernel is not None and ramdisk is not None
    return TemplateSpec(name=name, kernel=kernel, ramdisk=ramdisk,
                        cmdline=str(data.get("cmdline") or DEFAULT_CMDLINE),
                        memory_mb=memory, disk=file("disk", None), base=base,
                        packages=tuple(packages))


def load_template(root: Path, name: str) -> TemplateSpec:
    """The installed template `name` under `root` (a kernel and an
    initramfs by default, when it has no template.yaml)."""
    spec_file = root / name / "template.yaml"
    if spec_file.exists():
        return read_spec(spec_file, name=name)
    return TemplateSpec(name=name, kernel=root / name / "vmlinuz",
                        ramdisk=root / name / "initrd.gz")
