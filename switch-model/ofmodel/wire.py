"""OpenFlow 1.0 and 1.3 framing and the few message bodies the model reads.

The hot path reads the 8-byte header only; bodies are decoded for the
messages a rule needs (flow_mod, flow_removed) and built for the one the model
sends itself (error).
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

HEADER = struct.Struct("!BBHI")
MAX_LENGTH = 0xFFFF

OF10 = 0x01
OF13 = 0x04
SUPPORTED = (OF10, OF13)

# Message types common to both versions.
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FEATURES_REQUEST, FEATURES_REPLY = 5, 6
PACKET_IN, FLOW_REMOVED, PORT_STATUS, PACKET_OUT, FLOW_MOD = 10, 11, 12, 13, 14


@dataclass(frozen=True)
class Types:
    """Message type numbers that differ between the versions."""

    stats_request: int
    stats_reply: int
    barrier_request: int
    barrier_reply: int
    flow_mod_failed: int        # error type
    table_full: int             # error code
    send_flow_rem: int          # flow_mod flag


TYPES = {
    OF10: Types(16, 17, 18, 19, flow_mod_failed=3, table_full=0, send_flow_rem=1),
    OF13: Types(18, 19, 20, 21, flow_mod_failed=5, table_full=1, send_flow_rem=1),
}

# flow_mod commands (same numbers in both versions)
ADD, MODIFY, MODIFY_STRICT, DELETE, DELETE_STRICT = 0, 1, 2, 3, 4
OFPTT_ALL = 0xFF


class MalformedMessage(Exception):
    """A message whose header cannot be framed (the connection is unusable)."""


@dataclass(frozen=True)
class Header:
    version: int
    type: int
    length: int
    xid: int


def parse_header(data: bytes) -> Header:
    version, msg_type, length, xid = HEADER.unpack_from(data)
    return Header(version, msg_type, length, xid)


async def read_message(reader: asyncio.StreamReader) -> bytes | None:
    """One whole message, or None at a clean end of stream. A length below 8
    cannot be framed: raise MalformedMessage (the stream has lost sync)."""
    try:
        head = await reader.readexactly(8)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise MalformedMessage(
                f"stream ended inside a header ({len(exc.partial)} bytes)") from None
        return None
    length = HEADER.unpack_from(head)[2]
    if length < 8:
        raise MalformedMessage(f"header says length {length}, less than the header itself")
    try:
        body = await reader.readexactly(length - 8) if length > 8 else b""
    except asyncio.IncompleteReadError as exc:
        raise MalformedMessage(f"stream ended {length - 8 - len(exc.partial)} bytes short "
                               "of the length the header gives") from None
    return head + body


def message(version: int, msg_type: int, xid: int, body: bytes = b"") -> bytes:
    return HEADER.pack(version, msg_type, 8 + len(body), xid) + body


def error(version: int, xid: int, err_type: int, code: int, offending: bytes) -> bytes:
    """OFPT_ERROR echoing at least the first 64 bytes of the offending message."""
    return message(version, ERROR, xid, struct.pack("!HH", err_type, code) + offending[:64])


@dataclass(frozen=True)
class FlowMod:
    command: int
    table: int
    priority: int
    match: bytes
    flags: int
    flags_offset: int           # where the flags are, to set SEND_FLOW_REM

    @property
    def key(self) -> tuple[int, bytes, int]:
        return (self.table, self.match, self.priority)


def parse_flow_mod(version: int, msg: bytes) -> FlowMod | None:
    """The fields table accounting needs; None if the body is too short."""
    try:
        if version == OF10:
            # match(40) cookie(8) command idle hard priority buffer(4) out_port flags
            command, _, _, priority, _, _, flags = struct.unpack_from("!HHHHIHH", msg, 56)
            return FlowMod(command, 0, priority, msg[8:48], flags, 70)
        # cookie(8) mask(8) table(1) command(1) idle hard priority buffer(4)
        # out_port(4) out_group(4) flags(2) pad(2), then the match
        table, command, _, _, priority, _, _, _, flags = struct.unpack_from(
            "!BBHHHIIIH", msg, 24)
        match_len = struct.unpack_from("!H", msg, 50)[0]
        if match_len < 4 or 48 + match_len > len(msg):
            return None
        return FlowMod(command, table, priority, msg[48:48 + match_len], flags, 44)
    except struct.error:
        return None


def with_flags(msg: bytes, fm: FlowMod, flags: int) -> bytes:
    return msg[:fm.flags_offset] + struct.pack("!H", flags) + msg[fm.flags_offset + 2:]


def parse_flow_removed(version: int, msg: bytes) -> tuple[int, bytes, int] | None:
    """(table, match, priority) of a flow_removed, or None if malformed."""
    try:
        if version == OF10:
            # match(40) cookie(8) priority(2)
            priority = struct.unpack_from("!H", msg, 56)[0]
            return (0, msg[8:48], priority)
        # cookie(8) priority(2) reason(1) table(1) ... 40 bytes, then the match
        priority, _, table = struct.unpack_from("!HBB", msg, 16)
        match_len = struct.unpack_from("!H", msg, 50)[0]
        if match_len < 4 or 48 + match_len > len(msg):
            return None
        return (table, msg[48:48 + match_len], priority)
    except struct.error:
        return None


def match_is_wildcard(version: int, match: bytes) -> bool:
    """Does the match select every flow (as `del-flows` with no match sends)?"""
    if version == OF10:
        return struct.unpack_from("!I", match)[0] & 0x3FFFFF == 0x3FFFFF    # OFPFW_ALL
    return struct.unpack_from("!H", match, 2)[0] == 4      # OXM match with no fields
