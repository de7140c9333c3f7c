"""Builds the guest templates' files, each cached by the hash of its inputs:
what a real host's templates are made of (`selena host setup`) and what the
lab boots its guests with (selena.lab.build builds on this).

- the Debian kernel package, unpacked (Dom0 in the lab uses it too);
- the tiny guests' kernel, a trimmed Xen PV build of the same version;
- each template's guest initramfs (busybox, the guest agent, its recipe's
  programs: GUEST_RECIPES);
- the debian template's disk image, the templates based on it and their
  package variants (selena.templates.images).

Artefacts go under `root` (default cache_dir()/lab, where the lab has always
kept them, so moving this code changed no cache path or key).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from selena.errors import ImageBuildError
from selena.paths import cache_dir, project_root
from selena.runner import BUILD_TIMEOUT_S, Runner
from selena.templates import read_spec, variant_disk
from selena.templates.artefacts import digest as _hash
from selena.templates.artefacts import hash_files as _hash_files
from selena.templates.artefacts import heartbeat, kernel_version, pack_cpio
from selena.templates.artefacts import mkparent as _mkparent
from selena.templates.artefacts import tree_files as _tree_files
from selena.templates.images import MIRROR, SUITE, DebianImages

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GuestRecipe:
    """What a template's initramfs holds on top of busybox, the shared init,
    the agent and the static tools: host programs (with their shared
    libraries, at the same paths), host data files or directories, a python3
    runtime, directories of this tree, and pip-installed packages."""

    name: str
    host_programs: tuple[str, ...] = ()
    host_paths: tuple[str, ...] = ()
    python: bool = False
    # (directory in this tree, where it goes in the guest)
    tree_dirs: tuple[tuple[str, str], ...] = ()
    # requirements file in this tree; the build-site.sh beside it installs
    # them (and whatever else the template runs) into /opt/selena
    requirements: str | None = None
    # Programs from Debian packages the host need not have installed:
    # (package, archive component, paths inside the package). They are
    # fetched with a private apt configuration (non-free needs no host change).
    packaged_programs: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


@dataclass
class GuestContents:
    """What a guest initramfs holds on top of busybox, gathered once: the
    cache key hashes these files and install() copies them, so the two
    cannot drift apart."""

    name: str                           # the recipe's
    shared: Path                        # guest-templates/tiny-host: the shared init
    own: Path                           # the template's directory: rc, template.yaml
    agent: Path | None                  # None in a tree without the agent
    tools: list[Path]                   # the static tools, into /usr/bin
    host_binaries: list[Path]           # with their libraries, at the same paths
    host_paths: list[Path]              # host files or directories, at the same paths
    packaged: list[tuple[Path, Path]]   # (file in an extracted .deb, guest path)
    tree_dirs: list[tuple[Path, str]]   # (directory in this tree, guest path)
    python: bool                        # Debian's python3 standard library
    site: Path | None                   # pip-installed packages, into /opt/selena

    def files(self) -> list[Path]:
        """Every file the cache key covers: both template directories whole."""
        found = _tree_files(self.shared) + _tree_files(self.own) + self.tools
        found += [self.agent] if self.agent else []
        for src, _ in self.tree_dirs:
            found += _tree_files(src)
        found += [src for src, _ in self.packaged]
        found += self.host_binaries
        for path in self.host_paths:
            found += _tree_files(path) if path.is_dir() else [path]
        return found

    def key(self) -> str:
        # The standard library by fingerprint (not hashed file by file) and
        # the pip site by its own content key (its directory name).
        extra = [_python_stdlib_fingerprint()] if self.python else []
        extra += [self.site.name] if self.site else []
        return _hash(_hash_files(self.files()), self.name, "guest-initrd-v3", *extra)

    def install(self, root: Path) -> None:
        """Copy everything into the guest root `root` (busybox already there)."""
        shutil.copy2(self.shared / "init", root / "init")
        os.chmod(root / "init", 0o755)
        if (self.own / "rc").exists():
            shutil.copy2(self.own / "rc", root / "etc/selena/rc")
            os.chmod(root / "etc/selena/rc", 0o755)
        if self.agent is not None:
            shutil.copy2(self.agent, root / "sbin" / "selena-agent")
        for tool in self.tools:
            shutil.copy2(tool, root / "usr" / "bin" / tool.name)
        for path in self.host_binaries:
            # Same path in the guest, so the dynamic loader finds the libraries;
            # replace (never write through) a busybox applet link of that name.
            dest = _mkparent(root / path.relative_to("/"))
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            shutil.copy2(path, dest)
        for path in self.host_paths:
            _copy_any(path, root / str(path).lstrip("/"))
        for src, guest_path in self.packaged:
            shutil.copy2(src, _mkparent(root / guest_path.relative_to("/")))
        if self.python:
            _copy_python_stdlib(root)
        for tree, guest_dir in self.tree_dirs:
            shutil.copytree(tree, root / guest_dir.lstrip("/"),
                            ignore=shutil.ignore_patterns("__pycache__"))
        if self.site is not None:
            shutil.copytree(self.site, root / "opt/selena", symlinks=True, dirs_exist_ok=True)


# Debian's own python3 (not whatever python3 PATH finds first): the guests get
# its binary and standard library.
GUEST_PYTHON = "/usr/bin/python3"
OVS_PROGRAMS = ("ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl",
                "ovs-appctl")
GUEST_RECIPES = {
    "tiny-host": GuestRecipe("tiny-host"),
    # netperf (non-free in Debian) for SELENA's Listing 2.
    "tools-host": GuestRecipe("tools-host", host_programs=("iperf3", "tc"),
                              packaged_programs=(("netperf", "non-free",
                                                  ("usr/bin/netperf", "usr/bin/netserver")),)),
    "ovs-switch": GuestRecipe(
        "ovs-switch", host_programs=(*OVS_PROGRAMS, "tc", "unshare", GUEST_PYTHON),
        host_paths=("/usr/share/openvswitch/vswitch.ovsschema",
                    "/usr/lib/python3/dist-packages/yaml"),
        python=True,
        tree_dirs=(("switch-model/ofmodel", "/opt/selena/switch-model/ofmodel"),
                   ("switch-model/profiles", "/opt/selena/switch-model/profiles"))),
    # build-site.sh installs os-ken, the app and the osken-manager launcher
    # into /opt/selena.
    "of-controller": GuestRecipe(
        "of-controller", host_programs=(GUEST_PYTHON,), python=True,
        requirements="guest-templates/of-controller/requirements.txt"),
}
# Parts of the standard library no guest program imports (about 40 MB).
PYTHON_EXTENSIONS_SKIP = ("_curses", "_dbm", "_gdbm", "_sqlite3", "nis.", "readline.",
                          "_crypt.", "_tkinter", "_test", "xx", "_ctypes_test")
PYTHON_STDLIB_SKIP = ("test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
                      "pydoc_data", "config-3*", "__pycache__", "site-packages", "venv",
                      "*.exe", "sqlite3", "curses", "dbm",
                      *(f"{name}*.so" for name in PYTHON_EXTENSIONS_SKIP))

Progress = Callable[[str], None]


def build_times_file() -> Path:
    """How long each artefact took when it was last built cold (seconds)."""
    return cache_dir() / "lab" / "build-times.json"


_build_times_lock = threading.Lock()


def _record_build_time(step: str, seconds: float) -> None:
    with _build_times_lock:         # steps may finish side by side
        _write_build_time(step, seconds)


def _last_build_time(step: str) -> float | None:
    """How long `step` took when it was last built cold, if known."""
    try:
        value = json.loads(build_times_file().read_text()).get(step)
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def _kernel_objects(root: Path) -> str:
    """How far the guest kernel's compile is: its object files so far (in
    build-kernel.sh's work directory, kbuild.* beside the target)."""
    count = 0
    for work in root.glob("kbuild.*"):
        for _dirpath, _dirs, files in os.walk(work):
            count += sum(f.endswith(".o") for f in files)
    return f"{count} objects compiled"


