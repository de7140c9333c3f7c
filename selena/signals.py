"""Deferring Ctrl-C while selena undoes something that must not stop halfway."""

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
