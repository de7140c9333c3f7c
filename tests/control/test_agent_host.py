"""The real agent binary against the controller, on the host, through a fake
xenstored that enforces Xenstore permissions. The same behaviours are checked
against real Xen in tests/lab/test_control_e2e.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from control_channel import GUESTS, apply_keys, record_batches, run

from selena.control.channel import (
    CHANGE_SET_LIMIT,
    CHUNK_BATCH,
    Controller,
    _Guest,
    _note_change,
    base_path,
)
from selena.control.keys import control_keys
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XS_READ, XS_RM, XS_WRITE, XenstoreConnection
from selena.errors import ControlError, ProtocolMismatch


def wait_removed(xs: XenstoreConnection, path: str, timeout: float = 5.0) -> list[str]:
    """The controller removes a finished command's keys after handing out its
    result; what is left under `path` once that is done (or at the deadline)."""
    deadline = time.monotonic() + timeout
    while (left := xs.directory(path)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return left


def test_argv_command_output_exit_code_and_guest_timestamps(channel):
    ctl, *_ = channel
    before = time.time_ns()
    result = run(ctl, "h1", argv=("sh", "-c", "echo out; echo err >&2; exit 3"))
    assert result.state == "exited" and result.exit_code == 3
    assert result.stdout == b"out\n" and result.stderr == b"err\n"
    assert before <= result.start_ns <= result.end_ns <= time.time_ns()
    assert result.dur_ns is not None and result.dur_ns >= 0


def test_shell_env_cwd_and_awkward_bytes_survive_the_round_trip(channel, tmp_path):
    ctl, *_ = channel
    result = run(ctl, "h2", shell="printf '%s|%s|' \"$GREETING\" \"$(pwd)\"; printf '%s' \"$1\"",
                 env={"GREETING": "hé llo %20\ttab"}, cwd=str(tmp_path))
    assert result.ok, result
    assert result.stdout.decode() == f"hé llo %20\ttab|{tmp_path}|"
    args = ("printf", "%s\\n", "a b", "%41", "line\nbreak", "ünï")
    assert run(ctl, "h1", argv=args).stdout.decode() == "a b\n%41\nline\nbreak\nünï\n"


def test_output_larger_than_64k_arrives_whole_and_in_order(channel):
    ctl, dom0, xenstored, _ = channel
    result = run(ctl, "h1", shell="seq 1 60000; seq 1 3000 >&2", timeout=60)
    assert result.ok
    assert len(result.stdout) > 64 * 1024
    assert result.stdout.decode().split() == [str(i) for i in range(1, 60001)]
    assert result.stderr.decode().split() == [str(i) for i in range(1, 3001)]
    # Everything was cleaned up behind it.
    assert wait_removed(dom0, f"{base_path(5)}/out") == []
    assert wait_removed(dom0, f"{base_path(5)}/cmd") == []


def test_output_past_the_cap_is_dropped_counted_and_still_acknowledged(channel):
    ctl, dom0, _, _ = channel
    ctl.output_cap = 100_000
    full = "".join(f"{i}\n" for i in range(1, 60001)).encode()
    result = run(ctl, "h1", shell="seq 1 60000; seq 1 3000 >&2", timeout=60)
    # The guest was never held up: every chunk was read, acknowledged, removed.
    assert result.ok and result.truncated, result
    assert result.stdout == full[:100_000]
    assert result.stdout_dropped == len(full) - 100_000 and result.stderr_dropped == 0
    assert result.stderr.decode().split() == [str(i) for i in range(1, 3001)]
    assert wait_removed(dom0, f"{base_path(5)}/out") == []
    # The cap is per command: the next one starts from nothing.
    assert run(ctl, "h1", argv=("echo", "next")).stdout == b"next\n"


def test_parallel_commands_on_two_guests(channel):
    ctl, *_ = channel
    handles = [ctl.submit(g, CommandSpec(shell=f"sleep 0.3; echo {g}{i}"))
               for i in range(5) for g in GUESTS]
    results = [ctl.wait(h, timeout=30) for h in handles]
    assert sorted(r.stdout.decode().strip() for r in results) == \
        sorted(f"{g}{i}" for i in range(5) for g in GUESTS)


def test_timeout_kills_the_command_in_guest_time(channel):
    ctl, *_ = channel
    start = time.monotonic()
    result = run(ctl, "h1", shell="echo started; sleep 30", timeout_ns=500_000_000)
    assert result.state == "killed" and result.reason == "timeout" and result.signal == 9
    assert result.stdout == b"started\n"
    assert time.monotonic() - start < 10


def test_kill_reaches_the_whole_process_group(channel):
    ctl, *_ = channel
    handle = ctl.submit("h2", CommandSpec(shell="sleep 60 & sleep 60; echo never"))
    time.sleep(0.5)
    ctl.kill(handle, 15)
    result = ctl.wait(handle, timeout=10)
    assert result.state == "killed" and result.signal == 15 and result.reason == "kill"
    assert b"never" not in result.stdout


def test_a_sigint_kill_ends_a_command_though_the_agent_ignores_sigint(channel):
    """The channel's agents ignore SIGINT and SIGQUIT, as a guest's init
    leaves them; their commands start with the default dispositions, so
    Mininet's sendInt (a SIGINT kill) ends one, shell and all."""
    ctl, *_ = channel
    for sig in (signal.SIGINT, signal.SIGQUIT):
        handle = ctl.submit("h1", CommandSpec(shell="sleep 60; echo never"))
        time.sleep(0.5)
        ctl.kill(handle, sig)
        result = ctl.wait(handle, timeout=10)
        assert (result.state, result.signal) == ("killed", sig), result
        assert b"never" not in result.stdout


