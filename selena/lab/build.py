"""Builds the lab's artefacts, each cached by the hash of its inputs.

Artefacts (under cache_dir()/lab/):
- the patched hypervisor's Debian package, built from the lab's pin as
  `make -C xen-patches deb XEN_PIN=SOURCE` builds it (the hypervisor itself
  compiled once, in `make -C xen-patches`'s own cache);
- the Dom0 base image: a debootstrap'd bookworm root with the Xen tools, Open
  vSwitch, iproute2/tc, iperf3 and python3, the kernel modules Dom0 needs and
  that package installed with dpkg, packed as a gzip'd cpio (slow to build:
  minutes; rebuilt only when its package list, kernel or the hypervisor's
  package changes); QEMU boots the hypervisor file the package installed, so
  every lab boot goes through the install path a Xen server's does;
- the Dom0 overlay: a small cpio with the init script, the selena package
  from the current tree and the guest templates (about a second);
- the analysis extra's wheels (scipy, matplotlib) for Dom0's Python,
  installed by pip into a directory QEMU shares read-only;
- the guest templates themselves (Debian's kernel package, shared by Dom0 and
  the guests, the tiny guests' kernel, each guest initramfs, the debian disk
  images): selena.templates.build's TemplateBuilder, which a real host's
  template build uses too; its names are re-exported here.
Linux accepts concatenated gzip'd cpio archives as one initramfs, so Dom0
boots base + overlay and the slow part is reused across code changes.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from selena.errors import LabError
from selena.host.modules import HOST_MODULES, LAB_ONLY_MODULES
from selena.host.setup import (
    HostSetup,
    TemplateEntry,
    initrd_entries,
    sha256_file,
    template_set,
)
from selena.lab.dom0 import FLASK_POLICIES
from selena.provenance import patch_series_hash
from selena.templates.artefacts import digest as _hash
from selena.templates.artefacts import hash_files as _hash_files
from selena.templates.artefacts import heartbeat, install_modules
from selena.templates.artefacts import mkparent as _mkparent
from selena.templates.artefacts import tree_files as _tree_files
from selena.templates.build import (
    GUEST_PYTHON,
    GUEST_RECIPES,
    OVS_PROGRAMS,
    PYTHON_EXTENSIONS_SKIP,
    PYTHON_STDLIB_SKIP,
    GuestContents,
    GuestRecipe,
    Progress,
    TemplateBuilder,
    _last_build_time,
    _record_build_time,
    build_times_file,
)
from selena.templates.images import IMAGES_IN_DOM0, MIRROR, SUITE

# Moved to selena.templates.build; the old import path keeps working.
__all__ = ["DOM0_MODULES", "DOM0_PACKAGES", "GUEST_PYTHON", "GUEST_RECIPES", "MIRROR",
           "OVS_PROGRAMS", "PYTHON_EXTENSIONS_SKIP", "PYTHON_STDLIB_SKIP", "SUITE",
           "GuestContents", "GuestRecipe", "LabArtefacts", "LabBuilder", "Progress",
           "TemplateBuilder", "build_times_file"]

# Dom0 overlays and initrds kept in the cache, the one in use included.
KEEP_PER_CHANGE = 4

DOM0_PACKAGES = (
    "xen-utils-4.17", "xenstore-utils", "iproute2", "kmod", "busybox", "procps",
    "iperf3", "bridge-utils", "openvswitch-switch", "ethtool", "iputils-ping",
    "python3", "python3-jinja2", "python3-yaml",
    # The real-time baseline (selena/backends/mininet.py).
    "mininet",
    # The device model of HVM guests (check-clock --guest hvm): the guest's
    # firmware, PCI bus and its Xen platform device (+15 MB compressed).
    "qemu-system-xen",
    # Not the `analysis` extra (scipy, matplotlib): Debian's python3-scipy
    # depends on python3-pythran, which brings a C++ compiler, Boost's
    # headers and sympy; with them the Dom0 image unpacks to 1.26 GB instead
    # of 259 MB and Dom0 (1536 MB) panics unpacking it. The extra comes as
    # wheels on a read-only share instead (DOM0_ANALYSIS).
)

# The `analysis` extra for the lab's Dom0 (bookworm's Python 3.11), every
# wheel pinned so that the cache key is the list: installed on the host with
# pip into a directory QEMU shares read-only (never in Dom0's RAM) and that
# Dom0's Python finds through a .pth file. numpy 1.26, not 2.x: 2.x wheels
# need x86-64-v2 (SSE4.2, POPCNT), which the lab's emulated CPU (qemu64)
# lacks; 1.26's baseline is SSE3.
DOM0_ANALYSIS = (
    "numpy==1.26.4", "scipy==1.13.1", "matplotlib==3.8.4", "contourpy==1.3.2",
    "cycler==0.12.1", "fonttools==4.68.0", "kiwisolver==1.5.1", "packaging==26.4",
    "pillow==12.2.0", "pyparsing==3.3.3", "python-dateutil==4.0.0", "tzdata==2026.6",
)
DOM0_ANALYSIS_TARGET = ("--platform", "manylinux2014_x86_64", "--python-version", "3.11",
                        "--implementation", "cp", "--abi", "cp311")
# Where Dom0 mounts that share (selena/lab/dom0-init.sh) and the .pth file
# that puts it on Dom0's Python path.
ANALYSIS_IN_DOM0 = Path("/usr/local/lib/selena-analysis")
ANALYSIS_PTH = Path("usr/lib/python3/dist-packages/selena-analysis.pth")

# Modules Dom0 needs (their dependencies are added from modules.dep): the
# list a real host's `selena host setup` loads, and the lab machine's own.
DOM0_MODULES = HOST_MODULES + LAB_ONLY_MODULES


# The hypervisor the package installs (xen-patches/scripts/build-deb.sh).
INSTALLED_XEN = Path("/boot/xen-4.17-selena.gz")
# How a lab boots the Flask build (LabBuilder.flask_hypervisor).
FLASK_XEN_ARGS = "xsm=flask flask=enforcing"
# Debian's own hypervisor package, the one selena's stands beside.
STOCK_HYPERVISOR_PACKAGE = "xen-hypervisor-4.17-amd64"


def installed_hypervisor(base: Path) -> Path:
    """The hypervisor file a Dom0 base's package installed, unpacked beside it."""
    return base.with_name(base.name.removesuffix(".cpio.gz") + ".xen")


