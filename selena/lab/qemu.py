"""Boots the lab (patched Xen + Debian Dom0 in QEMU) and runs commands in Dom0.

The project tree is shared into Dom0 over virtio-9p at /selena-src, so results
written there come back. Commands are handed over as job scripts in
build/lab-run/<id>/jobs/; Dom0's init runs them one after the other, each
between two console markers, and powers off (Xen stops, QEMU exits) once
asked to stop. A session keeps one boot for many commands.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shlex
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from selena.errors import LabError
from selena.lab.build import LabArtefacts, LabBuilder
from selena.paths import cache_dir, project_root
from selena.runner import Process, Runner
from selena.signals import TerminateAsInterrupt, sigint_deferred

log = logging.getLogger(__name__)

QEMU = "qemu-system-x86_64"
QEMU_MEMORY_MB = 4096
DOM0_MEMORY_MB = 1536
READY = "SELENA-LAB-READY"
BEGIN = "SELENA-LAB-BEGIN"
EXIT = "SELENA-LAB-EXIT "
FAIL = "SELENA-LAB-FAIL "
CONSOLE_TAIL_LINES = 40
BOOT_TIMEOUT_S = 600.0
POWER_OFF_S = 60.0


@dataclass(frozen=True)
class LabResult:
    returncode: int
    output: str                 # what the command printed (Dom0 console between markers)
    boot_seconds: float         # QEMU start to the command starting in Dom0
    total_seconds: float
    console_tail: list[str] = field(default_factory=list)


def kvm_usable() -> bool:
    """KVM only helps when the CPU exposes virtualization to this machine."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " vmx" in flags or " svm" in flags


def qemu_argv(art: LabArtefacts, share: Path, run_id: str | None, *,
              accel: str = "tcg", memory_mb: int = QEMU_MEMORY_MB,
              dom0_mb: int = DOM0_MEMORY_MB, interactive: bool = False) -> list[str]:
    dom0_cmdline = "console=hvc0 earlyprintk=xen rdinit=/init quiet"
    if run_id:
        dom0_cmdline += f" selena.run={run_id}"
    for path in (art.kernel, art.dom0_initrd):
        if "," in str(path):
            raise LabError(f"lab artefact path must not contain a comma: {path}")
    xen_cmdline = (f"console=com1 dom0_mem={dom0_mb}M,max:{dom0_mb}M "
                   "loglvl=warning guest_loglvl=warning")
    if art.xen_args:
        xen_cmdline += f" {art.xen_args}"
    argv = [
        QEMU, "-machine", "q35", "-accel", accel,
        # -cpu max makes the PV Dom0 fault at its first instructions.
        "-cpu", "host" if accel == "kvm" else "qemu64",
        "-m", str(memory_mb), "-smp", "2", "-nographic", "-no-reboot",
        "-nic", "none",
        "-kernel", str(art.xen),
        "-append", xen_cmdline,
        "-initrd", f"{art.kernel} {dom0_cmdline},{art.dom0_initrd}",
        "-virtfs", f"local,path={share},mount_tag=selena,security_model=none,id=selena",
    ]
    # The debian templates' kernels and disk images (shared by every guest,
    # never copied into Dom0's RAM), and scipy and matplotlib for Dom0's
    # Python (LabBuilder.analysis).
    argv += _readonly_share(art.images, "selena-images")
    argv += _readonly_share(art.analysis, "selena-analysis")
    if not interactive:
        argv += ["-serial", "stdio", "-monitor", "none", "-display", "none"]
        argv.remove("-nographic")
    return argv


def _readonly_share(path: Path | None, tag: str) -> list[str]:
    """QEMU's arguments sharing `path` read-only as 9p `tag` (none for None)."""
    if path is None:
        return []
    if "," in str(path):
        raise LabError(f"lab artefact path must not contain a comma: {path}")
    return ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,readonly=on,"
            f"id={tag}"]


def command_script(command: Sequence[str] | str, tdf: float | None) -> str:
    """The script Dom0's init runs: environment, then the command."""
    lines = ["#!/bin/sh", "cd /selena-src"]
    if tdf is not None:
        lines.append(f"export SELENA_TDF={shlex.quote(_tdf_text(tdf))}")
    lines.append("export SELENA_LAB=1")
    if isinstance(command, str):
        lines.append(command)
    else:
        lines.append(" ".join(shlex.quote(c) for c in command))
    return "\n".join(lines) + "\n"


def _tdf_text(tdf: float) -> str:
    return f"{tdf:g}"