def test_unknown_program_and_bad_spec_fail_without_killing_the_agent(channel):
    ctl, dom0, *_ = channel
    result = run(ctl, "h1", argv=("/no/such/program",))
    assert result.state == "failed" and result.reason == "exec"
    assert "/no/such/program" in result.detail
    # Written behind the controller's back: an unknown version and garbage.
    for cid, text in (("v9", "selena-cmd 9\narg true\n"), ("junk", "\x01\x02 garbage")):
        dom0.write(f"{base_path(5)}/cmd/{cid}", text)
    deadline = time.monotonic() + 5
    states = {}
    while time.monotonic() < deadline and len(states) < 2:
        for cid in ("v9", "junk"):
            raw = dom0.read_or_none(f"{base_path(5)}/out/{cid}/state")
            if raw:
                states[cid] = raw.decode()
        time.sleep(0.05)
    assert states["v9"].startswith("failed reason=version")
    assert states["junk"].startswith("failed reason=bad-spec")
    assert run(ctl, "h1", argv=("true",)).ok     # still serving


def test_guest_cannot_forge_commands_or_read_other_guests(channel):
    ctl, dom0, xenstored, agent = channel
    sock5 = f"{xenstored.dir}/xs-dom5.sock"

    def as_guest(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(agent), "--device", sock5, "xs", *args],
                              capture_output=True, text=True, timeout=10)

    forged = as_guest("write", f"{base_path(5)}/cmd/evil", "selena-cmd 1\narg true\n")
    assert forged.returncode == 1 and forged.stdout.strip() == "EACCES"
    assert as_guest("write", f"{base_path(5)}/version", "2").stdout.strip() == "EACCES"
    assert as_guest("read", f"{base_path(6)}/version").stdout.strip() == "EACCES"
    assert as_guest("ls", f"{base_path(6)}/out").stdout.strip() == "EACCES"
    own = as_guest("write", f"{base_path(5)}/out/mine", "x")
    assert own.returncode == 0
    assert dom0.read_or_none(f"{base_path(5)}/cmd/evil") is None


def test_lost_guest_is_reported(channel):
    ctl, dom0, xenstored, _ = channel
    handle = ctl.submit("h2", CommandSpec(shell="sleep 60"))
    time.sleep(0.3)
    xenstored.remove_domain(6)
    result = ctl.wait(handle, timeout=10)
    assert result.state == "lost" and "gone" in result.detail


def test_controller_refuses_an_agent_of_another_version(xenstored, agent_binary):
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(7)
    apply_keys(dom0, 7)
    dom0.write(f"{base_path(7)}/version", "2")
    proc = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(7)])
    ctl = Controller(dom0)
    try:
        ctl.add_guest("old", 7)
        with pytest.raises(ProtocolMismatch, match="old"):
            ctl.wait_ready(timeout=5)
        assert proc.wait(timeout=5) == 1
    finally:
        ctl.close()
        proc.kill()
        dom0.close()


