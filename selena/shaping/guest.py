"""Guest-side shaping (Placement.GUEST): the plan's tc commands, run inside
each guest by its agent once it is ready. Nothing is scaled: the guest's
clock, which tc's timers follow, is already dilated."""

from __future__ import annotations

from collections.abc import Callable

from selena.control.interface import CommandChannel
from selena.control.protocol import CommandSpec
from selena.errors import BackendError
from selena.plan import Plan, guest_shaping_script

# Real seconds for a guest to run its tc commands (emulation is slow).
APPLY_TIMEOUT_S = 300.0


def apply_guest_shaping(ctl: CommandChannel, plan: Plan,
                        progress: Callable[[str], None] | None = None) -> int:
    """Shape every guest's egress; returns how many guests were shaped."""
    handles = []
    for guest in plan.guests:
        script = guest_shaping_script(guest)
        if script is not None:
            handles.append((guest.node, ctl.submit(guest.node, CommandSpec(shell=script))))
    for node, handle in handles:
        result = ctl.wait(handle, APPLY_TIMEOUT_S)
        if not result.ok:
            raise BackendError(f"guest-side shaping on {node} failed ({result.summary()}): "
                               f"{result.stderr.decode(errors='replace').strip()[-300:]}")
        if progress:
            progress(f"shaped {node} inside the guest")
    return len(handles)