def _write_build_time(step: str, seconds: float) -> None:
    path = build_times_file()
    times = json.loads(path.read_text()) if path.exists() else {}
    times[step] = round(seconds, 1)
    path.write_text(json.dumps(times, indent=1) + "\n")


@dataclass(frozen=True)
class DiskTemplate:
    """A debian-based template as built: its files in the images cache and
    what its template.yaml says (rendered for where Dom0 sees the images)."""

    name: str
    kernel: Path
    ramdisk: Path
    disk: Path
    cmdline: str
    memory_mb: int | None
    packages: tuple[str, ...]

    def spec(self, images_at: Path) -> dict[str, object]:
        """The template.yaml Dom0 reads, the images being under `images_at`."""
        return {
            "name": self.name,
            "description": f"debian with {' '.join(self.packages) or 'no extra packages'}",
            "kernel": str(images_at / self.kernel.name),
            "ramdisk": str(images_at / self.ramdisk.name),
            "disk": str(images_at / self.disk.name),
            "cmdline": self.cmdline,
            "memory_mb": self.memory_mb,
            "packages": list(self.packages),
        }


@dataclass(frozen=True)
class BuiltTemplates:
    """Every template's files, as TemplateBuilder.templates() built them: what
    the lab's Dom0 overlay carries and what `selena host setup` installs."""

    kernel_root: Path                       # Debian's kernel package, unpacked
    guest_kernel: Path                      # the tiny templates' kernel
    initrds: dict[str, Path]                # GUEST_RECIPES' initramfs images
    disks: dict[str, DiskTemplate]          # debian and the templates based on it
    images: Path                            # where the disk templates' files are

    def names(self) -> list[str]:
        return [*self.initrds, *self.disks]