@pytest.mark.parametrize("features", [None, "", "some-future-word", "endmarkers end-markers-2"])
def test_an_agent_gives_end_markers_only_to_a_dom0_that_asks(xenstored, agent_binary, features):
    """A Dom0 from before end markers writes no `features` (or one without
    `end-markers`): the agent writes exited and killed states to `state`,
    which such a Dom0 waits for, and no marker."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(7)
    apply_keys(dom0, 7)
    if features is None:
        dom0.rm(f"{base_path(7)}/features")
    else:
        dom0.write(f"{base_path(7)}/features", features)
    proc = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(7)])
    ctl = Controller(dom0)
    try:
        ctl.add_guest("older", 7)
        ctl.wait_ready(timeout=10)
        with xenstored.lock:
            xenstored.log.clear()
        exited = ctl.run("older", CommandSpec(shell="echo hi; exit 3"), timeout=10)
        killed = ctl.run("older", CommandSpec(argv=("sleep", "5"), timeout_ns=10**8),
                         timeout=10)
        assert (exited.exit_code, exited.stdout) == (3, b"hi\n"), exited
        assert (killed.state, killed.reason) == ("killed", "timeout"), killed
        with xenstored.lock:
            written = [path for who, kind, path in xenstored.log if who == 7 and kind == XS_WRITE]
        for handle in (exited, killed):
            assert f"{base_path(7)}/out/{handle.id}/state" in written, written
        assert not [path for path in written if "/end/" in path], written
    finally:
        ctl.close()
        proc.kill()
        dom0.close()


def test_the_features_dom0_writes_ask_for_end_markers():
    """What the agent looks for (guest-agent/src/agent.c) is what Dom0 writes."""
    features = [k.value for k in control_keys(5, "exp") if k.path.endswith("/features")]
    assert features and "end-markers" in features[0].split(), features


def test_a_pooled_guest_serves_the_next_experiment_when_its_keys_return(channel):
    ctl, dom0, xenstored, _ = channel
    old = ctl.submit("h1", CommandSpec(argv=("sleep", "61.25")))
    time.sleep(0.5)
    # What the backend does to pool the guest, then to reuse it.
    dom0.rm(base_path(5))
    assert ctl.wait(old, timeout=10).state == "lost"
    apply_keys(dom0, 5)
    fresh = Controller(dom0)
    try:
        fresh.add_guest("next", 5)
        fresh.wait_ready(timeout=10)
        assert fresh.run("next", CommandSpec(argv=("echo", "again")), timeout=10).stdout \
            == b"again\n"
    finally:
        fresh.close()
    # SIGKILLed, it is gone once it is scheduled (a moment on a busy host).
    assert _gone("sleep 61.25"), "the old experiment's command was not killed"


@pytest.mark.parametrize("garbage", ["nonsense", "exited code=abc", "exited code=0 out=9 err=0"])
def test_a_guest_writing_garbage_fails_only_its_own_command(channel, garbage):
    """A hostile or broken guest writes a malformed state (or claims output
    chunks that do not exist) into its own keys: that command fails with the
    reason, and the pump keeps serving every guest."""
    ctl, _dom0, xenstored, agent = channel
    victim = ctl.submit("h1", CommandSpec(shell="sleep 3"))
    other = ctl.submit("h2", CommandSpec(shell="sleep 1; echo fine"))
    time.sleep(0.3)
    wrote = subprocess.run([str(agent), "--device", f"{xenstored.dir}/xs-dom5.sock", "xs",
                            "write", f"{base_path(5)}/out/{victim.id}/state", garbage],
                           capture_output=True, text=True, timeout=10)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    result = ctl.wait(victim, timeout=10)
    assert result.state == "failed" and result.reason == "protocol"
    assert garbage.split()[0] in result.detail or "chunks" in result.detail
    assert ctl.wait(other, timeout=10).stdout == b"fine\n"
    assert run(ctl, "h2", shell="echo still").stdout == b"still\n"
    assert run(ctl, "h1", shell="echo again").stdout == b"again\n"


@pytest.mark.parametrize("marker", ["exited_abc_1_2_3_0_0_0", "killed_9_bogus_1_2_3_0_0_0",
                                    "exited_0_1_2_3_5_0_0", "exited_0"])
def test_a_guest_writing_a_bad_end_marker_fails_only_its_own_command(channel, marker):
    """The end marker's name is the guest's text like any other: malformed,
    or claiming output chunks that do not exist, it fails its own command
    with the reason; the pump keeps serving every guest."""
    ctl, _dom0, xenstored, agent = channel
    victim = ctl.submit("h1", CommandSpec(shell="sleep 3"))
    other = ctl.submit("h2", CommandSpec(shell="sleep 1; echo fine"))
    time.sleep(0.3)
    wrote = subprocess.run([str(agent), "--device", f"{xenstored.dir}/xs-dom5.sock", "xs",
                            "write", f"{base_path(5)}/out/{victim.id}/end/{marker}", ""],
                           capture_output=True, text=True, timeout=10)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    result = ctl.wait(victim, timeout=10)
    assert (result.state, result.reason) == ("failed", "protocol"), result
    assert "end marker" in result.detail or "chunks" in result.detail, result.detail
    assert ctl.wait(other, timeout=10).stdout == b"fine\n"
    assert run(ctl, "h1", shell="echo again").stdout == b"again\n"


def test_a_final_state_without_an_end_marker_is_read(channel):
    """An agent that writes no end marker (an older one) is served as before:
    the event of its `state` makes Dom0 read it."""
    ctl, _dom0, xenstored, agent = channel
    handle = ctl.submit("h1", CommandSpec(shell="sleep 3"))
    time.sleep(0.3)
    state = "exited code=7 start=1 end=2 dur=1 stdout=0 stderr=0"
    wrote = subprocess.run([str(agent), "--device", f"{xenstored.dir}/xs-dom5.sock", "xs",
                            "write", f"{base_path(5)}/out/{handle.id}/state", state],
                           capture_output=True, text=True, timeout=10)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    result = ctl.wait(handle, timeout=10)
    assert (result.state, result.exit_code, result.dur_ns) == ("exited", 7, 1), result


def test_submit_fails_fast_once_the_channel_is_closed(channel):
    ctl, *_ = channel
    ctl.close()
    with pytest.raises(ControlError, match="closed"):
        ctl.submit("h1", CommandSpec(shell="true"))


def test_an_idle_guest_churning_its_keys_cannot_grow_the_change_set():
    """Watch events for a guest with nothing running are kept until its next
    command; a guest creating key after key collapses them into one
    're-read everything' instead of growing Dom0's memory."""
    guest = _Guest("h1", 5, base_path(5))
    guest.changed = set()
    for i in range(CHANGE_SET_LIMIT - 1):
        _note_change(guest, f"junk{i}")
    assert len(guest.changed) == CHANGE_SET_LIMIT - 1
    for i in range(10 * CHANGE_SET_LIMIT):
        _note_change(guest, f"more{i}")
        assert len(guest.changed) <= CHANGE_SET_LIMIT
    assert guest.changed == {None}


