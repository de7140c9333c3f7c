"""`selena host setup` and `selena host export`: make a Dom0 ready for runs.

Setup's steps, each first asking whether it has anything to do (a second run
does nothing and says so), with `dry_run` printing every step and command
without running any:

1. analysis: scipy and matplotlib (the `analysis` extra: KS p-values and
   plots of `selena sweep`), with pip in a virtualenv, else Debian's packages;
2. modules: HOST_MODULES (selena/host/modules.py, the lab's list too) loaded;
3. modules-load: the same list persisted in /etc/modules-load.d/selena.conf;
4. openvswitch: ovs-vsctl answers (the service started, installed if absent);
5. templates: the guest templates installed under ROOT/usr/share/selena/
   templates (where the planner, the doctor and the lab look) and the debian
   templates' images under ROOT/var/lib/selena/images, either built here by
   TemplateBuilder.templates() (the lab's own build) or copied from a bundle
   that `selena host export` made on another machine.

A bundle is an uncompressed tar: manifest.json (format, selena version, agent
protocol, and per template its template.yaml and the sha256 of each file)
and blobs/<sha256>, each file once. Templates are staged in a temporary
directory beside their destination and renamed into place only once every
file is there and matches its sha256: a failure leaves nothing half-installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import logging
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from selena.control.protocol import PROTOCOL_VERSION
from selena.errors import CommandError, CommandTimeout, HostSetupError
from selena.host.doctor import HostProbe, Modules
from selena.host.modules import HOST_MODULES, MODULES_LOAD_FILE
from selena.paths import project_root
from selena.runner import BUILD_TIMEOUT_S, CommandResult, Runner

log = logging.getLogger(__name__)

# The `analysis` extra (pyproject.toml): (module, pip requirement, Debian package).
ANALYSIS_PACKAGES = (("scipy", "scipy>=1.10", "python3-scipy"),
                     ("matplotlib", "matplotlib>=3.5", "python3-matplotlib"))
# Under ROOT: where templates and the debian images go, and the record of
# what setup installed (the manifest it installed from).
TEMPLATES_UNDER = Path("usr/share/selena/templates")
IMAGES_UNDER = Path("var/lib/selena/images")
STATE_UNDER = Path("var/lib/selena/installed.json")
BUNDLE_FORMAT = 1
MANIFEST = "manifest.json"
# The templates every install has; the debian ones only when asked for.
BASE_TEMPLATES = ("tiny-host", "tools-host", "ovs-switch", "of-controller")
# A template file named with this prefix lives in the images directory.
IMAGES_PREFIX = "images/"

Progress = Callable[[str], None]


# -- manifests ------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateEntry:
    """One template in a manifest: its template.yaml (file names relative to
    its directory, or images/NAME) and the sha256 of each file it names."""

    name: str
    spec: dict[str, object]
    files: dict[str, str]        # relative name -> sha256

    def as_dict(self) -> dict[str, object]:
        return {"spec": self.spec, "files": dict(sorted(self.files.items()))}


@dataclass
class TemplateSet:
    """What is to be installed: the entries and where each file's bytes come
    from (a path, or a member of a bundle)."""

    entries: dict[str, TemplateEntry]
    open_file: Callable[[str], IO[bytes]]      # sha256 -> readable bytes
    origin: str

    def manifest(self) -> dict[str, object]:
        from selena import __version__
        return {"format": BUNDLE_FORMAT, "selena_version": __version__,
                "protocol": PROTOCOL_VERSION,
                "templates": {n: e.as_dict() for n, e in sorted(self.entries.items())}}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def template_set(entries: dict[str, TemplateEntry], paths: Mapping[str, Path],
                 origin: str) -> TemplateSet:
    """A set whose files are at `paths` (sha256 -> path)."""
    def open_file(sha: str) -> IO[bytes]:
        return paths[sha].open("rb")
    return TemplateSet(entries, open_file, origin)


def built_set(with_debian: bool, progress: Progress, runner: Runner,
              builder: object | None = None) -> TemplateSet:
    """The templates built here by the lab's own build
    (TemplateBuilder.templates), from this source tree."""
    from selena.templates.build import TemplateBuilder

    src = project_root()
    if not (src / "guest-templates").is_dir():
        raise HostSetupError(
            f"no selena source tree here ({src / 'guest-templates'} missing) to build the "
            "templates from: run from a clone, or make a bundle on a build machine with "
            "`selena host export FILE` and pass it: selena host setup --from FILE")
    tb = builder if builder is not None else TemplateBuilder(runner, progress)
    assert isinstance(tb, TemplateBuilder)
    built = tb.templates(with_debian=with_debian)
    entries: dict[str, TemplateEntry] = {}
    paths: dict[str, Path] = {}

    def add(path: Path) -> str:
        sha = sha256_file(path)
        paths[sha] = path
        return sha

    entries.update(initrd_entries(src, add(built.guest_kernel), built.initrds, add))
    for name, disk in built.disks.items():
        spec = disk.spec(Path(IMAGES_PREFIX.rstrip("/")))
        files = {str(spec[k]): add(p) for k, p in
                 (("kernel", disk.kernel), ("ramdisk", disk.ramdisk), ("disk", disk.disk))}
        entries[name] = TemplateEntry(name, spec, files)
    return template_set(entries, paths, f"built from {src}")


def initrd_entries(src: Path, kernel_sha: str, initrds: Mapping[str, Path],
                   add: Callable[[Path], str]) -> dict[str, TemplateEntry]:
    """The initramfs templates' entries: each its source template.yaml, the
    shared guest kernel and its initrd (`add` records a file, its sha256)."""
    entries = {}
    for name, initrd in initrds.items():
        spec = yaml.safe_load((src / "guest-templates" / name / "template.yaml").read_text())
        spec = {**spec, "kernel": "vmlinuz", "ramdisk": "initrd.gz"}
        entries[name] = TemplateEntry(name, spec, {"vmlinuz": kernel_sha,
                                                   "initrd.gz": add(initrd)})
    return entries


def installed_set(root: Path, with_debian: bool) -> TemplateSet:
    """The templates installed under `root` (ROOT/usr/share/selena/templates,
    the debian ones' images wherever their template.yaml says)."""
    troot = root / TEMPLATES_UNDER
    if not troot.is_dir():
        raise HostSetupError(f"no templates installed under {troot}: build a bundle from a "
                             "source tree instead (selena host export FILE, without --installed)")
    entries: dict[str, TemplateEntry] = {}
    paths: dict[str, Path] = {}
    for tdir in sorted(p for p in troot.iterdir() if p.is_dir()):
        spec_file = tdir / "template.yaml"
        if not spec_file.exists():
            continue
        spec = yaml.safe_load(spec_file.read_text()) or {}
        if not isinstance(spec, dict):
            raise HostSetupError(f"{spec_file}: not a mapping; reinstall this template")
        if spec.get("disk") and not with_debian:
            continue
        files: dict[str, str] = {}
        for key, default in (("kernel", "vmlinuz"), ("ramdisk", "initrd.gz"), ("disk", None)):
            value = spec.get(key, default)
            if value is None:
                continue
            source = Path(str(value)) if str(value).startswith("/") else tdir / str(value)
            if not source.is_file():
                raise HostSetupError(f"template {tdir.name}: {source} is missing; reinstall it "
                                     "(selena host setup) before exporting")
            rel = IMAGES_PREFIX + source.name if str(value).startswith("/") else str(value)
            spec[key] = rel
            sha = sha256_file(source)
            paths[sha] = source
            files[rel] = sha
        for key in ("protocol", "selena_version"):
            spec.pop(key, None)
        entries[tdir.name] = TemplateEntry(tdir.name, spec, files)
    if not entries:
        raise HostSetupError(f"no templates installed under {troot}")
    return template_set(entries, paths, f"installed under {troot}")


def bundle_set(bundle: Path) -> TemplateSet:
    """The templates of a `selena host export` bundle (checked: a tar with a
    manifest of this format and this agent protocol)."""
    where = f"bundle {bundle}"
    if not bundle.is_file():
        what = "a directory, not a bundle file" if bundle.is_dir() else "no such file"
        raise HostSetupError(f"{where}: {what} (make one with selena host export FILE)")
    if not tarfile.is_tarfile(bundle):
        raise HostSetupError(f"{where}: not a selena host export bundle (not a tar archive); "
                             "make one with selena host export FILE")
    # Where each member's bytes lie, read once: the bundle is not kept open
    # (each blob is read through a file of its own, closed with it).
    with tarfile.open(bundle, "r:") as tar:
        try:
            member = tar.extractfile(MANIFEST)
        except KeyError:
            member = None
        if member is None:
            raise HostSetupError(f"{where}: no {MANIFEST} (not made by selena host export)")
        try:
            manifest = json.loads(member.read())
        except ValueError as exc:
            raise HostSetupError(f"{where}: {MANIFEST} is not JSON ({exc})") from None
        blobs = {m.name.removeprefix("blobs/"): (m.offset_data, m.size)
                 for m in tar.getmembers() if m.isreg() and m.name.startswith("blobs/")}
    entries = _parse_manifest(manifest, where)

    def open_file(sha: str) -> IO[bytes]:
        if sha not in blobs:
            raise HostSetupError(f"{where}: blobs/{sha} is missing (a truncated copy?); "
                                 "copy the bundle again")
        return io.BufferedReader(_Slice(bundle, *blobs[sha]))
    return TemplateSet(entries, open_file, where)


class _Slice(io.RawIOBase):
    """`size` bytes of `path` from `offset` on (a tar member's data)."""

    def __init__(self, path: Path, offset: int, size: int):
        self._file = path.open("rb")
        self._file.seek(offset)
        self._left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._file.read(min(len(view), self._left))
        view[:len(data)] = data
        self._left -= len(data)
        return len(data)

    def close(self) -> None:
        self._file.close()
        super().close()


def _parse_manifest(manifest: object, where: str) -> dict[str, TemplateEntry]:
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else None
        raise HostSetupError(f"{where}: bundle format {got!r}, this selena reads format "
                             f"{BUNDLE_FORMAT}; export it again with this selena")
    if manifest.get("protocol") != PROTOCOL_VERSION:
        raise HostSetupError(
            f"{where}: its guest agent speaks protocol {manifest.get('protocol')!r} (selena "
            f"{manifest.get('selena_version')}), this selena speaks {PROTOCOL_VERSION}; "
            "export it again with this selena")
    templates = manifest.get("templates")
    if not isinstance(templates, dict) or not templates:
        raise HostSetupError(f"{where}: its manifest lists no templates")
    entries = {}
    for name, data in templates.items():
        if not isinstance(data, dict) or not isinstance(data.get("spec"), dict) \
                or not isinstance(data.get("files"), dict) or "/" in name or name[:1] in ".":
            raise HostSetupError(f"{where}: template {name!r} in its manifest is malformed")
        for rel in data["files"]:
            inside = rel.removeprefix(IMAGES_PREFIX)
            if "/" in inside or inside in ("", ".", ".."):
                raise HostSetupError(f"{where}: template {name}: bad file name {rel!r}")
        entries[name] = TemplateEntry(name, data["spec"], dict(data["files"]))
    return entries


# -- export -----------------------------------------------------------------------


def _check_export_target(target: Path) -> None:
    if target.is_dir():
        raise HostSetupError(f"{target} is a directory: give the bundle's file name")
    if not target.parent.is_dir():
        if target.parent.exists():
            raise HostSetupError(f"{target.parent} is not a directory: export elsewhere")
        raise HostSetupError(f"{target.parent} does not exist: create it or export elsewhere")


def export_bundle(templates: TemplateSet, target: Path, progress: Progress) -> Path:
    """Write `templates` as a bundle at `target` (written beside it, then
    renamed: a failed export leaves no bundle)."""
    _check_export_target(target)
    partial = target.with_name(target.name + ".partial")
    blobs = sorted({sha for e in templates.entries.values() for sha in e.files.values()})
    progress(f"export: {len(templates.entries)} templates ({', '.join(sorted(templates.entries))}"
             f"), {len(blobs)} files, {templates.origin}")
    data = json.dumps(templates.manifest(), indent=1, sort_keys=True).encode() + b"\n"
    try:
        with tarfile.open(partial, "w:", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, MANIFEST, data)
            for sha in blobs:
                with templates.open_file(sha) as src:
                    _add_stream(tar, f"blobs/{sha}", src)
        partial.rename(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    progress(f"export: wrote {target} ({target.stat().st_size >> 20} MB)")
    return target


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_stream(tar: tarfile.TarFile, name: str, src: IO[bytes]) -> None:
    """Tar needs the size first: a file's own, else that of a spooled copy."""
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    try:
        info.size = os.fstat(src.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(src, spool, 1 << 20)
            info.size = spool.tell()
            spool.seek(0)
            tar.addfile(info, spool)
        return
    tar.addfile(info, src)


# -- setup ------------------------------------------------------------------------


@dataclass
class Step:
    """One step: what it would do (empty: nothing, `done` says why) and how
    (`run` returns whether it changed anything: a build finds out only once
    it has built)."""

    name: str
    done: str = ""
    actions: list[str] = field(default_factory=list)
    run: Callable[[], bool] = lambda: False


@dataclass
class HostSetup:
    """The steps of `selena host setup` on this machine (files under `root`)."""

    runner: Runner = field(default_factory=Runner)
    root: Path = Path("/")
    progress: Progress = field(default=lambda msg: log.info("%s", msg))
    bundle: Path | None = None
    with_debian: bool = False
    # Step names left out (`--without`): e.g. analysis on a host with no
    # package source, whose sweeps then print asymptotic p-values, no plots.
    without: frozenset[str] = frozenset()
    # Tests give a TemplateBuilder stand-in; None builds for real.
    builder: object | None = None
    # What the probe (modules, files) sees: the real host.
    probe_root: Path = Path("/")
    find_module: Callable[[str], object] = importlib.util.find_spec
    in_venv: bool = sys.prefix != sys.base_prefix
    python: str = sys.executable
    # Who runs it: modprobe, systemctl and the files under `root` need root
    # (a staging --root too: the modules and services are this host's).
    euid: Callable[[], int] = os.geteuid

    def steps(self) -> list[Step]:
        return [self.analysis_step(), self.modules_step(), self.modules_load_step(),
                self.openvswitch_step(), self.templates_step()]

    def run(self, dry_run: bool = False) -> bool:
        """Every step that has something to do; whether any had. With
        `dry_run`, print what each would do and run nothing."""
        steps = self.steps()
        todo = [step.name for step in steps if step.actions]
        if todo and not dry_run and self.euid() != 0:
            # Said before the first step, not by the first tool refused
            # (modprobe's refusal read as modules missing from the kernel).
            raise HostSetupError(f"host setup changes this host ({', '.join(todo)}): run it as "
                                 "root (sudo selena host setup), or with --dry-run to see "
                                 "what it would do")
        changed = False
        for i, step in enumerate(steps, 1):
            head = f"[{i}/{len(steps)}] {step.name}"
            if not step.actions:
                self.progress(f"{head}: nothing to do ({step.done})")
                continue
            if dry_run:
                changed = True
                self.progress(f"{head}: would")
                for action in step.actions:
                    self.progress(f"      {action}")
                continue
            self.progress(f"{head}: {step.actions[0]}" + (
                f" (+{len(step.actions) - 1} more)" if len(step.actions) > 1 else ""))
            changed = step.run() or changed
        if not changed:
            self.progress("host setup: nothing to do, this host is set up")
        elif dry_run:
            self.progress("host setup: dry run, nothing was changed")
        else:
            self.progress("host setup: done (selena host doctor checks the host)")
        return changed

    # -- the steps --------------------------------------------------------------

    def analysis_step(self) -> Step:
        step = Step("analysis (scipy, matplotlib)")
        if "analysis" in self.without:
            step.done = "left out (--without analysis)"
            return step
        missing = [p for p in ANALYSIS_PACKAGES if self.find_module(p[0]) is None]
        if not missing:
            step.done = "scipy and matplotlib import"
            return step
        if self.in_venv:
            argv = [self.python, "-m", "pip", "install", "-q", *(p[1] for p in missing)]
        else:
            argv = ["apt-get", "install", "-y", "-q", *(p[2] for p in missing)]
        step.actions = ["run: " + " ".join(argv)]
        step.run = lambda: self._command(argv, "analysis", timeout=BUILD_TIMEOUT_S)
        return step

    def modules_step(self) -> Step:
        step = Step("kernel modules")
        mods = Modules(HostProbe(runner=self.runner, root=self.probe_root))
        todo = [m for m in HOST_MODULES if mods.state(m).state not in ("loaded", "built-in")]
        if not todo:
            step.done = f"{len(HOST_MODULES)} modules loaded or built in"
            return step
        step.actions = [f"run: modprobe {m}" for m in todo]

        def load() -> bool:
            failed = []
            for module in todo:
                result = self.runner.run(["modprobe", module], check=False)
                if not result.ok:
                    failed.append(module)
            if failed:
                raise HostSetupError(
                    f"kernel modules: modprobe failed for {', '.join(failed)} (kernel "
                    f"{mods.release}): install the running kernel's modules (apt-get install "
                    f"linux-image-{mods.release}) and run selena host setup again")
            return True
        step.run = load
        return step

    def modules_load_step(self) -> Step:
        step = Step("modules at boot")
        path = self.root / MODULES_LOAD_FILE
        text = ("# Written by selena host setup: the modules a selena Dom0 needs.\n"
                + "\n".join(HOST_MODULES) + "\n")
        try:
            current = path.read_text()
        except OSError:
            current = None
        if current == text:
            step.done = f"{path} lists them"
            return step
        step.actions = [f"write {path} ({len(HOST_MODULES)} modules)"]
        step.run = lambda: _write_atomic(path, text)
        return step

    def openvswitch_step(self) -> Step:
        step = Step("Open vSwitch")
        result = self._probe(["ovs-vsctl", "--timeout=10", "show"])
        if result is not None and result.ok:
            step.done = "ovs-vsctl show answers"
            return step
        commands = []
        if result is None:
            commands.append(["apt-get", "install", "-y", "-q", "openvswitch-switch"])
        commands.append(["systemctl", "enable", "--now", "openvswitch-switch"])
        step.actions = ["run: " + " ".join(c) for c in commands]

        def start() -> bool:
            for argv in commands:
                self._command(argv, "Open vSwitch", timeout=BUILD_TIMEOUT_S)
            check = self._probe(["ovs-vsctl", "--timeout=10", "show"])
            if check is None or not check.ok:
                raise HostSetupError("Open vSwitch: started, but ovs-vsctl show still fails: "
                                     "see journalctl -u openvswitch-switch")
            return True
        step.run = start
        return step

    def templates_step(self) -> Step:
        step = Step("guest templates")
        troot, iroot = self.root / TEMPLATES_UNDER, self.root / IMAGES_UNDER
        if self.bundle is None and self.builder is None and not \
                (project_root() / "guest-templates").is_dir():
            # Said before anything else runs, not after the modules.
            built_set(self.with_debian, self.progress, self.runner)
        wanted = self._wanted()
        if wanted is None:
            # Built on demand: the build itself is cached and quick when warm.
            which = [*BASE_TEMPLATES, *(["debian and those based on it"]
                                        if self.with_debian else [])]
            step.actions = [f"build {', '.join(which)} with the lab's template build "
                            f"(selena.templates.build; cached, quick when built) from "
                            f"{project_root()}",
                            f"install what differs from {self._state_path()} into {troot} "
                            f"(debian images into {iroot})"]
            step.run = lambda: self.install_templates(built_set(
                self.with_debian, self.progress, self.runner, self.builder))
            # A dry run must not build; a real one decides after building.
            return step
        todo = self._differs(wanted)
        if not todo:
            step.done = f"{', '.join(sorted(wanted.entries))} installed ({wanted.origin})"
            return step
        step.actions = [f"install {name} into {troot / name} ({wanted.origin})"
                        for name in todo]
        step.run = lambda: self.install_templates(wanted)
        return step

    # -- templates ------------------------------------------------------------

    def _wanted(self) -> TemplateSet | None:
        """The set to install when known without building (a bundle)."""
        if self.bundle is None:
            return None
        wanted = bundle_set(self.bundle)
        if self.with_debian and "debian" not in wanted.entries:
            raise HostSetupError(f"bundle {self.bundle} has no debian template: export it "
                                 "with --with debian")
        return wanted

    def _state_path(self) -> Path:
        return self.root / STATE_UNDER

    def _installed(self) -> dict[str, TemplateEntry]:
        try:
            data = json.loads(self._state_path().read_text())
            return _parse_manifest(data, str(self._state_path()))
        except (OSError, ValueError, HostSetupError):
            return {}

    def _differs(self, wanted: TemplateSet) -> list[str]:
        """The templates whose recorded install differs from `wanted`'s
        entry, or whose files are gone."""
        have = self._installed()
        troot, iroot = self.root / TEMPLATES_UNDER, self.root / IMAGES_UNDER
        todo = []
        for name, entry in sorted(wanted.entries.items()):
            old = have.get(name)
            present = (troot / name / "template.yaml").exists() and all(
                (iroot / rel.removeprefix(IMAGES_PREFIX) if rel.startswith(IMAGES_PREFIX)
                 else troot / name / rel).exists() for rel in entry.files)
            if old is None or old.as_dict() != entry.as_dict() or not present:
                todo.append(name)
        return todo

    def install_templates(self, wanted: TemplateSet) -> bool:
        """Stage every changed template (and its images) beside its
        destination, check each file's sha256, then rename into place (the
        templates step's install; the lab's Dom0 image build calls it with
        a set of its own)."""
        todo = self._differs(wanted)
        troot, iroot = self.root / TEMPLATES_UNDER, self.root / IMAGES_UNDER
        if not todo:
            self.progress(f"      templates: nothing to do ({', '.join(sorted(wanted.entries))} "
                          "installed)")
            return False
        try:
            troot.mkdir(parents=True, exist_ok=True)
            iroot.mkdir(parents=True, exist_ok=True)
            stage = Path(tempfile.mkdtemp(prefix=".setup-", dir=troot))
            image_stage = Path(tempfile.mkdtemp(prefix=".setup-", dir=iroot))
        except OSError as exc:
            raise HostSetupError(f"templates: cannot write under {self.root} ({exc.strerror}): "
                                 "run selena host setup as root") from None
        try:
            images: dict[str, Path] = {}
            for name in todo:
                self.progress(f"      staging {name}")
                self._stage(wanted, wanted.entries[name], stage / name, image_stage, images)
            for image, staged in images.items():
                staged.rename(iroot / image)
            for name in todo:
                old = troot / name
                if old.exists():
                    old.rename(stage / f"{name}.old")
                (stage / name).rename(old)
                self.progress(f"      installed {name} ({troot / name})")
            have = self._installed()
            have.update({n: wanted.entries[n] for n in todo})
            state = TemplateSet(have, wanted.open_file, wanted.origin).manifest()
            _write_atomic(self._state_path(), json.dumps(state, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            raise HostSetupError(f"templates: {exc}; nothing was installed from this run's "
                                 "staging") from None
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            shutil.rmtree(image_stage, ignore_errors=True)
        return True

    def _stage(self, wanted: TemplateSet, entry: TemplateEntry, tdir: Path,
               image_stage: Path, images: dict[str, Path]) -> None:
        iroot = self.root / IMAGES_UNDER
        tdir.mkdir()
        spec = dict(entry.spec)
        for key in ("kernel", "ramdisk", "disk"):
            value = spec.get(key)
            if isinstance(value, str) and value.startswith(IMAGES_PREFIX):
                # Where the file really is: the planner reads these paths.
                spec[key] = str(iroot / value.removeprefix(IMAGES_PREFIX))
        spec["protocol"] = PROTOCOL_VERSION
        spec.setdefault("selena_version", _selena_version())
        for rel, sha in sorted(entry.files.items()):
            if rel.startswith(IMAGES_PREFIX):
                image = rel.removeprefix(IMAGES_PREFIX)
                final = iroot / image
                if image in images or (final.exists() and sha256_file(final) == sha):
                    continue
                dest = image_stage / image
                images[image] = dest
            else:
                dest = tdir / rel
            self._copy_checked(wanted, sha, dest, f"{entry.name}: {rel}")
        (tdir / "template.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))

    @staticmethod
    def _copy_checked(wanted: TemplateSet, sha: str, dest: Path, what: str) -> None:
        h = hashlib.sha256()
        with wanted.open_file(sha) as src, dest.open("wb") as out:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
        if h.hexdigest() != sha:
            raise HostSetupError(f"{wanted.origin}: {what} does not match its sha256 "
                                 f"({h.hexdigest()[:12]}..., manifest {sha[:12]}...): a "
                                 "damaged copy; copy or export it again")

    # -- commands ---------------------------------------------------------------

    def _probe(self, argv: list[str]) -> CommandResult | None:
        """A read-only query's result; None when the tool is not installed
        (a query that hangs counts as failed, not as missing)."""
        try:
            return self.runner.run(argv, check=False, timeout=30)
        except CommandTimeout:
            return CommandResult(tuple(argv), -1, "", "timed out", 30.0)
        except CommandError:
            return None

    def _command(self, argv: list[str], what: str, timeout: float) -> bool:
        try:
            self.runner.run(argv, timeout=timeout)
            return True
        except CommandError as exc:
            said = exc.stderr.strip().splitlines()
            raise HostSetupError(f"{what}: {' '.join(argv)} failed"
                                 + (f": {said[-1]}" if said else "")) from None


def _write_atomic(path: Path, text: str) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(text)
        partial.rename(path)
        return True
    except OSError as exc:
        raise HostSetupError(f"cannot write {path} ({exc.strerror}): run selena host setup "
                             "as root") from None


def _selena_version() -> str:
    from selena import __version__
    return __version__


def export(target: Path, *, installed: bool = False, root: Path = Path("/"),
           with_debian: bool = False, progress: Progress = lambda msg: None,
           runner: Runner | None = None, builder: object | None = None) -> Path:
    """`selena host export`: the templates built from this tree (or, with
    `installed`, those installed under `root`) as a bundle at `target`. The
    target is checked first: a bad one is refused before minutes of builds."""
    _check_export_target(target)
    templates = installed_set(root, with_debian) if installed else \
        built_set(with_debian, progress, runner or Runner(), builder)
    return export_bundle(templates, target, progress)


__all__ = ["ANALYSIS_PACKAGES", "BASE_TEMPLATES", "HostSetup", "Step", "TemplateEntry",
           "TemplateSet", "bundle_set", "built_set", "export", "export_bundle", "installed_set",
           "sha256_file"]
