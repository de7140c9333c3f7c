"""Signals: SIGTERM and SIGHUP taken as Ctrl-C where selena holds something
to tear down, and Ctrl-C deferred while it undoes something that must not
stop halfway."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

# Signals a rollback defers: Ctrl-C always; SIGTERM and SIGHUP only where
# Python code handles them (the experiment makes them a KeyboardInterrupt),
# so that a process that would die of them still does.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class sigint_deferred:  # noqa: N801 - used as a context manager
    """While inside, a Ctrl-C (and a SIGTERM or SIGHUP turned into one) is
    reported through `note`, not obeyed: half a rollback or teardown would
    leave guests and bridges behind. Only the main thread can set signal
    handlers; elsewhere this does nothing. Nesting is fine: each level
    restores the handlers it found."""

    def __init__(self, note: Callable[[str], None],
                 message: str = "tearing down; Ctrl-C is ignored until that is done"):
        self.note = note
        self.message = message
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> sigint_deferred:
        if threading.current_thread() is not threading.main_thread():
            return self

        def note(_signum: int, _frame: FrameType | None) -> None:
            self.note(self.message)

        for signum in INTERRUPTS:
            current = signal.getsignal(signum)
            if signum == signal.SIGINT or callable(current):
                self.previous[signum] = signal.signal(signum, note)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        restore_handlers(self.previous)


def restore_handlers(previous: dict[int, Any]) -> None:
    """Put back the handlers signal.signal() returned, and forget them."""
    for signum, handler in previous.items():
        # None: the handler was not set from Python; for SIGINT Python's own
        # is the default.
        restore = handler if handler is not None else (
            signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)
        signal.signal(signum, restore)
    previous.clear()


class SignalInterrupt(KeyboardInterrupt):
    """SIGTERM or SIGHUP where selena holds something to tear down (a
    deployed experiment, a running lab): handled as Ctrl-C (the same
    rollback and teardown paths), with the signal's name."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        self.name = signal.Signals(signum).name
        super().__init__(f"{self.name} received")


# Signals that end a run as Ctrl-C does (a `kill`, a closed terminal or SSH session).
TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise SignalInterrupt(signum)


class TerminateAsInterrupt:
    """SIGTERM and SIGHUP raise SignalInterrupt while installed, so the paths
    Ctrl-C takes tear down; their handlers before are restored after.
    Signals are handled in the main thread only: elsewhere nothing changes.
    Also a context manager."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread() or self.previous:
            return
        for sig in TERMINATING:
            self.previous[sig] = signal.signal(sig, _raise_interrupt)

    def restore(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        restore_handlers(self.previous)

    def __enter__(self) -> TerminateAsInterrupt:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()
