"""Commands in a deployed experiment's guests from a process of their own
(`selena exec EXPERIMENT NODE COMMAND`; `selena cp` for files): what
`selena deploy` leaves running has no prompt, so a researcher reaches a
node as they would a container. The backend's record of the experiment
gives the node's domain and the current TDF; a control channel of this
process attaches to that one guest's agent (command ids are random per
channel, so it runs beside the run that owns the experiment, if there is
one) and is closed after the command. Nothing else of the experiment is
touched."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Sequence

from selena import transfer
from selena.backends.base import Backend
from selena.control.interface import DEFAULT_OUTPUT_CAP, CommandChannel, CommandResult
from selena.control.protocol import CommandSpec
from selena.errors import ControlError, ExperimentError, ScenarioError
from selena.relay import OutputFollower, relayed
from selena.transfer import Transfer

log = logging.getLogger(__name__)

# Real seconds a command is given to end once it was sent SIGTERM because
# the caller was interrupted, before the channel closes anyway.
KILL_GRACE_S = 5.0


def exec_command(backend: Backend, experiment: str, node: str, command: str, *,
                 timeout_s: float = 0.0, ready_timeout_s: float = 30.0,
                 output_cap: int = DEFAULT_OUTPUT_CAP,
                 on_output: OutputFollower | None = None) -> CommandResult:
    """Run shell line `command` on `node` of deployed `experiment` and wait
    for its result. `timeout_s`: virtual seconds after which the agent kills
    it (0: none). Interrupted (Ctrl-C), the command is sent SIGTERM and given
    KILL_GRACE_S to end, so it does not outlive the caller. `on_output`
    gets (stream, bytes) as the output comes (0: stdout, 1: stderr), all of
    it before this returns.

    ExperimentError for a node the experiment does not have or a paused
    experiment; the backend's errors for an experiment it does not know;
    ControlError (GuestLost, ProtocolMismatch) when the node's agent does
    not answer."""
    spec = CommandSpec(shell=command, timeout_ns=round(timeout_s * 1e9))
    spec.encode()                   # a bad command refused before any connection
    with _attached(backend, experiment, node, ready_timeout_s, output_cap) as channel:
        return _waited(channel, node, [spec], on_output)[0]


def copy_file(backend: Backend, experiment: str, src: str, dest: str, *,
              mode: int | None = None, ready_timeout_s: float = 30.0,
              output_cap: int = DEFAULT_OUTPUT_CAP) -> Transfer:
    """`selena cp`: a file into or out of a node of deployed `experiment`
    (selena.transfer), one of `src` and `dest` written NODE:/PATH. Errors
    as exec_command's, and ScenarioError for a pair that names no node or
    two."""
    into, out_of = guest_side(dest), guest_side(src)
    if (into is None) == (out_of is None):
        raise ScenarioError(f"selena cp {src} {dest}: write exactly one side as NODE:/PATH "
                            "(e.g. selena cp NAME app.py h1:/root/app.py)")
    node = (into or out_of or ("", ""))[0]
    with _attached(backend, experiment, node, ready_timeout_s, output_cap) as channel:
        def run(lines: Sequence[str]) -> list[CommandResult]:
            return _waited(channel, node, [CommandSpec(shell=line) for line in lines])
        if into is not None:
            return transfer.put(run, node, src, into[1], mode=mode)
        assert out_of is not None
        return transfer.get(run, node, out_of[1], dest)


def guest_side(text: str) -> tuple[str, str] | None:
    """(node, path) of `NODE:/PATH`, or None for a local path."""
    match = re.fullmatch(r"([A-Za-z0-9_.-]+):(/.*)", text, re.S)
    return (match.group(1), match.group(2)) if match else None


@contextlib.contextmanager
def _attached(backend: Backend, experiment: str, node: str, ready_timeout_s: float,
              output_cap: int) -> Iterator[CommandChannel]:
    """A control channel of this process to `node`'s agent, closed after."""
    deployment = backend.deployed(experiment)
    domid = deployment.domids.get(node)
    if domid is None:
        raise ExperimentError(f"experiment {experiment} has no node {node!r}; its nodes: "
                              f"{', '.join(sorted(deployment.domids)) or 'none'}")
    if backend.frozen(deployment):
        # Its agent would answer nothing, and be called lost after seconds.
        raise ExperimentError(f"experiment {experiment} is paused: its guests run nothing "
                              f"until `selena resume {experiment}`")
    channel = backend.command_channel(deployment.tdf, output_cap=output_cap)
    try:
        channel.add_guest(node, domid)
        channel.wait_ready(ready_timeout_s)
        yield channel
    finally:
        channel.close()


def _waited(channel: CommandChannel, node: str, specs: Sequence[CommandSpec],
            on_output: OutputFollower | None = None) -> list[CommandResult]:
    """The commands' results, all started at once (the first one's output
    to `on_output` as it comes); interrupted, each still running is sent
    SIGTERM and given KILL_GRACE_S to end."""
    handles = [channel.submit(node, spec) for spec in specs]
    with relayed(handles[0], on_output):
        try:
            return [channel.wait(handle) for handle in handles]
        except BaseException:
            for handle in handles:
                if handle.done:
                    continue
                log.info("ending %r on %s: interrupted", handle.spec.describe(), node)
                try:
                    channel.kill(handle)
                    channel.wait(handle, timeout=KILL_GRACE_S)
                except ControlError as exc:
                    log.warning("%r on %s may still be running: %s",
                                handle.spec.describe(), node, exc)
            raise
