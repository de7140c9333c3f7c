"""The CommandChannel interface (selena.control.interface): the Xenstore
controller and the Mininet namespace channel both implement it, and behave
alike where the lifecycle and the engine rely on it. The same checks run
against both: the controller with the real agent behind a fake xenstored
(toolchain tier), the namespace channel with `mnexec` stood in."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Collection

import pytest

from selena.backends.base import Backend
from selena.backends.mininet import MininetBackend, NamespaceChannel
from selena.backends.xl import XlBackend
from selena.control.channel import CommandHandle, CommandResult, Controller
from selena.control.interface import CommandChannel
from selena.control.keys import control_keys
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XenstoreConnection
from selena.engine import Engine, VirtualClock
from selena.errors import ControlError

# Stands in for `mnexec -a PID`: drops the pid, runs the command here.
NO_NAMESPACE = ("sh", "-c", 'shift; exec "$@"', "mnexec")


def _namespace_channel(request: pytest.FixtureRequest):
    ch = NamespaceChannel(NO_NAMESPACE)
    ch.add_guest("h1", os.getpid())
    ch.wait_ready(5)
    return ch, lambda: None


def _xenstore_channel(request: pytest.FixtureRequest):
    xenstored = request.getfixturevalue("xenstored")
    agent_binary = request.getfixturevalue("agent_binary")
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(5)
    for key in control_keys(5, "exp"):
        dom0.write(key.path, key.value)
        dom0.set_perms(key.path, list(key.perms))
    agent = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(5)])
    ctl = Controller(dom0, tdf=1.0)
    ctl.add_guest("h1", 5)
    ctl.wait_ready(10)

    def stop() -> None:
        agent.kill()
        agent.wait()
        dom0.close()
    return ctl, stop


@pytest.fixture(params=["namespace",
                        pytest.param("xenstore", marks=pytest.mark.toolchain)])
def any_channel(request):
    """Each implementation, attached to one node `h1`, ready."""
    make = _namespace_channel if request.param == "namespace" else _xenstore_channel
    ch, stop = make(request)
    yield ch
    ch.close()
    stop()


def test_both_channels_implement_the_protocol():
    # Subclasses (issubclass() refuses protocols with data members), so mypy
    # checks each signature against the protocol's.
    assert CommandChannel in Controller.__mro__ and CommandChannel in NamespaceChannel.__mro__
    assert isinstance(NamespaceChannel(NO_NAMESPACE), CommandChannel)
    # runtime_checkable: a member missing is not a channel.
    assert not isinstance(object(), CommandChannel)


def test_every_backend_hands_out_a_channel_and_only_xl_has_xenstore():
    # The interface no longer leaks Xen: nothing about Xenstore on Backend.
    assert not hasattr(Backend, "xenstore")
    assert not hasattr(MininetBackend, "xenstore")
    assert hasattr(XlBackend, "xenstore")
    assert "command_channel" in Backend.__abstractmethods__
    channel = MininetBackend().command_channel(1.0, output_cap=10)
    assert isinstance(channel, CommandChannel) and channel.output_cap == 10


def test_run_gives_exit_code_output_and_timing(any_channel):
    assert isinstance(any_channel, CommandChannel)
    result = any_channel.run("h1", CommandSpec(shell="echo out; echo err >&2; exit 3"),
                             timeout=30)
    assert (result.state, result.exit_code, result.guest) == ("exited", 3, "h1")
    assert (result.stdout, result.stderr) == (b"out\n", b"err\n")
    assert result.dur_ns is not None and result.end_ns >= result.start_ns
    assert not result.ok and result.summary() == "exited 3"


def test_a_follower_gets_every_byte_once_and_each_streams_end(any_channel):
    """handle.follow: the output as the channel keeps it (the Xenstore
    channel while the command runs, the namespace one at its end), from
    before the call on, then one empty piece per stream: its end."""
    heard: list[tuple[int, bytes]] = []
    first_line = threading.Event()

    def follower(stream: int, data: bytes) -> None:
        heard.append((stream, data))
        if data.startswith(b"a"):
            first_line.set()
    handle = any_channel.submit("h1", CommandSpec(shell="echo a; sleep 1; echo b; echo c >&2"))
    time.sleep(0.3)                 # some output kept before the follower comes
    handle.follow(follower)
    if isinstance(any_channel, Controller):
        assert first_line.wait(10) and not handle.done       # while it runs
    result = any_channel.wait(handle, 30)
    for stream, whole in enumerate((result.stdout, result.stderr)):
        pieces = [data for s, data in heard if s == stream]
        assert b"".join(pieces) == whole and pieces[-1] == b"" and pieces.count(b"") == 1
    # A second follower, after the end: it gets it all too, the first nothing more.
    before = len(heard)
    again: list[tuple[int, bytes]] = []
    handle.follow(lambda stream, data: again.append((stream, data)))
    assert len(heard) == before
    assert b"".join(d for s, d in again if s == 0) == result.stdout and again[-1] == (1, b"")


def test_a_follower_after_the_end_or_of_a_failed_channel_hears_the_end():
    handle = CommandHandle("h1", "x", CommandSpec(shell="true"), 0.0)
    handle._keep(0, b"so far ")
    handle._keep(0, b"")                            # a guest's empty chunk: nothing
    handle.complete(CommandResult("h1", "x", "true", "exited", exit_code=0,
                                  stdout=b"so far and the rest", stderr=b"e"))
    heard: list[tuple[int, bytes]] = []
    handle.follow(lambda stream, data: heard.append((stream, data)))
    assert heard == [(0, b"so far "), (0, b"and the rest"), (0, b""), (1, b"e"), (1, b"")]
    # Two followers while it runs (a run's --follow and a popen's pipes).
    both = CommandHandle("h1", "z", CommandSpec(shell="true"), 0.0)
    first: list[bytes] = []
    second: list[bytes] = []
    both.follow(lambda stream, data: first.append(data))
    both._keep(0, b"a")
    both.follow(lambda stream, data: second.append(data))
    both._keep(0, b"b")
    both.complete(CommandResult("h1", "z", "true", "exited", exit_code=0, stdout=b"ab"))
    assert first == [b"a", b"b", b"", b""] and second == [b"a", b"b", b"", b""]
    failed = CommandHandle("h1", "y", CommandSpec(shell="true"), 0.0)
    ended: list[tuple[int, bytes]] = []
    failed.follow(lambda stream, data: ended.append((stream, data)))
    failed._end()                                   # the channel failed: no result
    assert ended == [(0, b""), (1, b"")] and failed.done and failed.result is None

def test_kill_ends_a_command_reported_as_a_kill(any_channel):
    handle = any_channel.submit("h1", CommandSpec(shell="sleep 30"))
    time.sleep(0.5)
    assert not handle.done and handle.result is None
    with pytest.raises(ControlError, match="still running after 0.1 s"):
        any_channel.wait(handle, 0.1)
    any_channel.kill(handle, 15)
    result = any_channel.wait(handle, 20)
    assert (result.state, result.reason, result.signal) == ("killed", "kill", 15)
    assert handle.done and handle.result is result
    any_channel.kill(handle, 9)             # ended: nothing happens, no error


def test_a_command_timeout_is_enforced_by_the_channel(any_channel):
    began = time.monotonic()
    result = any_channel.run("h1", CommandSpec(shell="sleep 30", timeout_ns=300_000_000),
                             timeout=20)
    assert (result.state, result.reason) == ("killed", "timeout")
    assert time.monotonic() - began < 10


def test_an_unknown_node_and_a_closed_channel_are_control_errors(any_channel):
    with pytest.raises(ControlError, match="h9"):
        any_channel.submit("h9", CommandSpec(argv=("true",)))
    any_channel.set_tdf(1.0)                # both run at TDF 1 here
    any_channel.hold_heartbeats(True)       # a pause: no silent node counts as lost
    any_channel.hold_heartbeats(False)
    any_channel.close()
    with pytest.raises(ControlError, match="closed"):
        any_channel.submit("h1", CommandSpec(argv=("true",)))


class MemoryChannel(CommandChannel):
    """A third channel, written only against the public interface: it
    completes handles itself (no private attribute of CommandHandle)."""

    def __init__(self) -> None:
        self.tdf = 1.0
        self.output_cap = 100
        self.guests: dict[str, int] = {}
        self.handles: list[CommandHandle] = []

    def add_guest(self, name: str, where: int, /) -> None:
        self.guests[name] = where

    def wait_ready(self, timeout: float, nodes: Collection[str] | None = None) -> None:
        pass

    def submit(self, guest_name: str, spec: CommandSpec) -> CommandHandle:
        handle = CommandHandle(guest_name, f"m{len(self.handles)}", spec, time.time())
        self.handles.append(handle)
        if spec.shell != "hang":
            # Completed from another thread, as a real channel's pump would.
            threading.Timer(0.05, handle.complete, [CommandResult(
                guest_name, handle.id, spec.describe(), "exited", exit_code=0,
                stdout=spec.describe().encode())]).start()
        return handle

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        if not handle.done:
            handle.complete(CommandResult(handle.guest, handle.id, handle.spec.describe(),
                                          "killed", signal=signal, reason="kill"))

    def set_tdf(self, tdf: float) -> None:
        self.tdf = tdf

    def close(self) -> None:
        pass


def test_a_channel_written_to_the_interface_drives_the_engine():
    channel = MemoryChannel()
    assert isinstance(channel, CommandChannel)
    channel.add_guest("h1", 1)
    # run and wait come from the protocol itself.
    assert channel.run("h1", CommandSpec(shell="hello"), timeout=5).stdout == b"hello"
    engine = Engine(channel, {"h1": 1}, VirtualClock(1.0))
    try:
        assert engine.cmd("h1", "echo hi").ok
        hung = engine.start("h1", "hang", timeout=0.2)
        engine.kill(hung)
        assert engine.wait(hung).state == "killed"
        assert [r.result.command for r in engine.records] == ["echo hi", "hang"]
    finally:
        engine.stop()


def test_the_public_import_paths_still_work():
    # Issue 28 item 8: scripts and the lab import these; the interface moved
    # nothing away from them.
    import importlib

    for module, names in {
            "selena.experiment": ["Experiment"],
            "selena.backends.xl": ["XlBackend"],
            "selena.control.channel": ["Controller", "base_path", "CommandHandle",
                                       "CommandResult", "DEFAULT_OUTPUT_CAP"],
            "selena.control.xenstore": ["XenstoreConnection"],
            "selena.control.protocol": ["CommandSpec"],
            "selena.control.keys": ["control_keys"],
            "selena.cli.experiment": ["tdf_arg", "scenario_of"]}.items():
        loaded = importlib.import_module(module)
        assert all(hasattr(loaded, name) for name in names), module