def test_a_guest_flooding_output_delays_another_guest_by_little(channel):
    """h1 writes as fast as it can (past the output cap) while h2 answers
    echo after echo: the pump serves both (it once answered nothing on h2
    for 10 s)."""
    ctl, *_ = channel
    ctl.output_cap = 256 * 1024
    flood = ctl.submit("h1", CommandSpec(argv=("yes",), timeout_ns=4_000_000_000))
    time.sleep(0.5)
    waits = []
    for _ in range(5):
        began = time.monotonic()
        assert run(ctl, "h2", argv=("echo", "hi"), timeout=10).stdout == b"hi\n"
        waits.append(time.monotonic() - began)
    result = ctl.wait(flood, timeout=20)
    assert result.reason == "timeout" and result.stdout_dropped > 0, result
    assert len(result.stdout) == 256 * 1024
    assert max(waits) < 2.0, waits


def test_a_chunk_the_guest_cannot_write_is_counted_and_fails_the_command(channel):
    """Xenstore refuses one output chunk (EQUOTA): the agent reports the bytes
    it lost in the final state, and Dom0 does not take the output as whole."""
    ctl, _dom0, xenstored, _ = channel
    refused: list[str] = []

    def refuse_third_chunk(domid: int, path: str) -> str | None:
        if domid == 5 and path.endswith("/stdout/2") and not refused:
            refused.append(path)
            return "EQUOTA"
        return None

    xenstored.refuse_write = refuse_third_chunk
    full = "".join(f"{i}\n" for i in range(1, 20001)).encode()
    result = run(ctl, "h1", shell="seq 1 20000", timeout=60)
    assert refused, "no chunk write was refused"
    assert result.state == "exited" and result.exit_code == 0
    assert not result.ok and 0 < result.lost_bytes <= 2048, result
    assert len(result.stdout) + result.lost_bytes == len(full)
    assert "output bytes lost in the guest" in result.summary()
    xenstored.refuse_write = None
    assert run(ctl, "h1", argv=("echo", "whole")).ok