# The templates built unless asked for more: everything but the debian
# images, which take a debootstrap and apt runs (issue 29 item 6).
DEBIAN_SET = "debian"


class TemplateBuilder:
    """Builds (or finds in the cache) the guest templates' kernels,
    initramfs images and debian disk images."""

    def __init__(self, runner: Runner | None = None, progress: Progress | None = None,
                 root: Path | None = None):
        self.runner = runner or Runner()
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.root = root or cache_dir() / "lab"
        self.src = project_root()
        self.timings: dict[str, float] = {}
        self.images = DebianImages(self.runner, self.progress)

    def templates(self, *, with_debian: bool = False,
                  variants: Iterable[tuple[str, tuple[str, ...], str]] = (),
                  beside: Callable[[Path], object] | None = None) -> BuiltTemplates:
        """Every guest template (the one build the lab and `selena host
        setup` share): the kernels, each GUEST_RECIPES initramfs and, with
        `with_debian` or package `variants` (template, packages, who asked),
        the debian template, those based on it and the variants.

        The guest kernel's compile is CPU work; `beside(kernel_root)` (the
        lab's Dom0 base) and the images are mostly downloads and disk writes:
        side by side, a cold build saves the shorter of the two."""
        variants = tuple(variants)
        kernel_deb = self.kernel_package()
        kernel_root = self.kernel_tree(kernel_deb)
        with ThreadPoolExecutor(max_workers=1) as pool:
            guest_kernel_job = pool.submit(self.guest_kernel, kernel_deb)
            if beside is not None:
                beside(kernel_root)
            initrds = {name: self.guest_initrd(recipe) for name, recipe in GUEST_RECIPES.items()}
            disks: dict[str, DiskTemplate] = {}
            if with_debian or variants:
                disks = self.debian_templates(kernel_root, variants)
            else:
                self.progress("[5/6] debian template: not needed (selena lab build --with "
                              "debian, or a scenario whose nodes use it, builds it)")
            guest_kernel = guest_kernel_job.result()
        return BuiltTemplates(kernel_root, guest_kernel, initrds, disks, self.images.root)

    def kernel_package(self) -> Path:
        """The Debian kernel .deb that linux-image-amd64 currently points at."""
        self.progress("[2/6] Debian kernel package")
        out = self.runner.run(["apt-cache", "depends", "linux-image-amd64"]).stdout
        names = [ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.strip().startswith("Depends:") and "linux-image-" in ln]
        if not names:
            raise ImageBuildError("cannot resolve linux-image-amd64 (run apt-get update)")
        name = names[0]
        pkgdir = self.root / "kernel"
        pkgdir.mkdir(parents=True, exist_ok=True)
        existing = sorted(pkgdir.glob(f"{name}_*.deb"))
        if existing:
            return existing[-1]
        with heartbeat(self.progress, f"downloading {name}"):
            self.runner.run(["apt-get", "download", "-q", name], cwd=pkgdir,
                            timeout=BUILD_TIMEOUT_S)
        found = sorted(pkgdir.glob(f"{name}_*.deb"))
        if not found:
            raise ImageBuildError(f"apt-get download {name} produced no .deb in {pkgdir}")
        return found[-1]

    def kernel_tree(self, deb: Path) -> Path:
        dest = self.root / "kernel" / deb.stem
        if (dest / ".complete").exists():
            return dest
        shutil.rmtree(dest, ignore_errors=True)
        self.runner.run(["dpkg-deb", "-x", str(deb), str(dest)], timeout=BUILD_TIMEOUT_S)
        version = kernel_version(dest)
        self.runner.run(["depmod", "-b", str(dest), version])
        (dest / ".complete").touch()
        return dest

    def guest_kernel(self, dom0_kernel_deb: Path) -> Path:
        """A trimmed Xen PV kernel for tiny guests (everything built in), from
        Debian's linux-source of the same version as Dom0's kernel."""
        kdir = self.src / "guest-templates" / "kernel"
        version = dom0_kernel_deb.stem.split("_")[1]            # e.g. 6.1.192-2
        series = ".".join(version.split(".")[:2])               # 6.1
        package = f"linux-source-{series}"
        srcdir = self.root / "kernel-src"
        srcdir.mkdir(parents=True, exist_ok=True)
        debs = sorted(srcdir.glob(f"{package}_{version}_*.deb"))
        if not debs:
            self.progress(f"      downloading {package}={version} (about 140 MB)")
            with heartbeat(self.progress, f"downloading {package}"):
                self.runner.run(["apt-get", "download", "-q", f"{package}={version}"],
                                cwd=srcdir, timeout=BUILD_TIMEOUT_S)
            debs = sorted(srcdir.glob(f"{package}_{version}_*.deb"))
            if not debs:
                raise ImageBuildError(f"apt-get download {package}={version} produced no .deb")
        key = _hash(debs[-1].name, _hash_files(_tree_files(kdir)))
        target = self.root / f"guest-vmlinuz-{key}"
        if target.exists():
            self.progress(f"[4/6] guest kernel: cached ({target.name})")
            return target
        self.progress(f"[4/6] guest kernel from {debs[-1].name} (tinyconfig + "
                      "tiny-pv.config; several minutes on 2 cores)")
        t = time.monotonic()
        # build-kernel.sh is quiet (make -s) and a cache-key input: the
        # progress lines come from here, counting the objects compiled so far.
        last = _last_build_time("guest_kernel")
        with heartbeat(self.progress, "guest kernel",
                       detail=lambda: _kernel_objects(self.root),
                       expected=last):
            self.runner.stream([str(kdir / "build-kernel.sh"), str(debs[-1]),
                                str(kdir / "tiny-pv.config"), str(target)],
                               lambda line: self.progress("      " + line.rstrip()))
        self.timings["guest_kernel"] = time.monotonic() - t
        _record_build_time("guest_kernel", self.timings["guest_kernel"])
        return target

    def debian_templates(self, kernel_root: Path,
                         variants: Iterable[tuple[str, tuple[str, ...], str]] = ()
                         ) -> dict[str, DiskTemplate]:
        """The debian template, every template under guest-templates based on
        it, and the requested package variants; returns each template's
        files and settings."""
        self.progress("[5/6] debian template (Debian's kernel, a shared disk image)")
        t = time.monotonic()
        with heartbeat(self.progress, "debian template"):
            base = self.images.base(kernel_root)

            def disk_template(name: str, disk: Path, memory_mb: int | None,
                              packages: tuple[str, ...]) -> DiskTemplate:
                return DiskTemplate(name, base.kernel, base.ramdisk, disk, base.spec.cmdline,
                                    memory_mb or base.spec.memory_mb, packages)

            found = {"debian": disk_template("debian", base.disk, base.spec.memory_mb, ())}
            for recipe in sorted((self.src / "guest-templates").glob("*/template.yaml")):
                if read_spec(recipe).base is None:
                    continue
                spec, disk = self.images.derived(base, recipe)
                found[spec.name] = disk_template(spec.name, disk, spec.memory_mb, spec.packages)
            for template, packages, who in variants:
                if template not in found:
                    raise ImageBuildError(f"{who}: packages need the debian template or one "
                                          f"based on it, not {template!r}")
                # Named after the template's image, as the planner names it; a
                # derived template's own packages go in as well.
                self.images.variant(base, variant_disk(found[template].disk, packages),
                                    (*found[template].packages, *packages),
                                    f"{who} ({template} + {' '.join(packages)})")
        self.timings["debian"] = time.monotonic() - t
        return found

    def tiny_host(self) -> Path:
        """The tiny-host guest initramfs: busybox, the agent, init (its kernel
        has every driver built in, so no modules)."""
        return self.guest_initrd(GUEST_RECIPES["tiny-host"])

    def guest_initrd(self, recipe: GuestRecipe) -> Path:
        contents = self.guest_contents(recipe)
        target = self.root / f"{recipe.name}-{contents.key()}.cpio.gz"
        if target.exists():
            self.progress(f"[5/6] {recipe.name} guest: cached ({target.name})")
            return target
        self.progress(f"[5/6] {recipe.name} guest initramfs")
        busybox = Path("/bin/busybox")
        if not busybox.exists():
            raise ImageBuildError("busybox-static is not installed (/bin/busybox missing)")
        with tempfile.TemporaryDirectory(dir=self.root) as tmp:
            root = Path(tmp) / "root"
            for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp",
                      "run", "etc/selena", "root", "var/log", "var/run"):
                (root / d).mkdir(parents=True, exist_ok=True)
            shutil.copy2(busybox, root / "bin" / "busybox")
            self.runner.run(["chroot", str(root), "/bin/busybox", "--install", "-s"])
            contents.install(root)
            self._pack(root, target)
        return target

    def guest_contents(self, recipe: GuestRecipe) -> GuestContents:
        """Gather what the recipe's initramfs holds (building the agent and
        tools, fetching packages and pip sites as needed)."""
        agent = self.src / "guest-agent" / "build" / "selena-agent"
        self._make_optional(self.src / "guest-agent")
        self._make_optional(self.src / "guest-templates", "tools")
        tools = self.src / "guest-templates" / "build" / "bin"
        host_binaries = _host_binaries_with_libs(self.runner, recipe.host_programs)
        packaged = self._packaged_programs(recipe)
        if packaged:
            host_binaries = sorted(set(host_binaries) | set(
                _shared_libraries(self.runner, [src for src, _ in packaged])))
        site = self.python_site(recipe) if recipe.requirements else None
        if recipe.python:
            # C extensions load libraries too (_ssl: libssl; greenlet: libstdc++).
            extensions = [p for p in (_python_stdlib_dir() / "lib-dynload").glob("*.so")
                          if not p.name.startswith(PYTHON_EXTENSIONS_SKIP)]
            extensions += sorted(site.rglob("*.so")) if site else []
            host_binaries = sorted(set(host_binaries) | set(
                _shared_libraries(self.runner, extensions)))
        return GuestContents(
            name=recipe.name,
            shared=self.src / "guest-templates" / "tiny-host",
            own=self.src / "guest-templates" / recipe.name,
            agent=agent if agent.exists() else None, tools=_tree_files(tools),
            host_binaries=host_binaries, host_paths=[Path(p) for p in recipe.host_paths],
            packaged=packaged,
            tree_dirs=[(self.src / src, dest) for src, dest in recipe.tree_dirs],
            python=recipe.python, site=site)

    def _packaged_programs(self, recipe: GuestRecipe) -> list[tuple[Path, Path]]:
        """(file in an extracted .deb, guest path) of the recipe's packaged programs."""
        packaged: list[tuple[Path, Path]] = []
        for package, component, paths in recipe.packaged_programs:
            unpacked = self.debian_package(package, component)
            for rel in paths:
                if not (unpacked / rel).exists():
                    raise ImageBuildError(f"Debian package {package} has no {rel}")
                packaged.append((unpacked / rel, Path("/") / rel))
        return packaged

    def debian_package(self, name: str, component: str = "main") -> Path:
        """A bookworm package unpacked (dpkg-deb -x) under the cache, fetched
        with a private apt configuration so that components the host does
        not use (non-free) need no change to the host's apt sources."""
        apt = self.root / "apt"
        options = ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}",
                   "-o", f"Dir::Etc::SourceParts={apt / 'sources.list.d'}",
                   "-o", f"Dir::State::Lists={apt / 'lists'}",
                   "-o", f"Dir::Cache={apt / 'cache'}", "-o", "Debug::NoLocking=1"]
        pkgdir = apt / "debs"
        found = sorted(pkgdir.glob(f"{name}_*.deb"))
        if not found:
            for sub in ("sources.list.d", "lists/partial", "cache/archives/partial", "debs"):
                (apt / sub).mkdir(parents=True, exist_ok=True)
            (apt / "sources.list").write_text(
                f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {MIRROR} "
                f"{SUITE} main contrib non-free\n")
            self.progress(f"      fetching Debian package {name} ({component})")
            self.runner.run(["apt-get", *options, "update", "-q"], timeout=600)
            self.runner.run(["apt-get", *options, "download", "-q", name], cwd=pkgdir,
                            timeout=600)
            found = sorted(pkgdir.glob(f"{name}_*.deb"))
            if not found:
                raise ImageBuildError(f"apt-get download {name} produced no .deb in {pkgdir}")
        dest = apt / "unpacked" / found[-1].stem
        if not (dest / ".complete").exists():
            shutil.rmtree(dest, ignore_errors=True)
            dest.parent.mkdir(parents=True, exist_ok=True)
            self.runner.run(["dpkg-deb", "-x", str(found[-1]), str(dest)])
            (dest / ".complete").touch()
        return dest

    def python_site(self, recipe: GuestRecipe) -> Path:
        """A template's /opt/selena from its build-site.sh (pip packages and
        its apps), cached by everything in the template's directory."""
        assert recipe.requirements is not None
        requirements = self.src / recipe.requirements
        builder = requirements.parent / "build-site.sh"
        key = _hash(_hash_files(_tree_files(requirements.parent)), _python_stdlib_fingerprint())
        target = self.root / f"site-{recipe.name}-{key}"
        if target.exists():
            return target
        self.progress(f"[5/6] {recipe.name}: pip packages ({requirements.name})")
        partial = target.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with heartbeat(self.progress, f"{recipe.name}: pip packages"):
            self.runner.run(["sh", str(builder), str(partial)], timeout=1800)
        if not (partial / "site-packages").is_dir():
            raise ImageBuildError(f"{builder} did not create {partial / 'site-packages'}")
        partial.rename(target)
        return target

    def _make_optional(self, directory: Path, *targets: str) -> None:
        """Build a part that may not exist yet in this tree (agent, tools)."""
        makefile = directory / "Makefile"
        if makefile.exists():
            self.runner.run(["make", "-s", "-C", str(directory), *targets],
                            timeout=BUILD_TIMEOUT_S)

    def _pack(self, rootfs: Path, target: Path) -> None:
        pack_cpio(self.runner, rootfs, target)


