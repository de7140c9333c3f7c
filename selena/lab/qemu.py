"""Boots the lab (patched Xen + Debian Dom0 in QEMU) and runs commands in Dom0.

The project tree is shared into Dom0 over virtio-9p at /selena-src, so results
written there come back. A command is handed over as a script in
build/lab-run/<id>/cmd.sh; Dom0's init runs it between two console markers and
writes its exit status next to it, then powers off (Xen stops, QEMU exits).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shlex
import shutil
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from selena.errors import CommandTimeout, LabError
from selena.lab.build import LabArtefacts, LabBuilder
from selena.paths import cache_dir, project_root
from selena.runner import Runner

log = logging.getLogger(__name__)

QEMU = "qemu-system-x86_64"
QEMU_MEMORY_MB = 4096
DOM0_MEMORY_MB = 1536
BEGIN = "SELENA-LAB-BEGIN"
EXIT = "SELENA-LAB-EXIT "
FAIL = "SELENA-LAB-FAIL "
CONSOLE_TAIL_LINES = 40


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
    argv = [
        QEMU, "-machine", "q35", "-accel", accel,
        # -cpu max makes the PV Dom0 fault at its first instructions.
        "-cpu", "host" if accel == "kvm" else "qemu64",
        "-m", str(memory_mb), "-smp", "2", "-nographic", "-no-reboot",
        "-nic", "none",
        "-kernel", str(art.xen),
        "-append", (f"console=com1 dom0_mem={dom0_mb}M,max:{dom0_mb}M "
                    "loglvl=warning guest_loglvl=warning"),
        "-initrd", f"{art.kernel} {dom0_cmdline},{art.dom0_initrd}",
        "-virtfs", f"local,path={share},mount_tag=selena,security_model=none,id=selena",
    ]
    if not interactive:
        argv += ["-serial", "stdio", "-monitor", "none", "-display", "none"]
        argv.remove("-nographic")
    return argv


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
                 progress: Callable[[str], None] | None = None):
        self.runner = runner or Runner()
        self._artefacts = artefacts
        self.progress = progress or (lambda msg: log.info("%s", msg))
        self.share = project_root()

    @property
    def artefacts(self) -> LabArtefacts:
        if self._artefacts is None:
            self._artefacts = LabBuilder(self.runner, self.progress).build()
        return self._artefacts

    def run(self, command: Sequence[str] | str, *, tdf: float | None = None,
            timeout: float = 1800.0,
            on_output: Callable[[str], None] | None = None) -> LabResult:
        """Boot the lab, run `command` in Dom0 (cwd /selena-src), power off.

        Raises LabError with the tail of the Xen/Dom0 console when the lab
        fails to boot, Dom0 dies, or the time limit passes; QEMU is always
        killed on the way out.
        """
        art = self.artefacts
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        run_dir = self.share / "build" / "lab-run" / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "cmd.sh").write_text(command_script(command, tdf))
        accel = "kvm" if kvm_usable() else "tcg"
        argv = qemu_argv(art, self.share, run_id, accel=accel)
        tail: deque[str] = deque(maxlen=CONSOLE_TAIL_LINES)
        output: list[str] = []
        state = {"in_command": False, "rc": None, "fail": None, "begin": None}
        start = time.monotonic()

        def on_line(raw: str) -> None:
            line = raw.replace("\r", "")
            tail.append(line.rstrip("\n"))
            text = line.rstrip("\n")
            if state["rc"] is not None:
                return
            if text.startswith(FAIL):
                state["fail"] = text[len(FAIL):]
            elif text.strip() == BEGIN:
                state["in_command"] = True
                state["begin"] = time.monotonic()
            elif state["in_command"] and text.startswith(EXIT):
                state["rc"] = int(text[len(EXIT):].strip() or 1)
                state["in_command"] = False
            elif state["in_command"]:
                output.append(line)
                if on_output:
                    on_output(line)

        try:
            with one_lab_at_a_time(self.progress):
                self.progress(f"booting the lab ({accel}); command: {command!r}")
                start = time.monotonic()  # boot time excludes waiting for the lock
                self.runner.stream(argv, on_line, check=False, timeout=timeout)
        except CommandTimeout as exc:
            raise LabError(self._explain(f"timed out after {timeout:.0f} s", tail)) from exc
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
        total = time.monotonic() - start
        if state["fail"]:
            raise LabError(self._explain(f"Dom0 failed: {state['fail']}", tail))
        if state["rc"] is None:
            where = "during the command" if state["begin"] else "before Dom0 ran the command"
            raise LabError(self._explain(f"the lab stopped {where} (Xen or Dom0 crashed?)",
                                         tail))
        boot = (state["begin"] or start) - start
        return LabResult(int(state["rc"]), "".join(output), boot, total, list(tail))

    def shell(self) -> int:
        """An interactive Dom0 shell on this terminal; exit it to power off."""
        art = self.artefacts
        argv = qemu_argv(art, self.share, None, accel="kvm" if kvm_usable() else "tcg",
                         interactive=True)
        with one_lab_at_a_time(self.progress):
            return self.runner.interactive(argv)

    @staticmethod
    def _explain(what: str, tail: deque[str]) -> str:
        shown = "\n".join(f"  | {line}" for line in tail)
        return f"lab: {what}; last console lines:\n{shown}"


def run_in_lab(command: Sequence[str] | str, tdf: float | None = None, timeout: float = 1800.0,
               on_output: Callable[[str], None] | None = None) -> LabResult:
    """Run `command` in the lab's Dom0 (cwd /selena-src, SELENA_TDF set if tdf).

    Builds the lab first if needed (cached). Returns the command's exit status
    and output; raises LabError if the lab itself fails.
    """
    return Lab().run(command, tdf=tdf, timeout=timeout, on_output=on_output)
