"""Deferring Ctrl-C while selena undoes something that must not stop halfway."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any


class sigint_deferred:  # noqa: N801 - used as a context manager
    """While inside, a Ctrl-C (SIGINT) is reported through `note`, not obeyed:
    half a rollback or teardown would leave guests and bridges behind. Only the
    main thread can set signal handlers; elsewhere this does nothing. Nesting
    is fine: each level restores the handler it found."""

    def __init__(self, note: Callable[[str], None],
                 message: str = "tearing down; Ctrl-C is ignored until that is done"):
        self.note = note
        self.message = message
        self.previous: Any = None
        self.installed = False

    def __enter__(self) -> sigint_deferred:
        if threading.current_thread() is threading.main_thread():
            def note(_signum: int, _frame: FrameType | None) -> None:
                self.note(self.message)

            self.previous = signal.signal(signal.SIGINT, note)
            self.installed = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.installed:
            # None: the handler was not set from Python; Python's own is the default.
            restore = signal.default_int_handler if self.previous is None else self.previous
            signal.signal(signal.SIGINT, restore)
            self.installed = False
