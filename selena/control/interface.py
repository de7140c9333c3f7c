"""The command channel: what the lifecycle, the engine, guest shaping and the
switch set-up use to run commands in a running experiment's nodes, whatever
carries them. Every backend returns one from `Backend.command_channel()`:
the xl backend the Xenstore controller to the guest agents
(selena.control.channel.Controller), the Mininet baseline a channel into
its hosts' namespaces (selena.backends.mininet.NamespaceChannel).

A channel hands out a CommandHandle per submitted command and completes it,
exactly once, with a CommandResult (`handle.complete(result)`); callers
wait on the handle from any thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from selena.errors import ControlError

if TYPE_CHECKING:
    # Only for annotations: channel.py implements this protocol and imports it.
    from selena.control.channel import CommandHandle, CommandResult
    from selena.control.protocol import CommandSpec

# What Dom0 keeps of one command's stdout, and again of its stderr: beyond it
# chunks are still read and acknowledged (so the guest never stalls) but
# dropped, and the result counts what was dropped (`yes` in a guest once put
# 27 MB into Dom0 in 7 s).
DEFAULT_OUTPUT_CAP = 16 * 1024 * 1024


@runtime_checkable
class CommandChannel(Protocol):
    """Runs commands in the nodes of one running experiment.

    Implementations subclass it to inherit `run` and `wait`; anything with
    these members passes isinstance() (runtime_checkable).
    tdf: the rate the nodes' time runs at (limits that follow it scale).
    output_cap: bytes of each command's stdout, and of its stderr, kept.
    """

    tdf: float
    output_cap: int

    def add_guest(self, name: str, where: int, /) -> None:
        """Attach node `name`; `where` is what the backend's Deployment maps
        it to (a Xen domain id, a namespace's process id)."""
        ...

    def wait_ready(self, timeout: float) -> None:
        """Wait (real seconds) until every attached node can run commands;
        GuestLost (or a subclass of ControlError) names one that cannot."""
        ...

    def submit(self, guest_name: str, spec: CommandSpec) -> CommandHandle:
        """Start a command; its handle completes when it ends."""
        ...

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        """Send `signal` to a running command (nothing if it has ended)."""
        ...

    def set_tdf(self, tdf: float) -> None:
        """The nodes now run at `tdf`."""
        ...

    def close(self) -> None:
        """Detach: no more commands; what this channel opened is released."""
        ...

    def hold_heartbeats(self, held: bool) -> None:
        """The nodes' time stands still (held) or runs again: a channel that
        declares silent nodes lost must not count the standstill. One that
        watches no liveness has nothing to do."""
        return None

    def wait(self, handle: CommandHandle, timeout: float | None = None) -> CommandResult:
        """A command's result; ControlError if it has not ended after
        `timeout` real seconds (None: no limit)."""
        if not handle.wait_done(timeout):
            raise ControlError(f"command {handle.spec.describe()!r} on {handle.guest} still "
                               f"running after {timeout:g} s")
        result = handle.result
        if result is None:
            raise ControlError(f"command {handle.spec.describe()!r} on {handle.guest} ended "
                               "without a result")
        return result

    def run(self, guest_name: str, spec: CommandSpec,
            timeout: float | None = None) -> CommandResult:
        """Submit a command and wait for its result."""
        return self.wait(self.submit(guest_name, spec), timeout)
