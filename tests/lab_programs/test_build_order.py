"""The lab build compiles the guest kernel beside the Dom0 base and the
debian images (CPU work beside downloads and disk writes), and still waits
for it before the overlay that carries it."""

import threading
from pathlib import Path

import pytest

from selena.errors import LabError
from selena.lab import build as lab_build
from selena.lab.build import LabBuilder


class StepsOnly(LabBuilder):
    """Every step replaced by a record of when it ran; the guest kernel
    finishes only once the debian images have started, which a sequential
    build would never let it do."""

    def __init__(self, root: Path):
        super().__init__(root=root)
        self.events: list[str] = []
        self.debian_started = threading.Event()
        self.kernel_root = root / "kernel-root"
        (self.kernel_root / "boot").mkdir(parents=True)
        (self.kernel_root / "boot" / "vmlinuz-6.1").write_text("")

    def _check_user(self) -> None:
        pass                            # tests of its own below, whoever runs these

    def hypervisor(self) -> Path:
        self.events.append("xen")
        return self.root / "xen.deb"

    def kernel_package(self) -> Path:
        return self.root / "linux-image.deb"

    def kernel_tree(self, deb: Path) -> Path:
        return self.kernel_root

    def dom0_base(self, kernel_root: Path, package: Path) -> Path:
        self.events.append("dom0 base")
        return self.root / "base.cpio.gz"

    def analysis(self) -> Path:
        self.events.append("analysis")
        return self.root / "analysis"

    def guest_kernel(self, dom0_kernel_deb: Path) -> Path:
        overlapped = self.debian_started.wait(timeout=10)
        self.events.append(f"guest kernel done, overlapped={overlapped}")
        return self.root / "guest-vmlinuz"

    def guest_initrd(self, recipe):
        return self.root / f"{recipe.name}.cpio.gz"

    def debian_templates(self, kernel_root, variants=()):
        self.events.append("debian")
        self.debian_started.set()
        return {}

    def dom0_overlay(self, kernel, initrds, disk_templates=None):
        self.events.append(f"overlay with {kernel.name}")
        return self.root / "overlay.cpio.gz"

    def _concat(self, *parts: Path) -> Path:
        return self.root / "initrd.cpio.gz"


def test_the_guest_kernel_builds_beside_the_images_and_before_the_overlay(tmp_path):
    builder = StepsOnly(tmp_path)
    builder.build(with_debian=True)
    assert "guest kernel done, overlapped=True" in builder.events, builder.events
    assert builder.events[-1] == "overlay with guest-vmlinuz", builder.events
    assert builder.events.index("guest kernel done, overlapped=True") < len(builder.events) - 1
    # The analysis packages (pip) come beside the compile too, after the base.
    assert builder.events.index("dom0 base") < builder.events.index("analysis") \
        < builder.events.index("guest kernel done, overlapped=True"), builder.events


def test_the_debian_images_are_built_only_when_asked_for(tmp_path):
    """Issue 29 item 6: plain `selena lab build` skips the debian images;
    --with debian or a scenario's package variants build them."""
    builder = StepsOnly(tmp_path)
    builder.images.root = tmp_path / "images"
    builder.debian_started.set()        # no wait for a step that never comes
    art = builder.build()
    assert "debian" not in builder.events, builder.events
    # No images directory yet (a fresh clone): nothing to share into Dom0,
    # which QEMU would refuse.
    assert art.images is None
    builder.images.root.mkdir()
    art = builder.build(variants=[("debian", ("memcached",), "m1")])
    assert builder.events.count("debian") == 1, builder.events
    assert art.images == tmp_path / "images"


class Checked(StepsOnly):
    """StepsOnly with the real check of who builds."""

    _check_user = LabBuilder._check_user


def test_a_first_build_by_a_user_who_is_not_root_is_refused_before_any_step(
        tmp_path, monkeypatch):
    """It compiled Xen for minutes, then debootstrap said it needs root."""
    monkeypatch.setattr(lab_build.os, "geteuid", lambda: 1000)
    builder = Checked(tmp_path)
    with pytest.raises(LabError, match=r"^the lab's first build needs root \(debootstrap and "
                                       r"chroot make its Dom0 and guest images, cached in "
                                       rf"{tmp_path}\): run it as root, e\.g\. `sudo make "
                                       r"demo`$"):
        builder.build()
    assert builder.events == []
    # With a Dom0 image cached, whoever may use the cache goes on; root always.
    (tmp_path / "dom0-base-0123.cpio.gz").write_bytes(b"")
    builder.debian_started.set()        # no wait for a step that never comes
    builder.build()
    assert builder.events[0] == "xen"
    (tmp_path / "dom0-base-0123.cpio.gz").unlink()
    builder.events.clear()
    monkeypatch.setattr(lab_build.os, "geteuid", lambda: 0)
    builder.build()
    assert builder.events[0] == "xen"


def test_a_cache_that_cannot_be_a_directory_is_named_before_any_step(tmp_path):
    """SELENA_CACHE=/etc/passwd was make's `mkdir: cannot create directory`."""
    (tmp_path / "file").write_text("")
    builder = Checked(tmp_path)
    builder.root = tmp_path / "file" / "lab"
    with pytest.raises(LabError, match=rf"^cannot use {tmp_path}/file/lab for the lab's cache: "
                                       r"Not a directory \(SELENA_CACHE sets where the cache "
                                       r"lives\)$"):
        builder.build()
    assert builder.events == []


class Overlays(StepsOnly):
    """StepsOnly whose overlay and initrd are files named as the real ones."""

    def dom0_overlay(self, kernel, initrds, disk_templates=None):
        target = self.root / "dom0-overlay-new.cpio.gz"
        target.write_bytes(b"overlay")
        return target

    def _concat(self, *parts: Path) -> Path:
        target = self.root / "dom0-initrd-new.cpio.gz"
        target.write_bytes(b"initrd")
        return target


def test_a_build_keeps_the_few_most_recently_used_overlays_and_initrds(tmp_path):
    """Every change to selena's tree made a new pair (about 200 MB), kept for
    ever: 11 of them in a day's cache."""
    import os
    for n in range(6):
        for family in ("overlay", "initrd"):
            old = tmp_path / f"dom0-{family}-old{n}.cpio.gz"
            old.write_bytes(b"old")
            os.utime(old, (1000 + n, 1000 + n))     # old5 the most recently used
    (tmp_path / "dom0-base-x.cpio.gz").write_bytes(b"base")
    builder = Overlays(tmp_path)
    builder.debian_started.set()
    art = builder.build()
    assert art.dom0_initrd.name == "dom0-initrd-new.cpio.gz"
    for family in ("overlay", "initrd"):
        assert sorted(p.name for p in tmp_path.glob(f"dom0-{family}-*.cpio.gz")) == [
            f"dom0-{family}-new.cpio.gz", f"dom0-{family}-old3.cpio.gz",
            f"dom0-{family}-old4.cpio.gz", f"dom0-{family}-old5.cpio.gz"]
    assert (tmp_path / "dom0-base-x.cpio.gz").exists()      # not a per-change artefact
    # The one in use (found again, not built) counts as used now; of the
    # others the most recently used stays.
    builder._keep_recent(tmp_path / "dom0-overlay-old4.cpio.gz", "dom0-overlay-*.cpio.gz",
                         keep=2)
    assert sorted(p.name for p in tmp_path.glob("dom0-overlay-*.cpio.gz")) == [
        "dom0-overlay-new.cpio.gz", "dom0-overlay-old4.cpio.gz"]
