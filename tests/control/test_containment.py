"""One guest cannot break the control channel for the others (issue 28): what
a guest writes into its own keys, and every error Xenstore answers about
them, fails only that guest's command (or loses only that guest) with a
named reason; the controller's own Xenstore connection keeps teardown's
apart. Real agents on a fake xenstored, and a fake Dom0 for the backend."""

from __future__ import annotations

import time

import pytest
from control_channel import GUESTS, apply_keys, guests_with_agents

from selena.backends.xl import XlBackend
from selena.control.channel import CommandResult, Controller, base_path
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XS_DIRECTORY, XS_WRITE, XenstoreConnection
from selena.errors import ControlError, GuestSetupError, ProtocolMismatch, XenstoreError
from selena.model import Topology
from selena.plan import make_plan


@pytest.fixture
def owned(xenstored, agent_binary):
    """Two guests with real agents; the controller on a connection of its own,
    `dom0` another (the one teardown would use)."""
    with guests_with_agents(xenstored, agent_binary) as dom0:
        ctl = Controller.connect(f"{xenstored.dir}/xs-dom0.sock", timeout=5)
        for name, domid in GUESTS.items():
            ctl.add_guest(name, domid)
        ctl.wait_ready(timeout=10)
        yield ctl, dom0, xenstored
        ctl.close()


def as_guest(xenstored, domid: int) -> XenstoreConnection:
    """A connection that Xenstore takes for the guest's own (what a hostile
    program in the guest can do through /dev/xen/xenbus)."""
    return XenstoreConnection(f"{xenstored.dir}/xs-dom{domid}.sock", timeout=5)


def run(ctl: Controller, guest: str, **kw) -> CommandResult:
    return ctl.run(guest, CommandSpec(**kw), timeout=20)


def test_a_guest_filling_its_stdout_directory_breaks_no_other_guest_nor_teardown(
        fake_xen, tmp_path):
    """The reviewer's reproduction, through the xl backend: h1 writes 300 keys
    with 15-digit names under its own out/<id>/stdout, so that a listing of
    it is over Xenstore's 4096 bytes. Dom0 never lists it: h2's commands go
    on, h1's command ends with its real output, and teardown works."""
    topo = Topology("hostile", tdf=1)
    h1, h2 = topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2)
    be = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    dep = be.deploy(make_plan(topo))
    ctl = be.command_channel(tdf=1)
    try:
        for node, domid in dep.domids.items():
            ctl.add_guest(node, domid)
        ctl.wait_ready(timeout=10)
        hostile = ctl.submit("h1", CommandSpec(shell="sleep 1.5; echo done"))
        other = ctl.submit("h2", CommandSpec(shell="sleep 0.5; echo fine"))
        time.sleep(0.3)
        stdout = f"{base_path(dep.domids['h1'])}/out/{hostile.id}/stdout"
        guest = as_guest(fake_xen.store, dep.domids["h1"])
        try:
            for i in range(300):
                guest.write(f"{stdout}/{10**14 + i}", "x")
        finally:
            guest.close()
        assert ctl.wait(other, timeout=10).stdout == b"fine\n"
        result = ctl.wait(hostile, timeout=10)
        # The junk keys are never read: the command's own chunks are all there is.
        assert result.ok and result.stdout == b"done\n", result
        assert run(ctl, "h2", shell="echo still").stdout == b"still\n"
        assert run(ctl, "h1", shell="echo again").stdout == b"again\n"
        with fake_xen.store.lock:
            listings = [path for who, kind, path in fake_xen.store.log
                        if who == 0 and kind == XS_DIRECTORY and "/selena/out" in path]
        assert listings == [], listings
    finally:
        ctl.close()
    # The controller's connection was its own: closed with it, not the backend's.
    assert ctl.xs is not be.xenstore()
    with pytest.raises(ControlError):
        ctl.xs.read("/local/domain")
    be.destroy("hostile")
    assert fake_xen.domains == {}
    assert fake_xen.dom0.read_or_none(f"/local/domain/{dep.domids['h1']}") is None
    # Even the listing refused as too large leaves that connection working.
    fake_xen.store.add_domain(9)
    for i in range(300):
        fake_xen.dom0.write(f"/local/domain/9/junk/{10**14 + i}", "")
    with pytest.raises(XenstoreError, match="E2BIG"):
        fake_xen.dom0.directory("/local/domain/9/junk")
    assert fake_xen.dom0.read("/local/domain/9/domid") == b"9"


