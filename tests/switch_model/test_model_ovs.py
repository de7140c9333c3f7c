"""Each rule of the switch model, measured through it against a real Open
vSwitch (a private sandbox, netdev datapath), with the model running as it
does in a switch guest (`python3 -m ofmodel proxy`) and a small OpenFlow 1.3
controller on the other side. Tolerances are on medians of many samples."""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from ofmodel import wire
from ofmodel.calibrate import calibrate, measure_insertion
from ofmodel.ofclient import (
    accept_one,
    delete_all,
    ethernet_frame,
    flow_mod,
    ipv4_dst_match,
    packet_out_to_controller,
)
from ofmodel.profile import load_profile
from ovs_sandbox import OvsSandbox, free_port

pytestmark = pytest.mark.toolchain

MODEL_DIR = Path(__file__).resolve().parents[2] / "switch-model"


@pytest.fixture(scope="module")
def ovs(tmp_path_factory) -> Iterator[OvsSandbox]:
    sandbox = OvsSandbox(tmp_path_factory.mktemp("ovs"))
    try:
        yield sandbox.start()
    finally:
        sandbox.stop()


def profile_file(tmp_path: Path, **rules) -> Path:
    data = {"name": "test", "provenance": {"source": "test"}, **rules}
    path = tmp_path / f"profile-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@contextlib.contextmanager