@contextlib.contextmanager
def one_lab_at_a_time(progress: Callable[[str], None]):
    """Hold the machine-wide lab lock while a lab runs.

    Two emulated machines on a small host starve each other, and the time
    measurements the lab exists for (clock rates, RTTs) then fail; so labs
    queue instead of running side by side.
    """
    lock_path = cache_dir() / "lab.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another lab is running; waiting for {lock_path}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class Lab:
    """One lab: its artefacts and how to boot them."""

    def __init__(self, runner: Runner | None = None, artefacts: LabArtefacts | None = None,
                 progress: Callable[[str], None] | None = None,
                 memory_mb: int = QEMU_MEMORY_MB,
                 variants: Sequence[tuple[str, tuple[str, ...], str]] = (),
                 with_debian: bool = False):
        self.runner = runner or Runner()
        # The debian templates' images are built only when asked for (or
        # when variants need them).
        self.with_debian = with_debian
        # Debian package variants to build with the artefacts (images.scenario_variants).
        self.variants = tuple(variants)
        # The emulated machine's RAM; Dom0 keeps DOM0_MEMORY_MB, guests get the rest.
        self.memory_mb = memory_mb
        self._artefacts = artefacts
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.share = project_root()

    @property
    def artefacts(self) -> LabArtefacts:
        if self._artefacts is None:
            self._artefacts = LabBuilder(self.runner, self.progress).build(
                self.variants, with_debian=self.with_debian)
        return self._artefacts

    def run(self, command: Sequence[str] | str, *, tdf: float | None = None,
            timeout: float = 1800.0,
            on_output: Callable[[str], None] | None = None) -> LabResult:
        """Boot the lab, run `command` in Dom0 (cwd /selena-src), power off.

        Raises LabError with the tail of the Xen/Dom0 console when the lab
        fails to boot, Dom0 dies, or the time limit passes; QEMU is always
        killed on the way out.
        """
        with self.session(boot_timeout=timeout) as session:
            return session.run(command, tdf=tdf, timeout=timeout, on_output=on_output)

    def session(self, boot_timeout: float = BOOT_TIMEOUT_S) -> LabSession:
        """A booted lab that runs command after command (tests and demos
        share one boot); use as a context manager."""
        return LabSession(self, boot_timeout)

    def shell(self) -> int:
        """An interactive Dom0 shell on this terminal; exit it to power off."""
        art = self.artefacts
        argv = qemu_argv(art, self.share, None, accel="kvm" if kvm_usable() else "tcg",
                         memory_mb=self.memory_mb, interactive=True)
        with one_lab_at_a_time(self.progress):
            return self.runner.interactive(argv)

    @staticmethod
    def _explain(what: str, tail: deque[str]) -> str:
        shown = "\n".join(f"  | {line}" for line in tail)
        return f"lab: {what}; last console lines:\n{shown}"


