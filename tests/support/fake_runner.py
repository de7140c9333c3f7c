"""FakeRunner: a Runner for unit tests that records every argv and answers
from a script. A test double, so it lives with the tests, not in the package
(moved from selena.runner)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from selena.errors import CommandError
from selena.runner import (
    DEFAULT,
    DEFAULT_STREAM_TIMEOUT_S,
    CommandResult,
    Process,
    Runner,
    _Default,
)


class _ScriptedProcess:
    """FakeRunner's spawned process: prints a script, then ends (or, if it
    stays up, ends only when killed, as QEMU running a lab does)."""

    def __init__(self, output: str, stays_up: bool = False):
        self.output = output
        self.stays_up = stays_up
        self.killed = threading.Event()

    def lines(self) -> Iterator[str]:
        yield from self.output.splitlines(keepends=True)
        if self.stays_up:
            self.killed.wait()

    def wait(self, timeout: float | None = None) -> int | None:
        return 0

    def kill(self) -> None:
        self.killed.set()


@dataclass
class FakeRunner(Runner):
    """A runner for unit tests: records argv lists and answers from a script.

    `responses` maps a command prefix (tuple of leading argv items) to the
    result to give; unmatched commands succeed with empty output.
    """

    calls: list[tuple[str, ...]] = field(default_factory=list)
    responses: dict[tuple[str, ...], tuple[int, str, str]] = field(default_factory=dict)
    # Prefixes whose spawned process stays up after its output until killed.
    staying_up: set[tuple[str, ...]] = field(default_factory=set)

    def respond(self, prefix: Sequence[str], returncode: int = 0, stdout: str = "",
                stderr: str = "", *, stays_up: bool = False) -> None:
        self.responses[tuple(prefix)] = (returncode, stdout, stderr)
        if stays_up:
            self.staying_up.add(tuple(prefix))

    def _prefix(self, args: tuple[str, ...]) -> tuple[str, ...] | None:
        best: tuple[str, ...] | None = None
        for prefix in self.responses:
            if args[: len(prefix)] == prefix and (best is None or len(prefix) > len(best)):
                best = prefix
        return best

    def _answer(self, args: tuple[str, ...]) -> tuple[int, str, str]:
        best = self._prefix(args)
        return self.responses[best] if best is not None else (0, "", "")

    def run(self, argv: Sequence[str], *, check: bool = True, input: str | None = None,
            timeout: float | None | _Default = DEFAULT, env: Mapping[str, str] | None = None,
            cwd: str | Path | None = None) -> CommandResult:
        args = tuple(str(a) for a in argv)
        self.calls.append(args)
        if args == ("tc", "-batch", "-"):
            # Recorded as the tc commands it runs, after the batch itself.
            self.calls += [("tc", *line.split()) for line in (input or "").splitlines()]
        rc, out, err = self._answer(args)
        result = CommandResult(args, rc, out, err, 0.0)
        self._record(result)
        if check and rc != 0:
            raise CommandError(list(args), rc, err)
        return result

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None], *,
               check: bool = True, timeout: float | None = DEFAULT_STREAM_TIMEOUT_S,
               env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
               stdin: int | None = subprocess.DEVNULL,
               stop_grace_s: float = 0.0) -> CommandResult:
        result = self.run(argv, check=check)
        for line in result.stdout.splitlines(keepends=True):
            on_line(line)
        return result

    def spawn(self, argv: Sequence[str], *, cwd: str | Path | None = None) -> Process:
        """A process whose output is the scripted stdout for argv."""
        stays_up = self._prefix(tuple(str(a) for a in argv)) in self.staying_up
        return _ScriptedProcess(self.run(argv, check=False).stdout, stays_up)

    def daemon(self, argv: Sequence[str], log_file: Path) -> int:
        """Recorded like run(); appends the scripted stdout to log_file (as
        the real daemon's output is appended)."""
        result = self.run(argv, check=False)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "a") as out:
            out.write(result.stdout)
        return 0