def test_unacknowledged_chunks_stay_within_the_domain_quota(channel):
    """40 commands writing output while nobody acknowledges it: the agent
    stops at 512 chunks in Xenstore in all (16 per stream would be 640),
    well under oxenstored's 1000 entries per domain."""
    ctl, dom0, _, _ = channel
    ctl.close()                                     # nobody reads or acknowledges now
    base = base_path(5)
    for i in range(40):
        dom0.write(f"{base}/cmd/flood{i:02d}", CommandSpec(shell="seq 1 200000").encode())
    deadline, chunks = time.monotonic() + 30, 0
    while time.monotonic() < deadline:
        running = [c for c in dom0.directory(f"{base}/out")
                   if (dom0.read_or_none(f"{base}/agent/started/{c}") or b"").startswith(b"running")
                   and dom0.read_or_none(f"{base}/out/{c}/state") is None]
        chunks = sum(len(dom0.directory(f"{base}/out/{c}/stdout"))
                     for c in dom0.directory(f"{base}/out")
                     if "stdout" in dom0.directory(f"{base}/out/{c}"))
        if len(running) == 40 and chunks >= 512:
            break
        time.sleep(0.2)
    time.sleep(1)                                   # would it write more?
    chunks = sum(len(dom0.directory(f"{base}/out/{c}/stdout"))
                 for c in dom0.directory(f"{base}/out")
                 if "stdout" in dom0.directory(f"{base}/out/{c}"))
    assert chunks == 512, chunks


def _running(pattern: str) -> str:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.strip()


def _gone(pattern: str, within: float = 2.0) -> bool:
    """No process matches within `within` s: one killed is gone once it runs
    again, which on a busy host can be after the agent has reported."""
    deadline = time.monotonic() + within
    while _running(pattern) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pattern)


def test_kill_reaches_a_child_that_outlives_the_commands_shell(channel):
    """The shell exits at once; its background child keeps the output pipe
    open, so the command is still running, and a kill must reach the child."""
    ctl, *_ = channel
    handle = ctl.submit("h1", CommandSpec(shell="sleep 61.5 & echo started"))
    time.sleep(0.5)
    assert _running("sleep 61.5"), "the child did not start"
    ctl.kill(handle, 9)
    result = ctl.wait(handle, timeout=10)
    assert result.stdout == b"started\n"
    deadline = time.monotonic() + 5
    while _running("sleep 61.5") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running("sleep 61.5"), "the kill did not reach the shell's child"


def test_a_new_session_kills_what_finished_commands_left_behind(channel):
    """A finished command's background child (detached from its output)
    lives on through the experiment, and not into the next one on a pooled
    guest."""
    ctl, dom0, _, _ = channel
    result = run(ctl, "h1", shell="sleep 61.75 >/dev/null 2>&1 & echo left")
    assert result.ok and result.stdout == b"left\n"
    assert _running("sleep 61.75"), "the child did not outlive its command"
    dom0.rm(base_path(5))                       # what pooling, then reuse, does
    apply_keys(dom0, 5)
    fresh = Controller(dom0)
    try:
        fresh.add_guest("next", 5)
        fresh.wait_ready(timeout=10)
        assert fresh.run("next", CommandSpec(argv=("echo", "new")), timeout=10).ok
    finally:
        fresh.close()
    deadline = time.monotonic() + 5
    while _running("sleep 61.75") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running("sleep 61.75"), "the previous experiment's child survived"