class LabSession:
    """A lab booted once, running job after job in Dom0.

    Each job is a script under build/lab-run/<id>/jobs/ on the 9p share;
    Dom0's init runs them in order, each between console markers, removes
    what a job left behind (`selena clean`, leftover guests) before the next,
    and powers off once `stop` exists and no job is left. The session holds
    the machine-wide lab lock from boot to power-off.
    """

    def __init__(self, lab: Lab, boot_timeout: float = BOOT_TIMEOUT_S):
        self.lab = lab
        self.boot_timeout = boot_timeout
        self.run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.run_dir = lab.share / "build" / "lab-run" / self.run_id
        self._cond = threading.Condition()
        self._tail: deque[str] = deque(maxlen=CONSOLE_TAIL_LINES)
        self._ready = False
        self._ended = False
        self._fail: str | None = None
        self._current: str | None = None
        self._outputs: dict[str, list[str]] = {}
        self._on_output: Callable[[str], None] | None = None
        self._status: dict[str, int] = {}
        self._begun: dict[str, float] = {}
        self._jobs = 0
        self._proc: Process | None = None
        self._stack = contextlib.ExitStack()
        self.boot_seconds = 0.0
        self.broken: str | None = None

    def __enter__(self) -> LabSession:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        art = self.lab.artefacts
        (self.run_dir / "jobs").mkdir(parents=True)
        accel = "kvm" if kvm_usable() else "tcg"
        self._stack.enter_context(one_lab_at_a_time(self.lab.progress))
        # A `kill` or a closed terminal powers the lab off as Ctrl-C does:
        # killed by SIGTERM, selena left QEMU running without it.
        self._stack.enter_context(TerminateAsInterrupt())
        self._stack.callback(self._remove_run_dir)
        self.lab.progress(f"booting the lab ({accel})")
        start = time.monotonic()
        self._proc = self.lab.runner.spawn(qemu_argv(art, self.lab.share, self.run_id,
                                                     accel=accel,
                                                     memory_mb=self.lab.memory_mb))
        self._stack.callback(self._stop_qemu)
        threading.Thread(target=self._read, name="lab-console", daemon=True).start()
        with self._cond:
            self._cond.wait_for(lambda: self._ready or self._ended or self._fail is not None,
                                self.boot_timeout)
        if self._fail is not None:
            self._broken(f"Dom0 failed: {self._fail}")
        if not self._ready:
            self._broken("the lab stopped before Dom0 ran the command (Xen or Dom0 crashed?)"
                         if self._ended else f"timed out after {self.boot_timeout:.0f} s "
                                             "waiting for Dom0")
        self.boot_seconds = time.monotonic() - start

    def run(self, command: Sequence[str] | str, *, tdf: float | None = None,
            timeout: float = 1800.0,
            on_output: Callable[[str], None] | None = None) -> LabResult:
        """Run `command` in Dom0 (cwd /selena-src, SELENA_TDF set if tdf)."""
        if self.broken:
            raise LabError(f"lab: this session is broken ({self.broken})")
        self._jobs += 1
        name = f"{self._jobs:04d}"
        started = time.monotonic()
        with self._cond:
            self._on_output = on_output
        job = self.run_dir / "jobs" / f"{name}.sh"
        job.with_suffix(".tmp").write_text(command_script(command, tdf))
        job.with_suffix(".tmp").rename(job)       # whole, or not at all
        with self._cond:
            self._cond.wait_for(lambda: name in self._status or self._ended
                                or self._fail is not None, timeout)
            output = "".join(self._outputs.get(name, []))
            rc = self._status.get(name)
        if rc is None:
            if self._fail is not None:
                self._broken(f"Dom0 failed: {self._fail}")
            if self._ended:
                self._broken("the lab stopped during the command (Xen or Dom0 crashed?)")
            self._broken(f"timed out after {timeout:.0f} s")
        boot = self.boot_seconds if self._jobs == 1 else 0.0
        return LabResult(rc, output, boot, time.monotonic() - started + boot, list(self._tail))

    def close(self) -> None:
        """Power the lab off (QEMU is killed if it does not stop in time)."""
        if self.run_dir.is_dir():
            (self.run_dir / "stop").touch()
        self._stack.close()

    def _remove_run_dir(self) -> None:
        # A signal in the middle of it would leave the run's directory half
        # removed (stop, jobs) for good: noted, not obeyed, for that long.
        with sigint_deferred(self.lab.progress, "removing the lab's run directory; "
                                                "Ctrl-C is ignored until that is done"):
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def _stop_qemu(self) -> None:
        if self._proc is None:
            return
        with self._cond:
            self._cond.wait_for(lambda: self._ended, 0 if self.broken else POWER_OFF_S)
        self._proc.kill()
        self._proc.wait()

    def _broken(self, what: str) -> NoReturn:
        self.broken = what
        if self._proc is not None:
            self._proc.kill()
        raise LabError(Lab._explain(what, self._tail))

    def _read(self) -> None:
        assert self._proc is not None
        for raw in self._proc.lines():
            self._line(raw.replace("\r", "").rstrip("\n"))
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def _line(self, text: str) -> None:
        callback = None
        with self._cond:
            self._tail.append(text)
            words = text.split()
            if text.startswith(FAIL):
                self._fail = text[len(FAIL):]
            elif text.strip() == READY:
                self._ready = True
            elif len(words) == 2 and words[0] == BEGIN and self._current is None:
                self._current = words[1]
                self._outputs[self._current] = []
            elif len(words) == 3 and words[0] == EXIT.strip() and words[1] == self._current:
                self._status[words[1]] = int(words[2]) if words[2].isdigit() else 1
                self._current = None
            elif self._current is not None:
                self._outputs[self._current].append(text + "\n")
                callback = self._on_output
            else:
                return
            self._cond.notify_all()
        if callback is not None:
            callback(text + "\n")


def run_in_lab(command: Sequence[str] | str, tdf: float | None = None, timeout: float = 1800.0,
               on_output: Callable[[str], None] | None = None) -> LabResult:
    """Run `command` in the lab's Dom0 (cwd /selena-src, SELENA_TDF set if tdf).

    Builds the lab first if needed (cached). Returns the command's exit status
    and output; raises LabError if the lab itself fails.
    """
    return Lab().run(command, tdf=tdf, timeout=timeout, on_output=on_output)
