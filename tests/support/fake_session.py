"""A running Experiment without guests, for unit tests of selena.session and
the interactive CLI: a real Experiment (topology, names, addresses, links,
pause and TDF bookkeeping) whose engine and backend are doubles. Guest
commands are answered by `FakeEngine.answer(node, command)`; the backend
records what it is asked."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from selena.backends.base import Backend, Deployment
from selena.control.channel import CommandResult
from selena.engine import VirtualClock
from selena.experiment import Experiment
from selena.hostinfo import HostInfo
from selena.model import Topology

Answer = Callable[[str, str], tuple[int, str]]      # (node, command) -> (exit code, stdout)


class RecordingBackend(Backend):
    name = "recording"

    def __init__(self) -> None:
        self.asked: list[tuple] = []

    def host_info(self) -> HostInfo:
        return HostInfo("recording")

    def render(self, plan: Any) -> str:
        return ""

    def deploy(self, plan: Any, progress: Any = None, warm: bool = False,
               replace: bool = False) -> Deployment:
        raise AssertionError("not deployed in these tests")

    def wait_up(self, deployment: Any, timeout: float, progress: Any = None) -> list[str]:
        return []

    def set_tdf(self, experiment: str, tdf: float, progress: Any = None) -> tuple[float, float]:
        import time

        self.asked.append(("set_tdf", experiment, tdf))
        now = time.monotonic()
        return now, now

    def freeze(self, experiment: str, progress: Any = None) -> tuple[int, int]:
        self.asked.append(("freeze", experiment))
        return 0, 0

    def thaw(self, experiment: str, progress: Any = None) -> tuple[int, int]:
        self.asked.append(("thaw", experiment))
        return 0, 0

    def shape_link(self, experiment: str, link: Any, progress: Any = None) -> None:
        self.asked.append(("shape_link", experiment, str(link), link.rate_bps, link.delay_s,
                           link.jitter_s, link.loss, link.queue_packets))

    def set_link(self, experiment: str, link: Any, up: bool, progress: Any = None) -> None:
        self.asked.append(("set_link", experiment, str(link), up))

    def command_channel(self, tdf: float, output_cap: int = 0) -> Any:
        raise AssertionError("no command channel here: these tests attach a FakeEngine")

    def crash(self, deployment: Any, node: str) -> None:
        self.asked.append(("crash", node))

    def set_cpu_share(self, experiment: str, node: str, share: float | None, vcpus: int,
                      progress: Any = None) -> None:
        self.asked.append(("set_cpu_share", node, share))

    def destroy(self, experiment: str, pool: bool = False, force: bool = False) -> None:
        self.asked.append(("destroy", experiment))

    def clean(self, force: bool = False, progress: Any = None) -> list[str]:
        return []

    def status(self) -> list[dict[str, object]]:
        return []

    def close(self) -> None:
        pass


class FakeEngine:
    """The parts of selena.engine.Engine that Experiment's command methods use."""

    def __init__(self, tdf: float, answer: Answer):
        self.clock = VirtualClock(tdf)
        self.answer = answer
        self.commands: list[tuple[str, str, float | None]] = []
        self.killed: list[str] = []
        self.crashed: Callable[[str], None] = lambda node: None
        self._lock = threading.Lock()

    @property
    def tdf(self) -> float:
        return self.clock.tdf

    def now(self) -> float:
        return self.clock.now()

    def sleep(self, seconds: float) -> None:
        self.commands.append(("-", f"sleep {seconds:g}", None))

    def cmd(self, node: str, command: Any, *, timeout: float | None = None, env: Any = None,
            cwd: Any = None, check: bool = False, on_output: Any = None) -> CommandResult:
        result = self._result(node, command, timeout)
        if on_output is not None:
            for stream, data in enumerate((result.stdout, result.stderr)):
                if data:
                    on_output(stream, data)
        return result

    def start(self, node: str, command: Any, *, timeout: float | None = None, env: Any = None,
              cwd: Any = None, show: bool = True) -> Any:
        self.commands.append((node, f"start {_text(command)}", timeout))
        return _Handle(node, _text(command), timeout)

    def wait(self, handle: Any, *, check: bool = False) -> CommandResult:
        result = self._result(handle.node, handle.command, handle.timeout, record=False)
        if handle.follower is not None:         # the output, then each stream's end
            for stream, data in enumerate((result.stdout, result.stderr)):
                for piece in (data, b""):
                    handle.follower(stream, piece)
        return result

    def kill(self, handle: Any, signal: int = 15) -> None:
        self.killed.append(handle.command)

    def crash(self, node: str) -> None:
        self.crashed(node)

    def _result(self, node: str, command: Any, timeout: float | None,
                record: bool = True) -> CommandResult:
        text = _text(command)
        if record:
            self.commands.append((node, text, timeout))
        code, out = self.answer(node, text)
        return CommandResult(guest=node, id="x", command=text, state="exited", exit_code=code,
                             stdout=out.encode())


@dataclass
class _Handle:
    node: str
    command: str
    timeout: float | None
    follower: Callable[[int, bytes], None] | None = None

    def follow(self, on_output: Callable[[int, bytes], None]) -> None:
        self.follower = on_output


def _text(command: Any) -> str:
    return command if isinstance(command, str) else " ".join(command)


def pingall_answer(command: str, down: Collection[str] = ()) -> str | None:
    """What a guest prints for Session.pingall's loop (`for ip in A B; do ...`):
    "A 1" per answered address, "A 0" for those in `down`; None for any other
    command."""
    if not command.startswith("for ip in "):
        return None
    ips = command[len("for ip in "):].split(";", 1)[0].split()
    return "".join(f"{ip} {0 if ip in down else 1}\n" for ip in ips)


def running(topo: Topology, answer: Answer | None = None) -> Experiment:
    """`topo` as a running experiment on a RecordingBackend and a FakeEngine."""
    exp = Experiment(topo, backend=RecordingBackend(), templates=None, monitor=False,
                     progress=lambda msg: None)
    # A stand-in for the engine, duck-typed: only the calls a session makes.
    engine = FakeEngine(topo.tdf, answer or (lambda node, command: (0, "")))
    exp.engine = engine     # type: ignore[assignment]
    exp.deployment = deployment = Deployment(
        topo.name, topo.tdf, {name: i for i, name in enumerate(topo.nodes, start=1)},
        "recording")
    engine.crashed = lambda node: exp.backend.crash(deployment, node)
    return exp
