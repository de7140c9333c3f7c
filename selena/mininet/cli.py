"""Mininet's CLI(net): selena's `selena>` prompt (selena/cli/interactive.py)
on a started net, as Mininet's CLI runs on its net: it returns when the user
types exit or Ctrl-D, and the script goes on (to net.stop())."""

from __future__ import annotations

from typing import IO

from selena.errors import ExperimentError


class CLI:
    def __init__(self, net: object, script: str | None = None,
                 stdin: IO[str] | None = None, **_kwargs: object) -> None:
        from selena.cli.interactive import interact

        session = getattr(net, "session", None)
        if session is None:
            raise ExperimentError("CLI(net): the net is not started (call net.start() first)")
        if script is not None:
            with open(script) as commands:
                interact(session, stdin=commands)
        else:
            interact(session, stdin=stdin)
