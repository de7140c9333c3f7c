"""How a selena error ends the user's own script (`python3 my_experiment.py`):
one line naming their file and line, as the CLI prints it, rather than a
traceback through selena's code. Other exceptions keep Python's traceback;
SELENA_TRACEBACK=1 shows it for selena's errors too."""

from __future__ import annotations

import os
import sys
from types import TracebackType

from selena.errors import SelenaError

_previous = sys.excepthook


def _hook(kind: type[BaseException], error: BaseException,
          tb: TracebackType | None) -> None:
    if not isinstance(error, SelenaError) or os.environ.get("SELENA_TRACEBACK"):
        _previous(kind, error, tb)
        return
    from selena.user_errors import describe, user_frames

    frames = user_frames(tb)
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    # The interpreter is ending: this replaces its traceback, as print would.
    sys.stderr.write(f"{where}selena: error: {describe(error)}\n")


def install() -> None:
    """Idempotent; chains to whatever hook was there for other exceptions."""
    global _previous
    if sys.excepthook is not _hook:
        _previous = sys.excepthook
        sys.excepthook = _hook