def _gunzip(source: Path, target: Path) -> None:
    """`target`, whole or not at all: QEMU's -kernel takes no gzip'd
    multiboot image."""
    partial = target.with_name(target.name + ".partial")
    with gzip.open(source, "rb") as src, partial.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    partial.rename(target)


@dataclass(frozen=True)
class LabArtefacts:
    xen: Path            # multiboot ELF for QEMU -kernel
    kernel: Path         # vmlinuz, for Dom0 and guests
    dom0_initrd: Path    # base + overlay, concatenated
    tiny_host_initrd: Path
    build_seconds: dict[str, float]
    # Disk images and kernels of the debian templates, shared into Dom0
    # read-only at IMAGES_IN_DOM0 (None: no such share).
    images: Path | None = None
    # More of the hypervisor's command line (e.g. to boot it under Flask).
    xen_args: str = ""
    # The analysis extra's packages (DOM0_ANALYSIS), shared into Dom0
    # read-only at ANALYSIS_IN_DOM0 (None: no such share).
    analysis: Path | None = None


class LabBuilder(TemplateBuilder):
    """Builds (or finds in the cache) everything `selena lab run` boots: the
    templates (TemplateBuilder's steps) and the hypervisor and Dom0."""

    def build(self, variants: Iterable[tuple[str, tuple[str, ...], str]] = (), *,
              with_debian: bool = False) -> LabArtefacts:
        """Everything the lab boots; `variants` are (template, packages,
        who asked) images of debian-based templates to build as well. The
        debian templates are built only with `with_debian` or variants."""
        self._check_user()
        start = time.monotonic()
        package = self.hypervisor()
        dom0: list[Path] = []

        def beside(kernel_root: Path) -> None:
            dom0.append(self.dom0_base(kernel_root, package))
            dom0.append(self.analysis())
        # The templates as `selena host setup` builds them; the Dom0 base and
        # its analysis packages beside the guest kernel's compile.
        built = self.templates(with_debian=with_debian, variants=variants, beside=beside)
        base, analysis = dom0
        xen = installed_hypervisor(base)
        kernel = next((built.kernel_root / "boot").glob("vmlinuz-*"))
        disk_templates = {name: yaml.safe_dump(t.spec(IMAGES_IN_DOM0), sort_keys=False)
                          for name, t in built.disks.items()}
        overlay = self.dom0_overlay(built.guest_kernel, built.initrds, disk_templates)
        dom0_initrd = self._concat(base, overlay)
        self._keep_recent(overlay, "dom0-overlay-*.cpio.gz")
        self._keep_recent(dom0_initrd, "dom0-initrd-*.cpio.gz")
        self.timings["total"] = time.monotonic() - start
        # A fresh clone built without the debian images has no images
        # directory, and QEMU refuses to share one that does not exist.
        images = self.images.root if self.images.root.is_dir() else None
        return LabArtefacts(xen, kernel, dom0_initrd, built.initrds["tiny-host"],
                            dict(self.timings), images=images, analysis=analysis)

    def _check_user(self) -> None:
        """A first build needs root (debootstrap and chroot make the Dom0 and
        the debian images): said before minutes of compiling Xen, not by
        debootstrap after them. With a Dom0 image cached, a user who may
        use the cache goes on. The cache must be a directory one can make."""
        if os.geteuid() != 0 and not any(self.root.glob("dom0-base-*.cpio.gz")):
            raise LabError(f"the lab's first build needs root (debootstrap and chroot make "
                           f"its Dom0 and guest images, cached in {self.root}): run it as "
                           "root, e.g. `sudo make demo`")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # Before make and the compilers each fail on it in their own words.
            raise LabError(f"cannot use {self.root} for the lab's cache: {exc.strerror} "
                           "(SELENA_CACHE sets where the cache lives)") from None

    def hypervisor(self) -> Path:
        """The patched hypervisor's Debian package, as `make -C xen-patches
        deb XEN_PIN=SOURCE` builds it (into its own directory, beside that
        target's); `make -C xen-patches` first, for selena-tdf and the
        files the lab tests compare with (out/)."""
        self.progress("[1/6] patched Xen hypervisor and its package (make -C xen-patches)")
        t = time.monotonic()
        xen_patches = self.src / "xen-patches"
        lines: list[str] = []

        def show(line: str) -> None:
            lines.append(line.rstrip())
            self.progress("      " + line.rstrip())
        with heartbeat(self.progress, "patched Xen"):
            self.runner.stream(["make", "-s", "-C", str(xen_patches)], show)
            lines.clear()
            self.runner.stream([str(xen_patches / "scripts" / "build-deb.sh"),
                                str(xen_patches / "SOURCE"),
                                # Not build/deb: `make deb`'s (the server's package).
                                str(xen_patches / "build" / "lab-deb")], show)
        self.timings["xen"] = time.monotonic() - t
        package = Path(lines[-1]) if lines else Path()
        if package.suffix != ".deb" or not package.is_file():
            raise LabError(f"building the hypervisor's package gave no .deb (last line: "
                           f"{lines[-1] if lines else 'none'!r})")
        return package

    def analysis(self) -> Path:
        """The `analysis` extra for the lab's Dom0 (DOM0_ANALYSIS), installed
        from PyPI's wheels by pip into a directory of its own, .pyc files
        included (Dom0 cannot write them to a read-only share, and compiling
        scipy at every import would take minutes under emulation)."""
        key = _hash(*DOM0_ANALYSIS, *DOM0_ANALYSIS_TARGET, "dom0-analysis-v1")
        target = self.root / f"dom0-analysis-{key}"
        if target.is_dir():
            self.progress(f"[3/6] Dom0 analysis packages: cached ({target.name})")
            return target
        self.progress("[3/6] Dom0 analysis packages: scipy and matplotlib wheels (pip, about "
                      "80 MB)")
        t = time.monotonic()
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with heartbeat(self.progress, "Dom0 analysis packages"):
            self.runner.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                             "--only-binary=:all:", *DOM0_ANALYSIS_TARGET,
                             "--target", str(partial), *DOM0_ANALYSIS], timeout=1800)
        partial.rename(target)
        self.timings["dom0_analysis"] = time.monotonic() - t
        return target

    def stock_hypervisor(self) -> Path:
        """Debian's own, unpatched hypervisor (bookworm's
        xen-hypervisor-4.17-amd64), unpacked for QEMU: a lab booted on it is
        a Debian server whose hypervisor selena's package never replaced."""
        unpacked = self.debian_package(STOCK_HYPERVISOR_PACKAGE)
        found = sorted((unpacked / "boot").glob("xen-*.gz"))
        if len(found) != 1:
            raise LabError(f"{STOCK_HYPERVISOR_PACKAGE} holds {len(found)} hypervisor files "
                           f"in /boot, not one: {[f.name for f in found]}")
        target = unpacked.with_name(unpacked.name + ".xen")
        if not target.exists():
            _gunzip(found[0], target)
        return target

    def flask_hypervisor(self) -> Path:
        """The patched hypervisor with Flask (XSM) and Xen's policy built in,
        for a lab booted with FLASK_XEN_ARGS (`make -C xen-patches flask`,
        cached by its inputs); the policies the XSM check loads are beside
        it in the shared tree (FLASK_POLICIES)."""
        self.runner.run(["make", "-s", "-C", str(self.src / "xen-patches"), "flask"])
        return self.src / FLASK_POLICIES / "xen"

    def dom0_base(self, kernel_root: Path, package: Path) -> Path:
        key = _hash(SUITE, MIRROR, " ".join(DOM0_PACKAGES), " ".join(DOM0_MODULES),
                    kernel_root.name, _hash_files([package]), "dom0-base-v2")
        target = self.root / f"dom0-base-{key}.cpio.gz"
        if target.exists() and installed_hypervisor(target).exists():
            self.progress(f"[3/6] Dom0 base image: cached ({target.name})")
            return target
        t = time.monotonic()
        self.progress("[3/6] Dom0 base image: debootstrap (a few minutes)")
        with heartbeat(self.progress, "Dom0 base image", expected=_last_build_time("dom0_base")):
            self._dom0_base(kernel_root, target, package)
        self.timings["dom0_base"] = time.monotonic() - t
        _record_build_time("dom0_base", self.timings["dom0_base"])
        return target

    def _dom0_base(self, kernel_root: Path, target: Path, package: Path) -> None:
        tarball = self.root / f"dom0-debs-{_hash(SUITE, ' '.join(DOM0_PACKAGES))}.tgz"
        include = "--include=" + ",".join(DOM0_PACKAGES)
        with tempfile.TemporaryDirectory(dir=self.root) as tmp:
            rootfs = Path(tmp) / "root"
            if not tarball.exists():
                self.progress("      downloading packages")
                partial = tarball.with_name(tarball.stem + ".partial.tgz")
                self.runner.run(["debootstrap", "--variant=minbase", include,
                                 f"--make-tarball={partial}", SUITE, str(rootfs), MIRROR],
                                timeout=1800)
                partial.rename(tarball)
                shutil.rmtree(rootfs, ignore_errors=True)
            self.progress("      installing packages")
            self.runner.run(["debootstrap", "--variant=minbase", include,
                             f"--unpack-tarball={tarball}", SUITE, str(rootfs), MIRROR],
                            timeout=1800)
            self.progress("      adding kernel modules")
            install_modules(self.runner, kernel_root, rootfs, DOM0_MODULES)
            self.progress(f"      installing {package.name} (dpkg -i)")
            shutil.copy2(package, rootfs / "tmp" / package.name)
            self.runner.run(["chroot", str(rootfs), "dpkg", "-i", f"/tmp/{package.name}"],
                            timeout=600)
            (rootfs / "tmp" / package.name).unlink()
            # What QEMU boots, written before the base: a base in the cache
            # always has its hypervisor.
            _gunzip(rootfs / INSTALLED_XEN.relative_to("/"), installed_hypervisor(target))
            self._trim(rootfs)
            self.progress("      packing")
            self._pack(rootfs, target)

    def dom0_overlay(self, kernel: Path, initrds: dict[str, Path],
                     disk_templates: dict[str, str] | None = None) -> Path:
        """Init script, selena from this tree and guest templates (the
        disk-image templates only as their template.yaml: their files stay
        on the images share). selena-tdf is the hypervisor package's."""
        disk_templates = disk_templates or {}
        lab_files = Path(__file__).parent
        inputs = _tree_files(self.src / "selena", (".py", ".j2", ".sh", ".yaml"))
        inputs += [kernel, *initrds.values(), self.src / "xen-patches" / "series"]
        inputs += [self.src / "guest-templates" / t / "template.yaml" for t in initrds]
        inputs += sorted((self.src / "xen-patches").glob("*.patch"))
        profiles = self.src / "switch-model" / "profiles"
        inputs += _tree_files(profiles)
        # The guests' static tools, also in Dom0 for the Mininet baseline's hosts
        # (keyed by their sources: the binaries differ between clones).
        tool_sources = sorted((self.src / "guest-templates" / "tools").glob("*.c"))
        inputs += tool_sources
        key = _hash(_hash_files(inputs), *(f"{n}\n{y}" for n, y in sorted(disk_templates.items())))
        target = self.root / f"dom0-overlay-{key}.cpio.gz"
        if target.exists():
            self.progress(f"[6/6] Dom0 overlay: cached ({target.name})")
            return target
        self.progress("[6/6] Dom0 overlay (selena, templates)")
        with tempfile.TemporaryDirectory(dir=self.root) as tmp:
            root = Path(tmp) / "root"
            shutil.copy2(lab_files / "dom0-init.sh", _mkparent(root / "init"))
            os.chmod(root / "init", 0o755)
            site = root / "usr/lib/python3/dist-packages"
            shutil.copytree(self.src / "selena", site / "selena",
                            ignore=shutil.ignore_patterns("__pycache__"))
            launcher = _mkparent(root / "usr/local/bin/selena")
            launcher.write_text("#!/usr/bin/python3\nimport sys\n\nfrom selena.cli import main\n\n"
                                "sys.exit(main())\n")
            launcher.chmod(0o755)
            # The analysis share (LabBuilder.analysis) on Dom0's Python path;
            # Python skips the line while nothing is mounted there.
            _mkparent(root / ANALYSIS_PTH).write_text(f"{ANALYSIS_IN_DOM0}\n")
            tools = self.src / "guest-templates" / "build" / "bin"
            for source in tool_sources:
                if not (tools / source.stem).exists():
                    raise LabError(f"{tools / source.stem} is missing: run make -C "
                                   "guest-templates tools")
                shutil.copy2(tools / source.stem, root / "usr/local/bin" / source.stem)
            # Results bundles name the patch series the hypervisor was built from.
            _mkparent(root / "usr/share/selena/xen-patches.sha256").write_text(
                patch_series_hash() + "\n")
            if profiles.is_dir():
                # Validation in Dom0 checks switch_model names against these.
                shutil.copytree(profiles, root / "usr/share/selena/switch-model/profiles")
            self._install_templates(root, kernel, initrds, disk_templates)
            # The modules Dom0's init loads, in order: the same list the base
            # image was built with.
            _mkparent(root / "etc/selena/dom0-modules").write_text("\n".join(DOM0_MODULES) + "\n")
            self._pack(root, target)
        return target

    def _install_templates(self, root: Path, kernel: Path, initrds: dict[str, Path],
                           disk_templates: dict[str, str]) -> None:
        """The templates as `selena host setup` installs them on a real host
        (its templates step, under `root`): the lab's Dom0 is set up the
        same way. The disk-image templates get only their template.yaml:
        their images stay on the read-only share."""
        paths: dict[str, Path] = {}

        def add(path: Path) -> str:
            sha = sha256_file(path)
            paths[sha] = path
            return sha

        entries = initrd_entries(self.src, add(kernel), initrds, add)
        for name, spec_text in disk_templates.items():
            entries[name] = TemplateEntry(name, yaml.safe_load(spec_text), {})
        setup = HostSetup(runner=self.runner, root=root, progress=lambda msg: None)
        setup.install_templates(template_set(entries, paths, "the lab's template build"))

    def _trim(self, rootfs: Path) -> None:
        for sub in ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info",
                    "var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / sub, ignore_errors=True)

    def _keep_recent(self, current: Path, pattern: str, keep: int = KEEP_PER_CHANGE) -> None:
        """A change to selena's tree makes a new overlay and initrd (about 200
        MB the pair), which piled up by the gigabyte in a cache that outlives
        clones: keep `current` and the most recently used others, `keep` in
        all (a few, for worktrees and branches taken in turn)."""
        def used(path: Path) -> float:
            try:
                return path.stat().st_mtime
            except OSError:
                return 0.0      # gone meanwhile (another build's pruning)
        if current.exists():
            os.utime(current)           # used now, whether built or found
        others = sorted((p for p in self.root.glob(pattern) if p != current), key=used,
                        reverse=True)
        for old in others[max(0, keep - 1):]:
            old.unlink(missing_ok=True)

    def _concat(self, *parts: Path) -> Path:
        key = _hash(*(p.name for p in parts))
        target = self.root / f"dom0-initrd-{key}.cpio.gz"
        if not target.exists():
            partial = target.with_suffix(".partial")
            with partial.open("wb") as out:
                for part in parts:
                    with part.open("rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
            partial.rename(target)
        return target
