"""Mininet's CLI(net) is not part of selena.mininet: one line says what to
use instead (a script's interactive prompt would block a run)."""

from __future__ import annotations

from selena.errors import ExperimentError


class CLI:
    def __init__(self, net: object, *args: object, **kwargs: object) -> None:
        raise ExperimentError("CLI(net) is not part of selena.mininet: script the commands "
                              "(h1.cmd(...), net.pingAll()), or run "
                              "`selena run --custom FILE --topo NAME` for selena's prompt")