def model(profile: Path, controller_port: int) -> Iterator[int]:
    """The model proxy as a process; yields the port OVS should connect to."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ofmodel", "proxy", "--listen", f"127.0.0.1:{port}",
         "--controller", f"127.0.0.1:{controller_port}", "--profile", str(profile)],
        env={**os.environ, "PYTHONPATH": str(MODEL_DIR)}, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None      # stderr=PIPE
    try:
        line = proc.stderr.readline()
        assert "listening" in line, line + proc.stderr.read()
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def session(ovs: OvsSandbox, profile: Path, body):
    """Run `body(conn)` with OVS connected to our controller through the model."""
    controller_port = free_port()

    async def main():
        with model(profile, controller_port) as model_port:
            conn, server = await accept_one(
                "127.0.0.1", controller_port, timeout=30,
                on_listening=lambda: ovs.set_controller(model_port))
            try:
                return await body(conn)
            finally:
                await conn.close()
                server.close()
                ovs.set_controller(None)

    return asyncio.run(main())


async def insertion_ms(conn, n: int = 15) -> float:
    barrier = statistics.median([await conn.rtt(conn.barrier()) for _ in range(n)])
    samples = []
    for i in range(n):
        start = time.monotonic()
        conn.send(flow_mod(conn.xid(), wire.ADD, ipv4_dst_match(i)))
        arrived, _ = await conn.request(conn.barrier())
        samples.append(arrived - start - barrier)
    conn.send(delete_all(conn.xid()))
    await conn.rtt(conn.barrier())
    return 1000 * statistics.median(samples)


def test_flow_mod_insertion_delay(ovs, tmp_path):
    ideal = session(ovs, profile_file(tmp_path), insertion_ms)
    slow = session(ovs, profile_file(tmp_path, flow_mod={"delay": {
        "distribution": "constant", "ms": 20}}), insertion_ms)
    assert ideal < 5, f"the ideal model added {ideal:.1f} ms per flow_mod"
    assert 17 <= slow - ideal <= 26, f"20 ms profile: {slow:.1f} ms vs ideal {ideal:.1f} ms"


async def flood_packet_outs(conn, rate: float, seconds: float) -> tuple[int, int]:
    first = len(conn.received.packet_ins)
    start, sent = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate) + 1
        while sent < due:
            conn.send(packet_out_to_controller(conn.xid(), ethernet_frame(sent)))
            sent += 1
        await asyncio.sleep(0.002)
    await conn.rtt(conn.echo())
    await asyncio.sleep(0.5)
    return sent, len(conn.received.packet_ins) - first


def test_packet_in_rate_limit_drops_the_excess(ovs, tmp_path):
    sent, got = session(ovs, profile_file(tmp_path, packet_in={"max_rate": 20, "burst": 3}),
                        lambda c: flood_packet_outs(c, 200, 2.0))
    expected = 3 + 20 * 2.0
    assert sent >= 350
    assert abs(got - expected) <= 0.15 * expected, f"{got} packet_in of {sent}, want ~{expected}"
    sent, got = session(ovs, profile_file(tmp_path), lambda c: flood_packet_outs(c, 200, 2.0))
    assert got == sent, f"ideal profile: {got} packet_in of {sent}"


async def packet_in_latency_ms(conn, n: int = 15) -> float:
    echo = statistics.median([await conn.rtt(conn.echo()) for _ in range(n)])
    found = []
    for i in range(n):
        before = len(conn.received.packet_ins)
        start = time.monotonic()
        conn.send(packet_out_to_controller(conn.xid(), ethernet_frame(i)))
        while len(conn.received.packet_ins) == before:
            await asyncio.sleep(0.0005)
        found.append(conn.received.packet_ins[before] - start - echo)
        await asyncio.sleep(0.1)
    return 1000 * statistics.median(found)


def test_packet_in_delay(ovs, tmp_path):
    ideal = session(ovs, profile_file(tmp_path), packet_in_latency_ms)
    slow = session(ovs, profile_file(tmp_path, packet_in={"delay_ms": 30}), packet_in_latency_ms)
    assert 26 <= slow - ideal <= 36, f"30 ms packet_in delay: {slow:.1f} vs {ideal:.1f} ms"


def test_flow_table_capacity_refuses_with_table_full(ovs, tmp_path):
    def flows_in_ovs() -> int:
        return sum("nw_dst" in line for line in ovs.ofctl("dump-flows", ovs.mgmt).splitlines())

    async def body(conn):
        conn.send(delete_all(conn.xid()))
        xids = [conn.xid() for _ in range(11)]
        for i, xid in enumerate(xids):
            conn.send(flow_mod(xid, wire.ADD, ipv4_dst_match(i)))
        await conn.rtt(conn.barrier())
        refused = list(conn.received.errors)
        # Re-adding an existing entry replaces it: no new slot needed.
        conn.send(flow_mod(conn.xid(), wire.ADD, ipv4_dst_match(3)))
        # Freeing one entry makes room for the refused flow.
        conn.send(flow_mod(conn.xid(), wire.DELETE_STRICT, ipv4_dst_match(0)))
        conn.send(flow_mod(conn.xid(), wire.ADD, ipv4_dst_match(10)))
        await conn.rtt(conn.barrier())
        count = await asyncio.to_thread(flows_in_ovs)
        conn.send(delete_all(conn.xid()))
        await conn.rtt(conn.barrier())
        return xids, refused, list(conn.received.errors), count

    xids, refused, errors_after, count = session(
        ovs, profile_file(tmp_path, table={"capacity": 10}), body)
    # OpenFlow 1.3: OFPET_FLOW_MOD_FAILED (5), OFPFMFC_TABLE_FULL (1), for the 11th ADD.
    assert refused == [(xids[10], 5, 1)]
    assert errors_after == refused, "after a DELETE_STRICT the same ADD must succeed"
    assert count == 10, f"OVS holds {count} flows, the model admitted 10"


def test_barrier_and_stats_reply_latency(ovs, tmp_path):
    async def body(conn):
        echo = statistics.median([await conn.rtt(conn.echo()) for _ in range(10)])
        barrier = statistics.median([await conn.rtt(conn.barrier()) for _ in range(10)])
        stats = statistics.median([await conn.rtt(conn.stats()) for _ in range(10)])
        return 1000 * (barrier - echo), 1000 * (stats - echo)

    barrier, stats = session(ovs, profile_file(tmp_path, replies={"barrier_ms": 25,
                                                                  "stats_ms": 40}), body)
    assert 22 <= barrier <= 31, f"barrier {barrier:.1f} ms"
    assert 37 <= stats <= 46, f"stats {stats:.1f} ms"


def test_malformed_input_closes_only_that_session(ovs, tmp_path):
    """Garbage on one connection and a truncated message on another close
    those sessions only: OVS's session through the same model keeps working."""
    controller_port = free_port()

    async def main():
        with model(profile_file(tmp_path, table={"capacity": 5}), controller_port) as port:
            conn, server = await accept_one(
                "127.0.0.1", controller_port, timeout=30,
                on_listening=lambda: ovs.set_controller(port))
            try:
                closed = []
                for junk in (struct.pack("!BBHI", 4, 0, 3, 1) + b"zzzz",   # length 3
                             struct.pack("!BBHI", 4, 0, 200, 1) + b"short"):
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    writer.write(junk)
                    writer.write_eof()
                    # The model closes the session (EOF), it does not hang or crash.
                    closed.append(await asyncio.wait_for(reader.read(), 10) == b"")
                    writer.close()
                rtt = await conn.rtt(conn.barrier())
                conn.send(flow_mod(conn.xid(), wire.ADD, ipv4_dst_match(1)))
                await conn.rtt(conn.barrier())
                return closed, rtt, list(conn.received.errors)
            finally:
                await conn.close()
                server.close()
                ovs.set_controller(None)

    closed, rtt, errors = asyncio.run(main())
    assert closed == [True, True]
    assert rtt < 5.0 and errors == []