def test_a_restarted_agent_fails_what_its_predecessor_ran_and_serves_on(channel):
    """The agent dies mid-command and init starts another (the templates'
    respawn loop): the orphaned command is killed and reported failed
    (reason restarted) instead of leaving Dom0 waiting, the network is not
    configured twice, and the guest serves the next command."""
    ctl, dom0, xenstored, agent_binary = channel
    agent_pid = int(run(ctl, "h1", shell="echo $PPID").stdout)
    orphan = ctl.submit("h1", CommandSpec(shell="sleep 62.25; echo never"))
    time.sleep(0.5)
    assert _running("sleep 62.25")
    net_before = dom0.read_or_none(f"{base_path(5)}/agent/net")
    os.kill(agent_pid, signal.SIGKILL)
    successor = subprocess.Popen([str(agent_binary), "--device",
                                  f"{xenstored.dir}/xs-dom5.sock"])
    try:
        result = ctl.wait(orphan, timeout=15)
        assert (result.state, result.reason) == ("failed", "restarted"), result
        assert _gone("sleep 62.25"), "the orphaned command still runs"
        assert dom0.read_or_none(f"{base_path(5)}/agent/net") == net_before
        assert run(ctl, "h1", argv=("echo", "served")).stdout == b"served\n"
    finally:
        successor.kill()
        successor.wait()


