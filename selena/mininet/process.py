"""Mininet's `node.popen(...)` and `node.pexec(...)` on selena: a command in
the node's guest, started at once, as a subprocess.Popen-like object
(poll, wait, communicate, terminate, kill, send_signal, returncode).

`p.stdout` and `p.stderr` are pipes in Dom0 fed with the guest's output
as the control channel collects it (a chunk per write of the command's,
while it runs), so they can be read line by line, polled (fileno) and
handed to Mininet's pmonitor (selena.mininet.util); they end when the
command does. No stdin: a guest command reads none. `timeout=` of wait and
communicate is in real seconds, as subprocess's; the command's own limit is
the experiment's (virtual)."""

from __future__ import annotations

import dataclasses
import os
import queue
import shlex
import signal as signals
import threading
from typing import IO, Any

from selena.control.channel import CommandHandle, CommandResult
from selena.errors import ArgumentError, ExperimentError
from selena.model import caller_location
from selena.relay import TextPieces

# subprocess's code for a program that could not be started (a shell's 127).
NOT_STARTED = 127


class TimeoutExpired(ExperimentError):
    """wait() or communicate() timed out; the command goes on (as subprocess's)."""


def argv_of(args: tuple[object, ...], shell: bool, what: str) -> str | tuple[str, ...]:
    """Mininet's popen arguments as a command: a list is the argv, a string
    is split on whitespace unless shell=True (then one shell line), several
    arguments are the argv."""
    if not args:
        raise ArgumentError(caller_location(), f"{what}: give a command")
    if len(args) == 1 and isinstance(args[0], list | tuple):
        words = [str(a) for a in args[0]]
    elif len(args) == 1 and isinstance(args[0], str):
        words = [args[0]] if shell else args[0].split()
    else:
        words = [str(a) for a in args]
    if not words or not all(words):
        raise ArgumentError(caller_location(), f"{what}: give a command")
    return " ".join(words) if shell else tuple(words)


class Popen:
    """A command started in a node's guest (Mininet's node.popen)."""

    def __init__(self, exp: Any, node: str, command: str | tuple[str, ...]):
        self._exp = exp
        self.node = node
        self.args = command
        self._handle: CommandHandle = exp.start(node, command if isinstance(command, str)
                                                else list(command))
        self._result: CommandResult | None = None
        self._pipes: tuple[IO[bytes], IO[bytes]] | None = None
        self.pid: int | None = None         # a guest's process: no pid of Dom0's

    @property
    def returncode(self) -> int | None:
        return None if self._result is None else _returncode(self._result)

    def poll(self) -> int | None:
        """The exit status once the command has ended, else None."""
        if self._result is None and self._handle.done:
            self._finish(None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._finish(timeout)
        assert self._result is not None
        return _returncode(self._result)

    def communicate(self, input: bytes | str | None = None,  # noqa: A002 - subprocess's name
                    timeout: float | None = None) -> tuple[bytes, bytes]:
        """(stdout, stderr) as bytes once the command has ended."""
        if input:
            raise ArgumentError(caller_location(), f"{self.node}.popen: a guest command has no "
                                                   "stdin; put the input in a file first "
                                                   "(exp.put) or in the command")
        self._finish(timeout)
        assert self._result is not None
        if self._pipes is None:
            return self._result.stdout, self._result.stderr
        # What the pipes have not given yet, as subprocess's communicate.
        return self._pipes[0].read(), self._pipes[1].read()

    @property
    def stdout(self) -> IO[bytes]:
        """The command's stdout as it comes: a pipe (readline, iteration,
        fileno for poll), at its end when the command has ended."""
        return self._piped()[0]

    @property
    def stderr(self) -> IO[bytes]:
        return self._piped()[1]

    def _piped(self) -> tuple[IO[bytes], IO[bytes]]:
        """The two pipes, made on first use (a command nobody reads costs no
        pipes or threads): the handle's follower queues the output, a thread
        per stream writes it (a full pipe blocks that thread, never the
        control channel's)."""
        if self._pipes is None:
            ends = [os.pipe(), os.pipe()]
            queues: list[queue.SimpleQueue[bytes]] = [queue.SimpleQueue(), queue.SimpleQueue()]
            for name, (_, write_end), pending in zip(("stdout", "stderr"), ends, queues,
                                                     strict=True):
                threading.Thread(target=_feed, args=(write_end, pending), daemon=True,
                                 name=f"popen-{self.node}-{name}").start()
            self._pipes = (os.fdopen(ends[0][0], "rb"), os.fdopen(ends[1][0], "rb"))
            self._handle.follow(lambda stream, data: queues[stream].put(data))
        return self._pipes

    def send_signal(self, sig: int) -> None:
        if self._result is None and not self._handle.done:
            self._exp.kill(self._handle, int(sig))

    def terminate(self) -> None:
        self.send_signal(signals.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signals.SIGKILL)

    def _finish(self, timeout: float | None) -> None:
        if self._result is not None:
            return
        if timeout is not None and not self._handle.wait_done(timeout):
            raise TimeoutExpired(f"{self.node}: {self.args!r} still running after {timeout:g} "
                                 "real s")
        result = self._exp.wait(self._handle)
        if result.state == "lost":
            raise ExperimentError(f"{self.node}: {self._handle.spec.describe()!r} lost: "
                                  f"{result.summary()}")
        if result.state == "failed":        # not started: say why, as a shell would
            result = dataclasses.replace(result, stderr=result.stderr
                                         + f"{self.node}: {result.summary()}\n".encode())
        self._result = result

    def __repr__(self) -> str:
        shown = shlex.join(self.args) if isinstance(self.args, tuple) else self.args
        return f"<Popen {self.node}: {shown}>"


class SentCommand:
    """A node's sendCmd command: its output queued as it comes, for
    monitor() and waitOutput()."""

    def __init__(self, handle: CommandHandle):
        self.handle = handle
        self._pending: queue.SimpleQueue[tuple[int, bytes]] = queue.SimpleQueue()
        self._ends = 0
        self._texts = TextPieces()
        handle.follow(lambda stream, data: self._pending.put((stream, data)))

    @property
    def ended(self) -> bool:
        """The command has ended and all its output was taken."""
        return self._ends >= 2

    def take(self, timeout: float | None) -> str:
        """What came since the last take: waits up to `timeout` real seconds
        (None: no limit) for a first piece, then takes what is queued."""
        pieces: list[str] = []
        first = True
        while not self.ended:
            try:
                if first:
                    stream, data = self._first(timeout)
                else:
                    stream, data = self._pending.get_nowait()
            except queue.Empty:
                break
            first = False
            if data:
                pieces.append(self._texts.text(stream, data))
            else:
                self._ends += 1
        return "".join(pieces)

    def _first(self, timeout: float | None) -> tuple[int, bytes]:
        # In slices of a second: Ctrl-C is heard between them.
        while timeout is None:
            try:
                return self._pending.get(timeout=1.0)
            except queue.Empty:
                continue
        return self._pending.get(timeout=timeout)

def _returncode(result: CommandResult) -> int:
    """As subprocess: the exit status, or minus the signal that ended it; a
    command the agent could not start, 127."""
    if result.state == "exited" and result.exit_code is not None:
        return result.exit_code
    if result.state == "killed" and result.signal:
        return -result.signal
    return NOT_STARTED


def _feed(write_end: int, pending: queue.SimpleQueue[bytes]) -> None:
    """Write a stream's output into its pipe; an empty piece is its end."""
    try:
        while data := pending.get():
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
    except OSError:
        pass                    # the reader closed its end: nobody wants the rest
    finally:
        os.close(write_end)