def test_unknown_types_and_short_bodies_pass_through(tmp_path):
    """In-process: a fake switch sends a message of unknown type and a
    flow_removed too short to parse; the controller receives both unchanged."""
    sys.path.insert(0, str(MODEL_DIR))
    from ofmodel.proxy import Proxy

    async def main():
        got: asyncio.Queue = asyncio.Queue()

        async def controller(reader, writer):
            while (msg := await wire.read_message(reader)) is not None:
                got.put_nowait(msg)

        ctl = await asyncio.start_server(controller, "127.0.0.1", 0)
        proxy = Proxy(load_profile(str(profile_file(tmp_path, table={"capacity": 5}))),
                      ("127.0.0.1", ctl.sockets[0].getsockname()[1]))
        port = await proxy.start("127.0.0.1", 0)
        _, switch = await asyncio.open_connection("127.0.0.1", port)
        unknown = wire.message(wire.OF13, 99, 7, b"opaque")
        short = wire.message(wire.OF13, wire.FLOW_REMOVED, 8, b"\0" * 4)
        switch.write(unknown + short)
        await switch.drain()
        first = await asyncio.wait_for(got.get(), 5)
        second = await asyncio.wait_for(got.get(), 5)
        switch.close()
        await proxy.close()
        ctl.close()
        return first, second

    assert asyncio.run(main()) == (wire.message(wire.OF13, 99, 7, b"opaque"),
                                   wire.message(wire.OF13, wire.FLOW_REMOVED, 8, b"\0" * 4))


def test_calibration_recovers_a_known_profile_within_10_percent(ovs, tmp_path):
    known = profile_file(tmp_path, flow_mod={"delay": {"distribution": "constant", "ms": 10}},
                         packet_in={"max_rate": 40, "burst": 5}, table={"capacity": 200})
    measured = session(ovs, known, lambda conn: calibrate(
        conn, name="measured", samples=30, max_table=300, rate_seconds=3.0))
    # The model delays a flow_mod before Open vSwitch inserts it, so the
    # switch calibrate sees takes the profile's 10 ms plus OVS's own
    # insertion time (about 0.02 ms here), measured in the same run.
    own_ms = 1000 * statistics.median(session(ovs, profile_file(tmp_path),
                                              lambda conn: measure_insertion(conn, 30)))
    insertion = measured.flow_mod_delay.median_s * 1000 - own_ms
    assert abs(insertion - 10) <= 1.0, (
        f"flow insertion median {insertion:.2f} ms above OVS's own {own_ms:.2f} ms, want 10")
    assert measured.packet_in_rate is not None
    assert abs(measured.packet_in_rate - 40) <= 4, f"packet_in rate {measured.packet_in_rate}"
    assert measured.table_capacity is not None
    assert abs(measured.table_capacity - 200) <= 20, f"table {measured.table_capacity}"
    # The written profile loads back as a profile.
    path = tmp_path / "measured.yaml"
    path.write_text(measured.to_yaml())
    assert load_profile(str(path)).table_capacity == measured.table_capacity