def test_a_refused_request_about_one_command_fails_only_that_command(owned):
    """Xenstore refuses Dom0's acknowledgement of h1's output (EQUOTA, as a
    full quota would): that command fails, naming the refusal; the pump goes
    on serving both guests."""
    ctl, _dom0, xenstored = owned
    refused: list[str] = []

    def refuse_acks(domid: int, path: str) -> str | None:
        if domid == 0 and path.startswith(base_path(5)) and path.endswith("/ack"):
            refused.append(path)
            return "EQUOTA"
        return None

    xenstored.refuse_write = refuse_acks
    victim = ctl.submit("h1", CommandSpec(shell="seq 1 5000; sleep 0.5"))
    other = ctl.submit("h2", CommandSpec(shell="sleep 1; echo fine"))
    result = ctl.wait(victim, timeout=10)
    assert refused, "no acknowledgement was refused"
    assert (result.state, result.reason) == ("failed", "xenstore"), result
    assert "EQUOTA" in result.detail and "/ack" in result.detail
    assert ctl.wait(other, timeout=10).stdout == b"fine\n"
    xenstored.refuse_write = None
    assert run(ctl, "h1", argv=("echo", "again")).stdout == b"again\n"


def test_a_refused_command_spec_fails_only_that_command(owned):
    """submit() does not wait for the spec's write (the pump reads the reply):
    Xenstore refusing it (EQUOTA) fails that command with reason xenstore
    when waited for, and both guests go on being served."""
    ctl, dom0, xenstored = owned
    xenstored.refuse_write = lambda who, path: (
        "EQUOTA" if who == 0 and path.startswith(f"{base_path(5)}/cmd/") else None)
    other = ctl.submit("h2", CommandSpec(shell="sleep 0.3; echo fine"))
    wakes: list[float] = []
    wake = ctl.xs.wake
    ctl.xs.wake = lambda: (wakes.append(time.monotonic()), wake())[-1]
    victim = ctl.submit("h1", CommandSpec(argv=("echo", "never")))
    result = ctl.wait(victim, timeout=10)
    del ctl.xs.wake
    # A reply fires no watch event: the pump's poll is woken to look at once.
    assert wakes, "the refusal did not wake the pump"
    assert (result.state, result.reason) == ("failed", "xenstore"), result
    assert "EQUOTA" in result.detail and f"cmd/{victim.id}" in result.detail
    assert ctl.wait(other, timeout=10).stdout == b"fine\n"
    xenstored.refuse_write = None
    assert run(ctl, "h1", argv=("echo", "again")).stdout == b"again\n"
    assert dom0.read_or_none(f"{base_path(5)}/cmd/{victim.id}") is None


def _refuse_final_state(xenstored, domid: int, times: int | None) -> list[str]:
    """Refuse the first `times` writes (None: all) of a command's final
    state, its end marker's and its `state`'s, each with EQUOTA (`running`
    goes to another key, agent/started/<id>, let through); returns the
    refused paths."""
    seen: dict[str, int] = {}
    refused: list[str] = []

    def refuse(who: int, path: str) -> str | None:
        if who != domid or not (path.endswith("/state") or "/end/" in path):
            return None
        seen[path] = seen.get(path, 0) + 1
        if times is None or seen[path] <= times:
            refused.append(path)
            return "EQUOTA"
        return None

    xenstored.refuse_write = refuse
    return refused


def test_the_agent_tries_a_refused_final_state_again(owned):
    """Two refusals of the final state: the third try gets through and the
    command ends normally (today's agent only logged the first refusal, and
    the command looked hung until its timeout)."""
    ctl, _dom0, xenstored = owned
    refused = _refuse_final_state(xenstored, 5, times=2)
    began = time.monotonic()
    result = run(ctl, "h1", shell="echo hello; exit 4")
    # The marker is tried once (best effort), `state` until it gets through.
    assert [p.endswith("/state") for p in refused] == [False, True, True], refused
    assert result.state == "exited" and result.exit_code == 4 and result.stdout == b"hello\n"
    assert time.monotonic() - began < 5