def _shared_libraries(runner: Runner, objects: Iterable[Path]) -> list[Path]:
    """Every shared library the given ELF objects load (through ldd)."""
    found: set[Path] = set()
    for obj in objects:
        out = runner.run(["ldd", str(obj)], check=False).stdout
        for line in out.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:
                found.add(Path(match.group(1)))
    return sorted(found)


def _host_binaries_with_libs(runner: Runner, names: Iterable[str]) -> list[Path]:
    """Host programs for the guests and every shared library they load
    (resolved through ldd), as absolute paths."""
    found: list[Path] = []
    for name in names:
        binary = shutil.which(name)
        if binary is None:
            raise ImageBuildError(
                f"{name} is not installed on this host (.ci/host-deps installs it)")
        found.append(Path(binary))
        out = runner.run(["ldd", binary]).stdout
        for line in out.splitlines():
            match = re.search(r"(/\S+) \(0x", line)
            if match:
                found.append(Path(match.group(1)))
    return sorted(set(found))


def _python_stdlib_fingerprint() -> str:
    """Identifies the host's python3 and standard library (names and sizes)."""
    lib = _python_stdlib_dir()
    listing = "\n".join(f"{p.relative_to(lib)} {p.stat().st_size}"
                        for p in _tree_files(lib) if "test" not in p.parts)
    return _hash(listing, Path(GUEST_PYTHON).resolve().read_bytes())


def _python_stdlib_dir() -> Path:
    lib = Path("/usr/lib/python3.11")
    if not (lib / "os.py").exists():
        raise ImageBuildError(
            f"{lib} is missing: the guests' python3 runtime is Debian bookworm's 3.11")
    return lib


def _copy_python_stdlib(root: Path) -> None:
    lib = _python_stdlib_dir()
    shutil.copytree(lib, root / lib.relative_to("/"), symlinks=True,
                    ignore=shutil.ignore_patterns(*PYTHON_STDLIB_SKIP))


def _copy_any(src: Path, dest: Path) -> None:
    if not src.exists():
        raise ImageBuildError(f"{src} is missing on this host (.ci/host-deps installs it)")
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy2(src, _mkparent(dest))