def _flow_mods(n: int) -> bytes:
    return b"".join(flow_mod(i + 1, wire.ADD, ipv4_dst_match(i)) for i in range(n))


def test_a_controller_faster_than_the_insertion_rate_is_slowed_by_tcp(tmp_path):
    """In-process: a controller writes 100k flow_mods at once through a
    profile inserting one per 5 ms; the model holds at most QUEUE_MESSAGES of
    them and stops reading, so the controller's own send buffer stays full
    (it feels the switch's rate) instead of the model queueing them all."""
    sys.path.insert(0, str(MODEL_DIR))
    from ofmodel.proxy import QUEUE_MESSAGES, Proxy

    async def main():
        sent: asyncio.Future = asyncio.get_running_loop().create_future()

        async def controller(reader, writer):
            writer.write(_flow_mods(100_000))
            sent.set_result(writer)
            await reader.read()

        ctl = await asyncio.start_server(controller, "127.0.0.1", 0)
        profile = load_profile(str(profile_file(tmp_path, flow_mod={"delay": {
            "distribution": "constant", "ms": 5}})))
        proxy = Proxy(profile, ("127.0.0.1", ctl.sockets[0].getsockname()[1]))
        port = await proxy.start("127.0.0.1", 0)
        switch_reader, switch = await asyncio.open_connection("127.0.0.1", port)
        writer = await asyncio.wait_for(sent, 5)
        await asyncio.sleep(1.5)
        (session,) = proxy.sessions
        held, unsent = session.down.qsize(), writer.transport.get_write_buffer_size()
        arrived = proxy.counters.to_switch
        switch.close()
        await proxy.close()
        ctl.close()
        return held, unsent, arrived

    held, unsent, arrived = asyncio.run(main())
    assert held <= QUEUE_MESSAGES
    assert arrived < 1000                       # about 300 at 5 ms each
    # A good part of the 100k never left the controller: TCP pushed back
    # (what did is in the kernel's socket buffers, a few MB on loopback).
    assert unsent > len(_flow_mods(100_000)) // 4, unsent


def test_a_failed_worker_closes_its_session_with_the_reason(tmp_path, caplog):
    """In-process: the packet_in worker of a session fails; the model closes
    both connections and logs why, rather than serve the rest half-working."""
    sys.path.insert(0, str(MODEL_DIR))
    from ofmodel import proxy as proxy_module

    async def broken(self):
        raise RuntimeError("worker bug")

    async def main():
        async def controller(reader, writer):
            await reader.read()
            writer.close()

        ctl = await asyncio.start_server(controller, "127.0.0.1", 0)
        profile = load_profile(str(profile_file(tmp_path)))
        proxy = proxy_module.Proxy(profile, ("127.0.0.1", ctl.sockets[0].getsockname()[1]))
        port = await proxy.start("127.0.0.1", 0)
        reader, switch = await asyncio.open_connection("127.0.0.1", port)
        closed = await asyncio.wait_for(reader.read(), 5)     # EOF: the session closed
        switch.close()
        await proxy.close()
        ctl.close()
        return closed, proxy.counters.failed_sessions

    original = proxy_module.Session._packet_in_worker
    proxy_module.Session._packet_in_worker = broken
    try:
        with caplog.at_level("ERROR"):
            closed, failed = asyncio.run(main())
    finally:
        proxy_module.Session._packet_in_worker = original
    assert closed == b"" and failed == 1
    assert "packet_in worker stopped: RuntimeError('worker bug')" in caplog.text