def test_a_final_state_the_agent_cannot_write_is_reported_on_agent_error(owned):
    """Every try refused: after its tries the agent writes agent/error
    `lost-state <id> EQUOTA` and Dom0 fails that one command at once with
    reason state-lost, instead of waiting for it until a timeout."""
    ctl, dom0, xenstored = owned
    refused = _refuse_final_state(xenstored, 5, times=None)
    other = ctl.submit("h2", CommandSpec(shell="sleep 0.5; echo fine"))
    began = time.monotonic()
    handle = ctl.submit("h1", CommandSpec(shell="echo hello"))
    result = ctl.wait(handle, timeout=10)
    assert time.monotonic() - began < 5
    assert (result.state, result.reason) == ("failed", "state-lost"), result
    assert "EQUOTA" in result.detail and "EQUOTA" in result.summary()
    # The marker once, `state` FINAL_TRIES (agent.c) times.
    assert [p.endswith("/state") for p in refused] == [False] + [True] * 4, refused
    assert dom0.read(f"{base_path(5)}/agent/error") == f"lost-state {handle.id} EQUOTA".encode()
    with xenstored.lock:
        state_writes = [p for who, kind, p in xenstored.log
                        if who == 5 and kind == XS_WRITE and p.endswith(f"{handle.id}/state")]
    assert len(state_writes) == 4                   # four final tries
    assert ctl.wait(other, timeout=10).stdout == b"fine\n"
    xenstored.refuse_write = None
    assert run(ctl, "h1", argv=("echo", "again")).stdout == b"again\n"


# -- values of the guest's agent keys -------------------------------------------------


@pytest.fixture
def dom0_only(xenstored):
    """Dom0's keys for guest 7 and a controller, no agent: the test writes the
    agent's keys as a hostile guest would."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(7)
    apply_keys(dom0, 7)
    ctl = Controller(dom0)
    ctl.add_guest("g7", 7)
    yield ctl, dom0
    ctl.close()
    dom0.close()


def agent_keys(dom0: XenstoreConnection, **values: bytes) -> None:
    for key, value in values.items():
        dom0.write(f"{base_path(7)}/agent/{key}", value)


@pytest.mark.parametrize("keys, named", [
    ({"state": b"\xff\xfeready"}, "agent/state"),
    ({"state": b"ready", "version": b"1\xff"}, "agent/version"),
    ({"state": b"ready", "version": b"1", "net": b"failed 0 \xc3("}, "agent/net"),
])
def test_an_agent_key_that_is_not_utf8_refuses_that_guest_by_name(dom0_only, keys, named):
    ctl, dom0 = dom0_only
    agent_keys(dom0, **keys)
    with pytest.raises(ProtocolMismatch) as raised:
        ctl.wait_ready(timeout=2)
    assert str(raised.value).startswith(f"guest g7: {named} is not UTF-8 text: ")
    assert "\\x" in str(raised.value)           # the bad bytes, shown escaped


def test_escape_sequences_of_a_failed_agent_state_reach_no_terminal(dom0_only):
    ctl, dom0 = dom0_only
    agent_keys(dom0, state="failed \x1b]0;owned\x07\x1b[2J\x9b1m\nforged line".encode())
    with pytest.raises(ProtocolMismatch) as raised:
        ctl.wait_ready(timeout=2)
    text = str(raised.value)
    assert text.startswith("guest g7: agent failed ")
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in text), text
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x9b1m\\x0aforged line" in text


def test_escape_sequences_of_a_version_and_a_network_report_are_escaped(dom0_only):
    ctl, dom0 = dom0_only
    agent_keys(dom0, state=b"ready", version=b"\x1b[31m9")
    with pytest.raises(ProtocolMismatch, match=r"protocol '\\x1b\[31m9'"):
        ctl.wait_ready(timeout=2)
    agent_keys(dom0, version=b"1", net=b"failed 3\x1b[K %1B[2Jno%0Aroute")
    with pytest.raises(GuestSetupError) as raised:
        ctl.wait_ready(timeout=2)
    assert str(raised.value) == ("guest g7: network setup failed at directive 3\\x1b[K: "
                                 "\\x1b[2Jno\\x0aroute")


def test_a_summary_shows_the_guests_reason_and_detail_escaped():
    result = CommandResult(guest="h1", id="c", command="x", state="failed",
                           reason="exec\x1b[8m", detail="no\nsuch \x1b]52;c;AAAA\x07file")
    assert result.summary() == ("failed (exec\\x1b[8m: no\\x0asuch "
                                "\\x1b]52;c;AAAA\\x07file)")


def test_chunk_numbers_in_event_paths_are_ascii_digits_only():
    """Watch event paths are the guest's to choose: one that only looks like
    a number ("²" is a digit to str.isdigit) is ignored, not a ValueError in
    the pump."""
    from selena.control.channel import _last_chunks

    assert _last_chunks({"stdout/²", "stderr/٣", "stdout/7", "stderr/x"}) == (7, -1)
