"""The scenario engine: runs a scenario's actions and its `run(exp)` function
against deployed guests, in the guests' virtual time.

Virtual time starts when the engine starts (all guests already running) and
advances at 1/TDF of Dom0's real clock, which is exactly how the patched
hypervisor advances every guest's clock.
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from selena.compat import Action, PushCmd, PushOFRule, SetArp
from selena.control.channel import CommandHandle, CommandResult, Controller
from selena.control.protocol import CommandSpec
from selena.errors import ScenarioError

if TYPE_CHECKING:
    from selena.openflow import Switches

log = logging.getLogger(__name__)

# Real seconds allowed beyond a command's own (virtual) timeout before the
# controller stops waiting: boot-time scheduling noise under emulation.
WAIT_SLACK_S = 60.0


@dataclass
class Recorded:
    """A finished command and where in the scenario it came from."""

    seq: int
    result: CommandResult
    at_virtual: float           # virtual seconds after the scenario started


class Experiment:
    """What a scenario's `run(exp)` gets: commands, virtual-time scheduling,
    waiting, and fault injection."""

    def __init__(self, controller: Controller, tdf: float, domids: dict[str, int],
                 crash: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 out_dir: Path | None = None, switches: Switches | None = None):
        self.controller = controller
        self.tdf = tdf
        # Where the results bundle goes: scenarios may write derived files here.
        self.out_dir = out_dir
        self.switches = switches
        self.domids = dict(domids)
        self._crash = crash
        self._clock = clock
        self._start = clock()
        self._seq = 0
        self._lock = threading.Lock()
        self.records: list[Recorded] = []
        self._pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="scenario")
        self._scheduled: list[Future] = []

    # -- time ----------------------------------------------------------------------

    def now(self) -> float:
        """Virtual seconds since the scenario started."""
        return (self._clock() - self._start) / self.tdf

    def sleep(self, virtual_seconds: float) -> None:
        time.sleep(max(0.0, virtual_seconds) * self.tdf)

    def at(self, t: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run fn(*args) when virtual time reaches t (seconds after the start)."""
        def later() -> Any:
            self.sleep(t - self.now())
            return fn(*args, **kwargs)

        future = self._pool.submit(later)
        self._scheduled.append(future)
        return future

    def parallel(self, *calls: Callable[[], Any]) -> list[Any]:
        """Run the callables at once; return their results in order."""
        futures = [self._pool.submit(c) for c in calls]
        return [f.result() for f in futures]

    # -- commands ------------------------------------------------------------------

    def cmd(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
            env: dict[str, str] | None = None, cwd: str | None = None,
            check: bool = False) -> CommandResult:
        """Run a command in `node` and wait for it. A string runs in /bin/sh; a
        list is an argv. timeout is in virtual seconds (enforced by the guest)."""
        result = self.wait(self.start(node, command, timeout=timeout, env=env, cwd=cwd))
        if check and not result.ok:
            raise ScenarioError(f"{node}: `{result.command}` {result.summary()}: "
                                f"{result.stderr.decode(errors='replace')[-300:]}")
        return result

    def start(self, node: str, command: str | Sequence[str], *, timeout: float | None = None,
              env: dict[str, str] | None = None, cwd: str | None = None) -> CommandHandle:
        """Start a command in the background; wait() or kill() it later."""
        if node not in self.domids:
            raise ScenarioError(f"no node named {node!r} in this experiment "
                                f"(have {', '.join(sorted(self.domids))})")
        spec = CommandSpec(
            argv=() if isinstance(command, str) else tuple(command),
            shell=command if isinstance(command, str) else None,
            env=dict(env or {}), cwd=cwd,
            timeout_ns=int(timeout * 1e9) if timeout else 0)
        handle = self.controller.submit(node, spec)
        handle.virtual_start = self.now()   # type: ignore[attr-defined]
        handle.virtual_timeout = timeout    # type: ignore[attr-defined]
        return handle

    def wait(self, handle: CommandHandle) -> CommandResult:
        timeout = getattr(handle, "virtual_timeout", None)
        real_limit = None if timeout is None else timeout * self.tdf + WAIT_SLACK_S
        result = self.controller.wait(handle, real_limit)
        with self._lock:
            self._seq += 1
            self.records.append(Recorded(self._seq, result,
                                         getattr(handle, "virtual_start", 0.0)))
        return result

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        self.controller.kill(handle, signal)

    def set_switch_model(self, node: str, profile: str | None) -> None:
        """Emulate another switch control plane on `node` from now on (None:
        Open vSwitch's own); its flow table is emptied."""
        if self.switches is None:
            raise ScenarioError("this experiment has no OpenFlow switches")
        self.switches.set_profile(node, profile)

    def domid(self, node: str) -> int:
        return self.domids[node]

    def crash(self, node: str) -> None:
        """Fault injection: destroy the node's domain as a power failure would."""
        if self._crash is None:
            raise ScenarioError("this backend cannot crash nodes")
        self._crash(node)

    def finish(self) -> None:
        for future in self._scheduled:
            future.result()
        self._pool.shutdown(wait=True)


def run_actions(exp: Experiment, actions: list[Action]) -> None:
    """SELENA Listing 2 semantics: in file order, each command waited for,
    except a shell command ending in `&`, which is left running."""
    background: list[CommandHandle] = []
    for action in actions:
        if isinstance(action, SetArp):
            continue                        # applied at boot (plan net directives)
        if isinstance(action, PushCmd):
            for command in action.commands:
                if command.rstrip().endswith("&"):
                    background.append(exp.start(action.node, command.rstrip()[:-1]))
                else:
                    exp.cmd(action.node, command)
        elif isinstance(action, PushOFRule):
            exp.cmd(action.node, ["ovs-ofctl", action.action, action.bridge, action.rule])
    for handle in background:
        if not handle.done:
            exp.kill(handle, 15)
        exp.wait(handle)


def arp_interface_index(iface: str, wired: Sequence[int]) -> int:
    """setArp names an interface `ethN`; a single-homed node's only interface
    is meant whatever its number (the paper's listings number from 1)."""
    match = re.fullmatch(r"eth(\d+)", iface)
    if match and int(match.group(1)) in wired:
        return int(match.group(1))
    if len(wired) == 1:
        return wired[0]
    raise ScenarioError(f"setArp: interface {iface!r} is not one of the node's wired "
                        f"interfaces ({', '.join(f'eth{i}' for i in wired)})")


def describe(command: str | Sequence[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)
