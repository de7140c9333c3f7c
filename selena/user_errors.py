"""A user's mistake as they should see it: their file and line, their own
frames only, and a one-line account with a hint for common slips. Shared
by the scenario loader, Mininet custom files and the CLI."""

from __future__ import annotations

import builtins
import difflib
import os
import sysconfig
import traceback
from pathlib import Path
from types import TracebackType

from selena.compat import NodeType
from selena.errors import ScenarioFileError, SelenaError

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Frames in selena, the standard library or installed packages are not the
# user's: a traceback shown to them stops at their own code.
_NOT_USER = tuple(os.path.abspath(p) + os.sep for p in
                  {_PACKAGE_DIR, *(sysconfig.get_paths()[k] for k in
                                   ("stdlib", "platstdlib", "purelib", "platlib"))})


def user_error(exc: BaseException, path: Path | str | None = None) -> ScenarioFileError:
    """The error as the user should see it: their file and line, and their
    frames only. `path` is the scenario file, used when no frame of the
    user's is on the traceback (e.g. an error raised by selena directly)."""
    frames = user_frames(exc.__traceback__)
    if isinstance(exc, ScenarioFileError) and exc.where:
        where = exc.where     # already the user's line (e.g. an ArgumentError)
    elif frames:
        last = frames[-1]
        where = f"{_shown(last.filename)}:{last.lineno}"
    elif isinstance(exc, SelenaError) and (own := getattr(exc, "where", None)):
        where = str(own)
    else:
        where = str(path) if path else "scenario"
    shown_tb = "".join(traceback.format_list(frames)) if len(frames) > 1 else ""
    message = exc.message if isinstance(exc, ScenarioFileError) else describe(exc)
    return ScenarioFileError(where, message, shown_tb)


def user_frames(tb: TracebackType | None) -> list[traceback.FrameSummary]:
    """The frames of a traceback that are not selena's own."""
    return [f for f in traceback.extract_tb(tb)
            if not os.path.abspath(f.filename).startswith(_NOT_USER)
            and not f.filename.startswith("<")]


def describe(exc: BaseException) -> str:
    """A one-line account of an exception, with a hint for common slips."""
    if isinstance(exc, SelenaError):
        return str(exc)
    if isinstance(exc, AttributeError) and getattr(exc, "obj", None) is NodeType:
        name = getattr(exc, "name", "?")
        members = [t.name for t in NodeType]
        close = difflib.get_close_matches(str(name), members, n=1)
        hint = f"; did you mean NodeType.{close[0]}?" if close else ""
        return f"NodeType has no member {name} (members: {', '.join(members)}){hint}"
    if isinstance(exc, NameError) and getattr(exc, "name", None):
        known = set(dir(builtins))
        if exc.__traceback__ is not None:
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            known |= set(tb.tb_frame.f_globals) | set(tb.tb_frame.f_locals)
        close = difflib.get_close_matches(str(exc.name), sorted(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"NameError: {exc}{hint}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _shown(filename: str) -> str:
    relative = os.path.relpath(filename)
    return filename if relative.startswith(".." + os.sep) else relative
