"""The single door to the shell.

Every external command selena runs (xl, selena-tdf, ip, tc, ovs-vsctl, qemu,
apt-get, ...) goes through a Runner so it is logged with its duration, can be
recorded for replay, and can be swapped for a test double (tests/support/
fake_runner.py's FakeRunner) in unit tests that assert the exact commands
generated.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from selena.errors import CommandError, CommandTimeout

log = logging.getLogger(__name__)

# The longest a command may run unless its caller says otherwise: every Dom0
# tool (xl, ovs-vsctl, ip, tc, selena-tdf) answers in seconds, so one that
# takes minutes has hung and must not hang selena with it. Callers of slow
# commands pass a longer limit; `timeout=None` means none at all.
DEFAULT_TIMEOUT_S = 120.0
# Image and lab build steps (make, debootstrap, apt, mkfs) take minutes.
BUILD_TIMEOUT_S = 3600.0
# Streamed commands (builds a person watches, which may take hours on two
# emulated CPUs) without a limit of their own: only a hang is cut short.
DEFAULT_STREAM_TIMEOUT_S = 8 * 3600.0


class _Default:
    """The `timeout` argument not given: the runner's `timeout` applies."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass
class Runner:
    """Runs commands for real. `history` keeps every result, in order."""

    dry_run: bool = False
    history: list[CommandResult] = field(default_factory=list)
    # Seconds a run() may take when its caller gives no timeout (None: no limit).
    timeout: float | None = DEFAULT_TIMEOUT_S

    def limit(self, timeout: float | None | _Default) -> float | None:
        """The time limit of one command: the caller's, else the runner's."""
        return self.timeout if isinstance(timeout, _Default) else timeout

    def run(
        self,
        argv: Sequence[str],
        *,
        check: bool = True,
        input: str | None = None,
        timeout: float | None | _Default = DEFAULT,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> CommandResult:
        """Run argv to completion, capturing output.

        With check=True a non-zero exit raises CommandError carrying the
        command, status and the tail of stderr: errors are never only logged.
        A command still running after `timeout` seconds (default: the
        runner's `timeout`, DEFAULT_TIMEOUT_S) is killed and CommandTimeout
        raised, whatever `check` says.
        """
        args = tuple(str(a) for a in argv)
        timeout = self.limit(timeout)
        if self.dry_run:
            log.info("dry-run: %s", " ".join(args))
            result = CommandResult(args, 0, "", "", 0.0)
            self.history.append(result)
            return result
        start = time.monotonic()
        try:
            proc = subprocess.run(
                args,
                input=input,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=_merged_env(env),
                cwd=cwd,
            )
        except OSError as exc:     # not found, not executable, a PATH entry unreadable
            raise CommandError(list(args), None, "", f"cannot start: {exc.strerror}") from exc
        except subprocess.TimeoutExpired as exc:
            stderr = _text(exc.stderr)
            raise CommandTimeout(list(args), None, stderr,
                                 f"timed out after {timeout:g} s (killed)") from exc
        result = CommandResult(
            args, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start
        )
        self._record(result)
        if check and proc.returncode != 0:
            raise CommandError(list(args), proc.returncode, proc.stderr)
        return result

    def stream(
        self,
        argv: Sequence[str],
        on_line: Callable[[str], None],
        *,
        check: bool = True,
        timeout: float | None = DEFAULT_STREAM_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        stdin: int | None = subprocess.DEVNULL,
        stop_grace_s: float = 0.0,
    ) -> CommandResult:
        """Run argv, handing each output line (stdout and stderr merged) to on_line.

        For long-running commands whose progress a person watches. The whole
        output is also kept in the result. On timeout (DEFAULT_STREAM_TIMEOUT_S
        unless given; None: none) the process group is killed so nothing is
        left behind.
        """
        args = tuple(str(a) for a in argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=_merged_env(env),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as exc:     # not found, not executable, a PATH entry unreadable
            raise CommandError(list(args), None, "", f"cannot start: {exc.strerror}") from exc
        assert proc.stdout is not None
        lines: list[str] = []
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        pending = b""
        try:
            while True:
                remaining = None if timeout is None else timeout - (time.monotonic() - start)
                if remaining is not None and remaining <= 0:
                    _kill_group(proc)
                    tail = "".join(lines[-20:])
                    raise CommandTimeout(list(args), None, tail, f"timed out after {timeout} s")
                if not sel.select(timeout=remaining if remaining is None else min(remaining, 1.0)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    line = raw.decode("utf-8", "replace") + "\n"
                    lines.append(line)
                    on_line(line)
            if pending:
                line = pending.decode("utf-8", "replace")
                lines.append(line)
                on_line(line)
            proc.wait()
        except BaseException:
            # Ctrl-C or a failing callback must not leave the child running;
            # it gets a SIGTERM and `stop_grace_s` to tear down what it holds
            # (`selena lab run`'s QEMU runs in a session of its own, which a
            # SIGKILL of the child's group would leave behind).
            _stop_group(proc, stop_grace_s)
            raise
        finally:
            sel.close()
            proc.stdout.close()
        output = "".join(lines)
        result = CommandResult(args, proc.returncode, output, "", time.monotonic() - start)
        self._record(result)
        if check and proc.returncode != 0:
            raise CommandError(list(args), proc.returncode, output)
        return result

    def spawn(self, argv: Sequence[str], *, cwd: str | Path | None = None) -> Process:
        """Start a long-lived process (e.g. the lab's QEMU) in its own process
        group, stdout and stderr merged into one pipe the caller reads. It is
        killed when this process dies, however that happens."""
        args = tuple(str(a) for a in argv)
        log.debug("spawning %s", " ".join(args))
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True,
                                    preexec_fn=_die_with_parent)
        except OSError as exc:     # not found, not executable, a PATH entry unreadable
            raise CommandError(list(args), None, "", f"cannot start: {exc.strerror}") from exc
        self.history.append(CommandResult(args, 0, "", "", 0.0))
        return _SpawnedProcess(proc)

    def daemon(self, argv: Sequence[str], log_file: Path) -> int:
        """Start a process that outlives this one (its own session, output to
        log_file); its pid. Whoever starts one records it and stops it."""
        args = tuple(str(a) for a in argv)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(log_file, "ab") as out:
                proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:     # not found, not executable, a PATH entry unreadable
            raise CommandError(list(args), None, "", f"cannot start: {exc.strerror}") from exc
        self._record(CommandResult(args, 0, f"pid {proc.pid}", "", 0.0))
        return proc.pid

    def interactive(self, argv: Sequence[str], *, cwd: str | Path | None = None) -> int:
        """Run argv attached to this terminal (e.g. a shell); returns its status."""
        args = tuple(str(a) for a in argv)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(args, cwd=cwd)
        except OSError as exc:     # not found, not executable, a PATH entry unreadable
            raise CommandError(list(args), None, "", f"cannot start: {exc.strerror}") from exc
        try:
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        self._record(CommandResult(args, rc, "", "", time.monotonic() - start))
        return rc

    def _record(self, result: CommandResult) -> None:
        self.history.append(result)
        log.debug(
            "ran %s -> %d in %.3f s", " ".join(result.argv), result.returncode, result.duration
        )


class Process(Protocol):
    """A spawned process: its merged output, its end, and a way to stop it."""

    def lines(self) -> Iterator[str]: ...

    def wait(self, timeout: float | None = None) -> int | None: ...

    def kill(self) -> None: ...


class _SpawnedProcess:
    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc

    def lines(self) -> Iterator[str]:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            yield raw.decode("utf-8", "replace")

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        _kill_group(self.proc)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux prctl)."""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _merged_env(extra: Mapping[str, str] | None) -> dict[str, str] | None:
    if extra is None:
        return None
    env = dict(os.environ)
    env.update(extra)
    return env


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the child's process group, then SIGKILL after `grace_s`
    (at once when 0)."""
    if grace_s > 0:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    _kill_group(proc)
