"""A backend and a command channel that live in memory, for tests of the
lifecycle and the CLI that need no agent, no Xen and no Mininet: the
CommandChannel interface is all the lifecycle sees, so this is enough to
deploy, run a scenario and write a bundle. Commands are not executed:
`echo WORDS` prints WORDS, `exit N` exits N, `hang` runs until killed or its
timeout, anything else exits 0 silently. Every call that changes the TDF is
counted.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Collection

from selena.backends.base import Backend, Deployment, Progress
from selena.control.channel import CommandHandle, CommandResult
from selena.control.interface import DEFAULT_OUTPUT_CAP, CommandChannel
from selena.control.protocol import CommandSpec
from selena.errors import ControlError
from selena.hostinfo import HostInfo
from selena.plan import Plan


class MemoryChannel(CommandChannel):
    """Completes its commands itself, through the public CommandHandle API."""

    def __init__(self, tdf: float = 1.0, output_cap: int = DEFAULT_OUTPUT_CAP) -> None:
        self.tdf = tdf
        self.output_cap = output_cap
        self.guests: dict[str, int] = {}
        self.submitted: list[tuple[str, str]] = []       # (node, command)
        self.tdf_changes: list[float] = []
        self.closed = False
        self._count = 0

    def add_guest(self, name: str, where: int, /) -> None:
        self.guests[name] = where

    def wait_ready(self, timeout: float, nodes: Collection[str] | None = None) -> None:
        pass

    def submit(self, guest_name: str, spec: CommandSpec) -> CommandHandle:
        if self.closed:
            raise ControlError("the command channel is closed")
        if guest_name not in self.guests:
            raise ControlError(f"no guest named {guest_name!r} is attached")
        spec.encode()
        self._count += 1
        handle = CommandHandle(guest_name, f"mem{self._count}", spec, time.time())
        text = spec.describe()
        self.submitted.append((guest_name, text))
        words = shlex.split(text) if spec.shell is not None else list(spec.argv)
        if words[:1] == ["hang"]:
            if spec.timeout_ns:
                threading.Timer(spec.timeout_ns / 1e9 * self.tdf, self._end,
                                [handle, "killed", 9, "timeout"]).start()
            return handle
        code = int(words[1]) if words[:1] == ["exit"] and len(words) > 1 else 0
        out = (" ".join(words[1:]) + "\n").encode() if words[:1] == ["echo"] else b""
        handle.complete(CommandResult(guest_name, handle.id, text, "exited", exit_code=code,
                                      stdout=out[:self.output_cap], start_ns=time.time_ns(),
                                      end_ns=time.time_ns(), dur_ns=0,
                                      submitted=handle.submitted, finished=time.time()))
        return handle

    def _end(self, handle: CommandHandle, state: str, signal: int, reason: str) -> None:
        if not handle.done:
            handle.complete(CommandResult(handle.guest, handle.id, handle.spec.describe(),
                                          state, signal=signal, reason=reason,
                                          submitted=handle.submitted, finished=time.time()))

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        self._end(handle, "killed", signal, "kill")

    def set_tdf(self, tdf: float) -> None:
        self.tdf_changes.append(tdf)
        self.tdf = tdf

    def close(self) -> None:
        self.closed = True


class MemoryBackend(Backend):
    """Deploys nothing; hands out a MemoryChannel. `tdf_calls` counts every
    TDF the lifecycle applies to the running experiment (backend and
    channel), `deployed_tdf` the TDF each deploy was planned at."""

    name = "memory"

    def __init__(self, guest_agents: bool = True) -> None:
        self.guest_agents = guest_agents
        self.channels: list[MemoryChannel] = []
        self.tdf_calls: list[tuple[str, float]] = []     # (who, tdf)
        self.deployed_tdf: list[float] = []
        self.destroyed: list[str] = []

    def host_info(self) -> HostInfo:
        return HostInfo(self.name, cpus=64, free_memory_mb=1 << 20)

    def render(self, plan: Plan) -> str:
        return f"# {plan.experiment} in memory\n"

    def deploy(self, plan: Plan, progress: Progress | None = None, warm: bool = False,
               replace: bool = False) -> Deployment:
        self.deployed_tdf.append(plan.tdf)
        return Deployment(plan.experiment, plan.tdf,
                          {g.node: i for i, g in enumerate(plan.guests, start=1)}, self.name)

    def wait_up(self, deployment: Deployment, timeout: float,
                progress: Progress | None = None) -> list[str]:
        return []

    def command_channel(self, tdf: float,
                        output_cap: int = DEFAULT_OUTPUT_CAP) -> MemoryChannel:
        channel = MemoryChannel(tdf, output_cap)
        original = channel.set_tdf

        def counted(new: float) -> None:
            self.tdf_calls.append(("channel", new))
            original(new)
        # Wraps the one instance's method to count calls (a test double).
        channel.set_tdf = counted       # type: ignore[method-assign,assignment]
        self.channels.append(channel)
        return channel

    def set_tdf(self, experiment: str, tdf: float,
                progress: Progress | None = None) -> tuple[float, float]:
        self.tdf_calls.append(("backend", tdf))
        now = time.monotonic()
        return now, now

    def freeze(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        return time.time_ns(), time.monotonic_ns()

    def thaw(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        return time.time_ns(), time.monotonic_ns()

    def crash(self, deployment: Deployment, node: str) -> None:
        pass

    def destroy(self, experiment: str, pool: bool = False, force: bool = False) -> None:
        self.destroyed.append(experiment)

    def clean(self, force: bool = False, progress: Progress | None = None) -> list[str]:
        return []

    def status(self) -> list[dict[str, object]]:
        return []

    def close(self) -> None:
        pass
