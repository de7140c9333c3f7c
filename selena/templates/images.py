"""Disk images of the debian template and its package variants.

The base is Debian bookworm from debootstrap (minbase plus the template's
packages), with the guest agent as a systemd unit, the kernel modules a
network experiment uses, and the units a lab guest has no use for masked; it
boots Debian's own kernel through a small busybox initramfs that overlays a
tmpfs on the read-only image, so one image serves every guest. A variant
installs more Debian packages with apt in a chroot of the base. Everything
is cached under images_dir(), keyed by its inputs; in the lab that directory
is shared read-only into Dom0 as IMAGES_IN_DOM0.
"""

from __future__ import annotations

import logging
import lzma
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from selena.errors import ImageBuildError
from selena.paths import cache_dir, project_root
from selena.runner import BUILD_TIMEOUT_S, Runner
from selena.templates import TemplateSpec, normalise_packages, read_spec, variant_disk
from selena.templates.artefacts import (
    digest,
    hash_files,
    install_modules,
    kernel_version,
    mkparent,
    pack_cpio,
    tree_files,
)

log = logging.getLogger(__name__)

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# Where Dom0 sees images_dir() (a read-only 9p share in the lab).
IMAGES_IN_DOM0 = Path("/var/lib/selena/images")
# The initramfs mounts the root with these (all modules in Debian's kernel),
# loaded in this order.
INITRAMFS_MODULES = ("xen-blkfront", "crc16", "mbcache", "jbd2", "crc32c_generic", "ext4",
                     "overlay")
# In the root filesystem, for udev and the experiments: vifs, every qdisc,
# classifier and action of tc, netfilter, bridging and VLANs, tunnels.
GUEST_MODULES = ("xen-netfront", "xen-blkfront", "kernel/net/", "veth",
                 "dummy", "tun", "ifb", "macvlan", "overlay", "ext4")
# Free space left in each image (the root is a RAM overlay; this is only
# for the filesystem's own metadata).
IMAGE_SLACK_MB = 32
TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "var/cache/apt/archives",
        "var/lib/apt/lists", "var/cache/debconf/templates.dat-old")

# The host's file systems apt's maintainer scripts need in the chroot
# (bind mounts, not recursive: /dev's own submounts stay outside).
CHROOT_MOUNTS = ("proc", "sys", "dev")

Progress = Callable[[str], None]


def images_dir() -> Path:
    return cache_dir() / "lab" / "images"


@dataclass(frozen=True)
class DebianBase:
    spec: TemplateSpec       # the template.yaml in this tree
    kernel: Path             # Debian's kernel, decompressed
    ramdisk: Path
    disk: Path
    root_tar: Path           # the root before trimming: variants start from it