def test_the_echo_responder_copies_each_ping_to_pong(xenstored, agent_binary):
    """`selena-agent xs echo`: bench-control's floor, a Xenstore round trip
    with a watch on each side and no process started per round."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(7)
    apply_keys(dom0, 7)
    base = f"{base_path(7)}/out/bench"
    echo = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(7), "xs", "echo",
                             f"{base}/ping", f"{base}/pong", "3"])
    try:
        def pong_is(value: bytes) -> None:
            deadline = time.monotonic() + 10
            while dom0.read_or_none(f"{base}/pong") != value:
                assert time.monotonic() < deadline, f"pong never became {value!r}"
                time.sleep(0.01)

        pong_is(b"ready")
        for i in (1, 2, 3):
            dom0.write(f"{base}/ping", str(i))
            pong_is(str(i).encode())
        assert echo.wait(timeout=10) == 0        # done after COUNT pongs
    finally:
        echo.kill()
        echo.wait()
        dom0.close()


def test_the_agent_reads_only_the_spec_of_a_command(channel):
    """Each guest request is a Xenstore round trip, and under emulation a
    guest's round trip costs several milliseconds: a command's start waits
    for one read (its spec), its end is two writes sent together (the final
    state over `running`, then the end marker), and Dom0 removing a finished
    command costs the guest nothing."""
    ctl, _dom0, xenstored, _ = channel
    domid = GUESTS["h1"]
    # The agent's watch fires once at registration and it rescans `cmd` then
    # (reading the state of each command it finds); on a loaded host that
    # can come after the first command exists. A command run first is the
    # probe's, not the one counted.
    assert run(ctl, "h1", argv=("true",)).ok
    with xenstored.lock:
        xenstored.log.clear()
    first = ctl.submit("h1", CommandSpec(argv=("true",)))
    assert ctl.wait(first, timeout=20).ok
    # The agent handles events in order. The first command's removal rides
    # along with the second's spec, on the same connection: the third's
    # spec comes after it, so once the third command is done the removal
    # of the first has been seen.
    assert run(ctl, "h1", argv=("true",)).ok
    assert run(ctl, "h1", argv=("true",)).ok
    with xenstored.lock:
        guest = [(kind, path) for who, kind, path in xenstored.log
                 if who == domid and f"/{first.id}" in path]
    base = base_path(domid)
    assert guest[:3] == [(XS_READ, f"{base}/cmd/{first.id}"),          # the spec
                         (XS_WRITE, f"{base}/agent/started/{first.id}"),  # running
                         (XS_WRITE, f"{base}/agent/started/{first.id}")]  # exited,
    marker = f"{base}/out/{first.id}/end/exited_0_"                     # and its marker
    assert len(guest) == 4 and guest[3][0] == XS_WRITE and guest[3][1].startswith(marker), \
        guest


def test_dom0_reads_no_command_state_the_end_marker_carries_it(channel):
    """`running` is in the agent's started/<id>, which Dom0 never reads, and
    the final state comes in the name of the command's end marker: a
    command costs Dom0 the spec's write and the removal of its three keys,
    sent together (each request is Dom0 CPU, dear under emulation)."""
    ctl, _dom0, xenstored, _ = channel
    assert run(ctl, "h1", argv=("true",)).ok       # the guest's first-pass probe
    with xenstored.lock:
        xenstored.log.clear()
    first = ctl.submit("h1", CommandSpec(argv=("sleep", "0.2")))
    assert ctl.wait(first, timeout=20).ok
    base = base_path(GUESTS["h1"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with xenstored.lock:
            dom0 = [(kind, path) for who, kind, path in xenstored.log
                    if who == 0 and f"/{first.id}" in path]
            started = [path for who, kind, path in xenstored.log
                       if who == 5 and path.endswith(f"/agent/started/{first.id}")]
        if len(dom0) == 4:
            break
        time.sleep(0.01)
    time.sleep(0.2)                                 # nothing more comes
    with xenstored.lock:
        dom0 = [(kind, path) for who, kind, path in xenstored.log
                if who == 0 and f"/{first.id}" in path]
        ended = [path for who, kind, path in xenstored.log
                 if who == 5 and f"/out/{first.id}/end/exited_0_" in path]
    assert started, "the agent never wrote `started`"
    assert ended, "the agent wrote no end marker"
    assert dom0 == [(XS_WRITE, f"{base}/cmd/{first.id}"),
                    (XS_RM, f"{base}/cmd/{first.id}"),
                    (XS_RM, f"{base}/out/{first.id}"),
                    (XS_RM, f"{base}/agent/started/{first.id}")], dom0


def test_events_that_cannot_give_work_do_not_wake_the_pump_loop(channel):
    """A `true` fires two events at Dom0's watches (its end marker, our own
    removal of its `out` key; `started`, where its final state also goes,
    and the heartbeat are not watched); only the end marker's makes the
    pump look at the guest."""
    ctl, *_ = channel
    assert run(ctl, "h1", argv=("true",)).ok       # the guest's first-pass probe
    time.sleep(0.2)                                 # its removal's events
    passes: list[tuple] = []
    collect = ctl._collect

    def counted(guest, changes, *rest):
        passes.append(changes)          # (everything re-read?, changed paths by id)
        collect(guest, changes, *rest)

    ctl._collect = counted
    try:
        handle = ctl.submit("h1", CommandSpec(argv=("sleep", "0.2")))
        assert ctl.wait(handle, timeout=20).ok
        time.sleep(0.2)
    finally:
        del ctl._collect
    assert len(passes) == 1 and not passes[0][0], passes
    changed = passes[0][1]
    assert list(changed) == [handle.id] and len(changed[handle.id]) == 1, passes
    marker, = changed[handle.id]
    assert marker.startswith("end/exited_0_"), passes


def test_an_id_is_served_again_once_dom0_removed_its_keys(channel):
    """The agent skips reading on the removal of a command it answered; the
    same id written afterwards is a new command (bench-control's subprocess
    baseline numbers its commands from 0 in every round)."""
    _ctl, dom0, _xenstored, _ = channel
    base = base_path(GUESTS["h1"])

    def final_state() -> bytes:
        # An exited command's final state: in agent/started/<id>, over
        # `running`, beside its end marker (PROTOCOL.md).
        deadline = time.monotonic() + 10
        while True:
            state = dom0.read_or_none(f"{base}/agent/started/again") or b""
            if state and not state.startswith(b"running"):
                return state
            assert time.monotonic() < deadline, "the command never ended"
            time.sleep(0.01)

    for code in (3, 4):
        dom0.write(f"{base}/cmd/again", CommandSpec(argv=("sh", "-c", f"exit {code}")).encode())
        assert final_state().startswith(f"exited code={code} ".encode())
        for key in ("cmd", "out", "agent/started"):
            dom0.rm(f"{base}/{key}/again")


def test_a_guest_announcing_a_far_chunk_costs_dom0_one_bounded_batch(channel):
    """Dom0 reads the chunks the events announce in one pipelined batch; a
    guest announcing chunk 10^9 gets at most CHUNK_BATCH reads, not a loop
    (or a list) up to its number, and its command still ends well."""
    ctl, _dom0, xenstored, agent = channel
    victim = ctl.submit("h1", CommandSpec(shell="sleep 1; echo done"))
    time.sleep(0.3)
    far = f"{base_path(5)}/out/{victim.id}/stdout/1000000000"
    wrote = subprocess.run([str(agent), "--device", f"{xenstored.dir}/xs-dom5.sock", "xs",
                            "write", far, "bogus"], capture_output=True, text=True, timeout=10)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    result = ctl.wait(victim, timeout=10)
    assert result.ok and result.stdout == b"done\n", result
    with xenstored.lock:
        reads = [path for who, kind, path in xenstored.log
                 if who == 0 and kind == XS_READ and f"/{victim.id}/stdout/" in path]
    assert 0 < len(reads) <= 2 * CHUNK_BATCH, len(reads)
    assert run(ctl, "h2", shell="echo still").stdout == b"still\n"


def test_an_id_removed_while_its_command_ran_is_served_again(channel):
    """Dom0 removes a running command's keys (a failed controller does); once
    the command has ended, the same id is a new command, not a removal."""
    _ctl, dom0, _xenstored, _ = channel
    base = base_path(GUESTS["h1"])

    def state_of(cid: str, want: bytes, key: str = "agent/started/{}") -> bytes:
        deadline = time.monotonic() + 10
        while not (state := dom0.read_or_none(f"{base}/{key.format(cid)}") or b"").startswith(want):
            assert time.monotonic() < deadline, f"{cid} never reached {want!r}: {state!r}"
            time.sleep(0.01)
        return state

    dom0.write(f"{base}/cmd/early", CommandSpec(shell="sleep 0.5; exit 5").encode())
    state_of("early", b"running")
    dom0.rm(f"{base}/cmd/early")
    assert state_of("early", b"exited").startswith(b"exited code=5 ")
    dom0.rm(f"{base}/out/early")
    dom0.rm(f"{base}/agent/started/early")
    dom0.write(f"{base}/cmd/early", CommandSpec(shell="exit 6").encode())
    assert state_of("early", b"exited").startswith(b"exited code=6 ")


@pytest.mark.parametrize("net, index", [("frobnicate eth0\n", 0), ("\n\nfrobnicate\n", 0)])
def test_a_directive_the_agent_cannot_parse_is_reported_on_agent_net(
        xenstored, agent_binary, net, index):
    """Boot-time network configuration (netconf.c): the first directive that
    fails is reported by its index among the non-empty lines, with the
    parser's words, and the agent still comes up ready."""
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(7)
    apply_keys(dom0, 7, net=net)
    proc = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(7)])
    try:
        deadline = time.monotonic() + 10
        while dom0.read_or_none(f"{base_path(7)}/agent/state") != b"ready":
            assert time.monotonic() < deadline, "the agent never became ready"
            time.sleep(0.01)
        reported = dom0.read_or_none(f"{base_path(7)}/agent/net")
        assert reported == f"failed {index} unknown%20directive".encode()
    finally:
        proc.kill()
        proc.wait()
        dom0.close()


def test_a_silent_guest_is_lost_alone_and_heartbeats_are_read_in_one_batch(channel):
    """The liveness check, once a second, reads every guest's heartbeat in
    one pipelined batch (one round trip for all, not one each); a guest whose
    agent stops beating while it runs a command is lost, by name, once its
    limit passes, and the other guest serves on."""
    ctl, *_ = channel
    silent = int(run(ctl, "h2", shell="echo $PPID").stdout)     # h2's agent
    batches = record_batches(ctl)
    ctl.lost_after = 1.5
    handle = ctl.submit("h2", CommandSpec(argv=("sleep", "30")))
    time.sleep(0.3)
    os.kill(silent, signal.SIGSTOP)
    try:
        result = ctl.wait(handle, timeout=10)
        assert result.state == "lost" and "no heartbeat for" in result.detail, result
        assert run(ctl, "h1", argv=("echo", "on")).stdout == b"on\n"
    finally:
        os.kill(silent, signal.SIGCONT)
    both = [f"{base_path(domid)}/agent/heartbeat" for domid in GUESTS.values()]
    assert both in batches, batches
