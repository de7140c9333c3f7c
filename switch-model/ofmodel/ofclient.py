"""A minimal OpenFlow 1.3 controller side (for calibration, tests and the
benchmark): accepts one switch connection, negotiates 1.3, answers echoes,
and matches replies to requests by xid."""

from __future__ import annotations

import asyncio
import itertools
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ofmodel import wire

OFPP_CONTROLLER = 0xFFFFFFFD
OFPP_ANY = 0xFFFFFFFF
OFPG_ANY = 0xFFFFFFFF
NO_BUFFER = 0xFFFFFFFF
OFPMP_DESC = 0


def oxm_match(*fields: tuple[int, bytes]) -> bytes:
    """ofp_match of OXM basic fields (field number, value), padded to 8."""
    body = b"".join(struct.pack("!HBB", 0x8000, f << 1, len(v)) + v for f, v in fields)
    match = struct.pack("!HH", 1, 4 + len(body)) + body
    return match + b"\0" * (-len(match) % 8)


def ipv4_dst_match(index: int) -> bytes:
    """A distinct match per index: eth_type IPv4 and ipv4_dst 10.x.y.z."""
    return oxm_match((5, struct.pack("!H", 0x0800)),
                     (12, struct.pack("!I", (10 << 24) | (index & 0xFFFFFF))))


def flow_mod(xid: int, command: int, match: bytes, *, table: int = 0, priority: int = 100,
             flags: int = 0) -> bytes:
    body = struct.pack("!QQBBHHHIIIHxx", 0, 0, table, command, 0, 0, priority, NO_BUFFER,
                       OFPP_ANY, OFPG_ANY, flags) + match
    return wire.message(wire.OF13, wire.FLOW_MOD, xid, body)


def delete_all(xid: int) -> bytes:
    return flow_mod(xid, wire.DELETE, oxm_match(), table=wire.OFPTT_ALL, priority=0)


def packet_out_to_controller(xid: int, frame: bytes) -> bytes:
    action = struct.pack("!HHIH6x", 0, 16, OFPP_CONTROLLER, 0xFFFF)
    body = struct.pack("!IIH6x", NO_BUFFER, OFPP_CONTROLLER, len(action)) + action + frame
    return wire.message(wire.OF13, wire.PACKET_OUT, xid, body)


def ethernet_frame(index: int) -> bytes:
    dst = b"\x02\x00\x00\x00\x00\x02"
    src = b"\x02\x00" + struct.pack("!I", index)
    return dst + src + b"\x88\xb5" + b"\0" * 46          # local experimental ethertype


@dataclass
class Received:
    packet_ins: list[float] = field(default_factory=list)
    errors: list[tuple[int, int, int]] = field(default_factory=list)   # xid, type, code
    other: list[bytes] = field(default_factory=list)     # unsolicited messages


class SwitchConnection:
    """The controller's end of one switch connection (OpenFlow 1.3)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.xids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[tuple[float, bytes]]] = {}
        self.received = Received()
        self.task: asyncio.Task[None] | None = None

    async def handshake(self) -> bytes:
        """HELLO (1.3 only) and FEATURES; returns the features reply."""
        self.writer.write(wire.message(wire.OF13, wire.HELLO, next(self.xids)))
        self.task = asyncio.create_task(self._read_loop())
        _, features = await self.request(wire.message(wire.OF13, wire.FEATURES_REQUEST,
                                                      next(self.xids)))
        return features

    def xid(self) -> int:
        return next(self.xids)

    def send(self, msg: bytes) -> None:
        self.writer.write(msg)

    async def request(self, msg: bytes, timeout: float = 30.0) -> tuple[float, bytes]:
        """Send and wait for the reply with the same xid: (arrival time, reply)."""
        xid = wire.parse_header(msg).xid
        future: asyncio.Future[tuple[float, bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[xid] = future
        self.writer.write(msg)
        await self.writer.drain()
        return await asyncio.wait_for(future, timeout)

    async def rtt(self, msg: bytes) -> float:
        start = time.monotonic()
        arrived, _ = await self.request(msg)
        return arrived - start

    def barrier(self) -> bytes:
        return wire.message(wire.OF13, wire.TYPES[wire.OF13].barrier_request, self.xid())

    def echo(self) -> bytes:
        return wire.message(wire.OF13, wire.ECHO_REQUEST, self.xid(), b"calibrate")

    def stats(self) -> bytes:
        return wire.message(wire.OF13, wire.TYPES[wire.OF13].stats_request, self.xid(),
                            struct.pack("!HH4x", OFPMP_DESC, 0))

    async def _read_loop(self) -> None:
        while (msg := await wire.read_message(self.reader)) is not None:
            now = time.monotonic()
            header = wire.parse_header(msg)
            if header.type == wire.ECHO_REQUEST:
                self.writer.write(wire.message(header.version, wire.ECHO_REPLY, header.xid,
                                               msg[8:]))
                continue
            if header.type == wire.PACKET_IN:
                self.received.packet_ins.append(now)
                continue
            if header.type == wire.ERROR and len(msg) >= 12:
                err_type, code = struct.unpack_from("!HH", msg, 8)
                self.received.errors.append((header.xid, err_type, code))
            future = self.waiting.pop(header.xid, None)
            if future is not None and not future.done():
                future.set_result((now, msg))
            else:
                self.received.other.append(msg)

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.writer.close()


async def accept_one(host: str, port: int, timeout: float = 60.0,
                     on_listening: Callable[[], None] | None = None,
                     ) -> tuple[SwitchConnection, asyncio.AbstractServer]:
    """Listen, take the first switch that connects, and handshake;
    on_listening runs once the socket listens (e.g. to point a switch at it)."""
    arrived: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await arrived.put((reader, writer))

    server = await asyncio.start_server(on_connect, host, port)
    if on_listening is not None:
        on_listening()
    reader, writer = await asyncio.wait_for(arrived.get(), timeout)
    conn = SwitchConnection(reader, writer)
    await conn.handshake()
    return conn, server