class DebianImages:
    """Builds (or finds cached) the debian template's files and variants."""

    def __init__(self, runner: Runner | None = None, progress: Progress | None = None,
                 root: Path | None = None):
        self.runner = runner or Runner()
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.root = root or images_dir()
        self.src = project_root()
        self.recipe = self.src / "guest-templates" / "debian"

    def base(self, kernel_root: Path) -> DebianBase:
        spec = read_spec(self.recipe / "template.yaml")
        agent_sources = tree_files(self.src / "guest-agent" / "src") + \
            [self.src / "guest-agent" / "Makefile"]
        key = digest(SUITE, MIRROR, " ".join(spec.packages), kernel_root.name,
                     hash_files(tree_files(self.recipe) + agent_sources), "debian-v1")
        self.root.mkdir(parents=True, exist_ok=True)
        disk = self.root / f"debian-{key}.ext4"
        root_tar = self.root / f"debian-{key}.tar"
        ramdisk = self.root / f"debian-initrd-{key}.gz"
        kernel = self.kernel(kernel_root)
        if not ramdisk.exists():
            self._initramfs(kernel_root, ramdisk)
        if disk.exists() and root_tar.exists():
            self.progress(f"      debian image: cached ({disk.name})")
        else:
            t = time.monotonic()
            self.progress("      debian image: debootstrap bookworm (about a minute)")
            with tempfile.TemporaryDirectory(dir=self.root) as tmp:
                rootfs = Path(tmp) / "root"
                include = "--include=" + ",".join(spec.packages)
                self._run(["debootstrap", "--variant=minbase", include, SUITE, str(rootfs),
                           MIRROR], "debootstrap", timeout=1800)
                self._customise(rootfs, kernel_root)
                self._tar(rootfs, root_tar)
                self._trim(rootfs)
                self._mkfs(rootfs, disk)
            self.progress(f"      debian image: {time.monotonic() - t:.0f} s "
                          f"({disk.stat().st_size >> 20} MB)")
        return DebianBase(spec, kernel, ramdisk, disk, root_tar)

    def kernel(self, kernel_root: Path) -> Path:
        """Debian's vmlinuz with its xz payload unpacked: a bzImage's
        compressed kernel is an ELF that Xen's PV loader takes as it is."""
        version = kernel_version(kernel_root)
        target = self.root / f"debian-vmlinux-{version}"
        if target.exists():
            return target
        packed = (kernel_root / "boot" / f"vmlinuz-{version}").read_bytes()
        start = packed.find(b"\xfd7zXZ\x00")
        if start < 0:
            raise ImageBuildError(f"vmlinuz-{version}: no xz payload found")
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(packed[start:])
        if not elf.startswith(b"\x7fELF"):
            raise ImageBuildError(f"vmlinuz-{version}: the xz payload is not an ELF kernel")
        partial = target.with_suffix(".partial")
        partial.write_bytes(elf)
        partial.rename(target)
        return target

    def variant(self, base: DebianBase, disk: Path, packages: Iterable[str],
                what: str) -> Path:
        """`disk` (a name from selena.templates.variant_disk): the base with
        `packages` installed by apt. `what` names the template or node that
        asked, for apt's errors."""
        wanted = normalise_packages(packages)
        if disk.exists():
            self.progress(f"      {what}: cached ({disk.name})")
            return disk
        t = time.monotonic()
        self.progress(f"      {what}: apt-get install {' '.join(wanted)}")
        tmp = Path(tempfile.mkdtemp(dir=self.root))
        rootfs = tmp / "root"
        try:
            rootfs.mkdir()
            self.runner.run(["tar", "-xf", str(base.root_tar), "-C", str(rootfs)], timeout=600)
            self._apt_install(rootfs, wanted, what)
            self._trim(rootfs)
            self._mkfs(rootfs, disk)
        finally:
            self._remove_chroot(tmp, rootfs)
        self.progress(f"      {what}: {time.monotonic() - t:.0f} s "
                      f"({disk.stat().st_size >> 20} MB)")
        return disk

    def derived(self, base: DebianBase, recipe: Path) -> tuple[TemplateSpec, Path]:
        """A template.yaml under guest-templates naming `base: debian`."""
        spec = read_spec(recipe)
        if spec.base != "debian":
            raise ImageBuildError(f"{recipe}: base {spec.base!r}: only debian can be extended")
        disk = variant_disk(base.disk, spec.packages)
        return spec, self.variant(base, disk, spec.packages, f"template {spec.name}")

    # -- steps -------------------------------------------------------------

    def _customise(self, rootfs: Path, kernel_root: Path) -> None:
        self.runner.run(["sh", str(self.recipe / "customize.sh"), str(rootfs)],
                        timeout=BUILD_TIMEOUT_S)
        agent = self.src / "guest-agent" / "build" / "selena-agent"
        self.runner.run(["make", "-s", "-C", str(self.src / "guest-agent")],
                        timeout=BUILD_TIMEOUT_S)
        shutil.copy2(agent, rootfs / "sbin" / "selena-agent")
        # The static tools every selena host has (clock checks, flow generator).
        self.runner.run(["make", "-s", "-C", str(self.src / "guest-templates"), "tools"],
                        timeout=BUILD_TIMEOUT_S)
        for tool in tree_files(self.src / "guest-templates" / "build" / "bin"):
            shutil.copy2(tool, rootfs / "usr" / "local" / "bin" / tool.name)
        install_modules(self.runner, kernel_root, rootfs, GUEST_MODULES)

    def _initramfs(self, kernel_root: Path, target: Path) -> None:
        busybox = Path("/bin/busybox")
        if not busybox.exists():
            raise ImageBuildError("busybox-static is not installed (/bin/busybox missing)")
        version = kernel_version(kernel_root)
        moddir = kernel_root / "lib/modules" / version
        by_name = {p.name.removesuffix(".ko"): p for p in moddir.rglob("*.ko")}
        with tempfile.TemporaryDirectory(dir=self.root) as tmp:
            root = Path(tmp) / "root"
            (root / "lib" / "modules").mkdir(parents=True)
            shutil.copy2(busybox, mkparent(root / "bin" / "busybox"))
            shutil.copy2(self.recipe / "init", root / "init")
            os.chmod(root / "init", 0o755)
            for name in INITRAMFS_MODULES:
                module = by_name.get(name) or by_name.get(name.replace("-", "_"))
                if module is None:
                    raise ImageBuildError(f"kernel module {name} not found in {version}")
                shutil.copy2(module, root / "lib" / "modules" / f"{name}.ko")
            pack_cpio(self.runner, root, target)

    def _apt_install(self, rootfs: Path, packages: tuple[str, ...], what: str) -> None:
        """apt-get install in a chroot of rootfs, with the host's name
        service, no service started inside the chroot, and /proc, /sys and
        /dev mounted for the maintainer scripts (and always unmounted)."""
        policy = rootfs / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\n# No service starts inside the build's chroot.\nexit 101\n")
        policy.chmod(0o755)
        resolv = rootfs / "etc/resolv.conf"
        saved = resolv.read_bytes() if resolv.is_file() and not resolv.is_symlink() else None
        resolv.unlink(missing_ok=True)
        shutil.copy2("/etc/resolv.conf", resolv)
        mounted: list[Path] = []
        try:
            for fs in CHROOT_MOUNTS:
                point = rootfs / fs
                self.runner.run(["mount", "--bind", f"/{fs}", str(point)])
                mounted.append(point)
            env = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                   "LC_ALL": "C"}
            self._run(["chroot", str(rootfs), "apt-get", "update", "-q"],
                      f"apt-get update for {what}", env=env, timeout=900)
            self._run(["chroot", str(rootfs), "apt-get", "install", "-y", "-q",
                       "--no-install-recommends", *packages],
                      f"apt-get install for {what}", env=env, timeout=1800)
            self.runner.run(["chroot", str(rootfs), "apt-get", "clean"], env=env)
        finally:
            for point in reversed(mounted):
                self.runner.run(["umount", "-l", str(point)], check=False)
            policy.unlink(missing_ok=True)
            resolv.unlink(missing_ok=True)
            if saved is not None:
                resolv.write_bytes(saved)

    def _remove_chroot(self, tmp: Path, rootfs: Path) -> None:
        """Remove a variant's build directory, unless the host's /proc, /sys
        or /dev are still mounted inside it: removing the tree then would
        delete the host's own files. Left in place, it is logged."""
        mounted = [str(rootfs / fs) for fs in CHROOT_MOUNTS if os.path.ismount(rootfs / fs)]
        if mounted:
            log.error("not removing %s: %s still mounted (umount them, then remove it)",
                      tmp, ", ".join(mounted))
            return
        shutil.rmtree(tmp, ignore_errors=True)

    def _run(self, argv: list[str], what: str, *, timeout: float,
             env: Mapping[str, str] | None = None) -> None:
        """A build step whose failure is the user's to read: the tool's own
        error lines (apt's "E: Unable to locate package ...") are the message."""
        result = self.runner.run(argv, check=False, timeout=timeout, env=env)
        if result.returncode != 0:
            lines = (result.stderr + result.stdout).splitlines()
            errors = [ln for ln in lines if ln.startswith(("E:", "W: Failure", "E "))]
            detail = "\n".join(errors or lines[-15:])
            raise ImageBuildError(f"{what} failed (exit {result.returncode}):\n{detail}")

    def _tar(self, rootfs: Path, target: Path) -> None:
        partial = target.with_suffix(".partial")
        self.runner.run(["tar", "-cf", str(partial), "-C", str(rootfs), "."], timeout=600)
        partial.rename(target)

    def _trim(self, rootfs: Path) -> None:
        for sub in TRIM:
            path = rootfs / sub
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir()
        locale = rootfs / "usr/share/locale"
        if locale.is_dir():
            for entry in locale.iterdir():
                if entry.name != "locale.alias":
                    shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() \
                        else entry.unlink()

    def _mkfs(self, rootfs: Path, target: Path) -> None:
        """An ext4 image of rootfs without a journal (it is only read)."""
        used = self.runner.run(["du", "-sxm", str(rootfs)]).stdout.split()[0]
        partial = target.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        self.runner.run(["mkfs.ext4", "-q", "-d", str(rootfs), "-L", "selena", "-O",
                         "^has_journal", "-E", "root_owner=0:0", str(partial),
                         f"{int(used) + IMAGE_SLACK_MB}M"], timeout=600)
        partial.rename(target)


def scenario_variants(paths: Iterable[Path]) -> list[tuple[str, tuple[str, ...], str]]:
    """(template, packages, who asked) for every node of these scenarios
    that adds Debian packages; the scenarios are loaded, not run."""
    from selena.loader import load_scenario

    found: list[tuple[str, tuple[str, ...], str]] = []
    for path in paths:
        topology = load_scenario(str(path)).topology
        for node in topology.nodes.values():
            if node.packages:
                found.append((node.template, normalise_packages(node.packages),
                              f"{path.name}: node {node.name}"))
    return found


def scenarios_need_debian(paths: Iterable[Path]) -> bool:
    """Whether a node of these scenarios boots the debian template or one
    based on it (guest-templates/*/template.yaml naming `base: debian`), or
    adds Debian packages: the lab then builds the debian images."""
    from selena.loader import load_scenario

    paths = list(paths)
    if not paths:
        return False
    recipes = (project_root() / "guest-templates").glob("*/template.yaml")
    debian = {"debian"} | {r.parent.name for r in recipes if read_spec(r).base == "debian"}
    for path in paths:
        for node in load_scenario(str(path)).topology.nodes.values():
            if node.template in debian or node.packages:
                return True
    return False
