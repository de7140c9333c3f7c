"""Mininet's log functions: `info`, `output` and friends print as Mininet
prints them (to stdout, without a newline added); setLogLevel sets which."""

from __future__ import annotations

import sys

LEVELS = {"debug": 10, "info": 20, "output": 25, "warning": 30, "warn": 30, "error": 40,
          "critical": 50}
_level = LEVELS["output"]


def setLogLevel(level: str = "output") -> None:  # noqa: N802 - Mininet's name
    global _level
    _level = LEVELS.get(level, LEVELS["output"])


def _say(level: str, *args: object) -> None:
    if LEVELS[level] >= _level:
        stream = sys.stderr if LEVELS[level] >= LEVELS["warning"] else sys.stdout
        stream.write(" ".join(str(a) for a in args))
        stream.flush()


def debug(*args: object) -> None:
    _say("debug", *args)


def info(*args: object) -> None:
    _say("info", *args)


def output(*args: object) -> None:
    _say("output", *args)


def warn(*args: object) -> None:
    _say("warning", *args)


warning = warn


def error(*args: object) -> None:
    _say("error", *args)


class _Logger:
    """`lg` as Mininet's scripts use it (lg.setLogLevel, lg.info...)."""

    setLogLevel = staticmethod(setLogLevel)  # noqa: N815
    debug = staticmethod(debug)
    info = staticmethod(info)
    output = staticmethod(output)
    warn = staticmethod(warn)
    warning = staticmethod(warn)
    error = staticmethod(error)


lg = _Logger()
