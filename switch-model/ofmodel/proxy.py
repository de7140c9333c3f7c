"""The model: an OpenFlow proxy enforcing a profile, one session per switch
connection.

Semantics (switch-model/README.md says the same):
- controller -> switch messages go through one FIFO, as through a switch's
  single control CPU: a flow_mod ADD or MODIFY holds the FIFO for its
  insertion delay, so later messages (packet_outs, barriers) wait behind it;
  DELETEs and every other message pass without delay of their own.
- table capacity: admission is decided in FIFO order. An ADD of a new
  (table, match, priority) when the table is full is answered with
  OFPT_ERROR FLOW_MOD_FAILED / ALL_TABLES_FULL (1.0) or TABLE_FULL (1.3),
  echoing the first 64 bytes, and not forwarded. DELETE_STRICT frees its
  entry; DELETE frees entries with the same match (all of the table, or of
  every table, for an all-wildcard match, as `del-flows` sends); expiry is
  learnt from FLOW_REMOVED, which the model asks the switch for on every
  flow it counts and hides from a controller that did not ask.
- switch -> controller: a packet_in takes a token from a bucket (max_rate
  per second, depth burst) or is dropped, as a switch's packet_in limiter
  does; the ones kept are processed one at a time, delay_ms each. Barrier
  and stats/multipart replies are released after their latency, in order
  with the other messages of that direction (never before a reply sent
  earlier).
- malformed input: a header whose length is below 8 or a stream that ends
  inside a message closes that session (both connections), nothing else;
  messages of unknown type or with short bodies are passed through.
- backpressure: each direction holds at most QUEUE_MESSAGES messages; past
  that the model stops reading from the sender (controller -> switch), so a
  controller sending flow_mods faster than the profile inserts them is
  slowed by TCP's window as by a real switch's, or drops packet_ins (switch
  -> controller), as a switch's full control-CPU queue does.
- a session whose worker fails is closed (both connections) with the
  reason logged, never left half served.
All times are asyncio's monotonic clock: in a switch guest, dilated time.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from dataclasses import dataclass, field

from ofmodel import wire
from ofmodel.profile import Profile

log = logging.getLogger(__name__)

# Drain a writer once this much is buffered (keeps the fast path cheap).
DRAIN_BYTES = 1 << 16
# Messages a session holds per queue (see backpressure above); 300k flow_mods
# once sat in an unbounded one and the controller never felt the insertion rate.
QUEUE_MESSAGES = 256
# Receive buffer of the model's sockets: without a bound, loopback TCP buffers
# megabytes of a fast controller's messages before its window closes.
RECEIVE_BUFFER_BYTES = 1 << 16
# Timer lateness correction: share of each observed error taken into the
# estimate, and its bound (a stall must not turn later delays into zero).
LATENESS_GAIN = 0.3
MAX_LATENESS_S = 0.002


@dataclass
class Counters:
    sessions: int = 0
    to_switch: int = 0
    to_controller: int = 0
    packet_in_dropped: int = 0
    table_full: int = 0
    malformed: int = 0
    failed_sessions: int = 0


class TokenBucket:
    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.last = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


@dataclass
class FlowTable:
    """Entries the switch holds, keyed (table, match, priority); the value
    says whether the controller asked to hear of the entry's removal."""

    capacity: int
    entries: dict[tuple[int, bytes, int], bool] = field(default_factory=dict)

    def admit(self, version: int, fm: wire.FlowMod, flags_requested: int) -> bool:
        cmd = fm.command
        if cmd in (wire.DELETE_STRICT,):
            self.entries.pop(fm.key, None)
            return True
        if cmd == wire.DELETE:
            self._delete(version, fm)
            return True
        if cmd in (wire.MODIFY, wire.MODIFY_STRICT) and (
                version != wire.OF10 or fm.key in self.entries):
            return True             # changes existing entries only
        if fm.key not in self.entries and len(self.entries) >= self.capacity:
            return False
        self.entries[fm.key] = bool(flags_requested)
        return True

    def _delete(self, version: int, fm: wire.FlowMod) -> None:
        every_table = version == wire.OF10 or fm.table == wire.OFPTT_ALL
        wildcard = wire.match_is_wildcard(version, fm.match)
        for key in list(self.entries):
            table, match, _ = key
            if (every_table or table == fm.table) and (wildcard or match == fm.match):
                del self.entries[key]

    def removed(self, key: tuple[int, bytes, int]) -> bool:
        """Forget an expired entry; True if the controller wants to hear of it."""
        return self.entries.pop(key, True)


class Session:
    """One switch connection and its connection to the controller."""

    def __init__(self, profile: Profile, counters: Counters,
                 switch: tuple[asyncio.StreamReader, asyncio.StreamWriter],
                 controller: tuple[asyncio.StreamReader, asyncio.StreamWriter]):
        self.profile = profile
        self.counters = counters
        self.rng = random.Random(profile.seed)
        # How late asyncio's timers fire here (epoll rounds up to 1 ms, the
        # loop adds its own latency); learnt from each flow_mod and taken off
        # the next sleep, so insertion delays are not 0.3-0.6 ms too long.
        self.timer_lateness = 0.0
        self.sw_reader, self.sw_writer = switch
        self.ctl_reader, self.ctl_writer = controller
        self.table = FlowTable(profile.table_capacity) if profile.table_capacity else None
        self.bucket = (TokenBucket(profile.packet_in_rate, profile.packet_in_burst)
                       if profile.packet_in_rate else None)
        # Only the rules a profile uses cost anything.
        self.serial_down = not profile.flow_mod_delay.is_zero or self.table is not None
        self.down: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_MESSAGES)
        self.packet_ins: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_MESSAGES)
        self.replies: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(QUEUE_MESSAGES)
        self.pending_replies = 0

    async def run(self) -> None:
        for writer in (self.sw_writer, self.ctl_writer):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        readers = {asyncio.create_task(self._from_controller()): "from the controller",
                   asyncio.create_task(self._from_switch()): "from the switch"}
        workers = {asyncio.create_task(c): name for c, name in (
            (self._down_worker(), "flow_mod worker"),
            (self._packet_in_worker(), "packet_in worker"),
            (self._reply_worker(), "reply worker"))}
        tasks = {**readers, **workers}
        try:
            # Readers end at EOF; workers never end unless they fail.
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if isinstance(exc, wire.MalformedMessage):
                    self.counters.malformed += 1
                    log.warning("closing session: malformed OpenFlow message: %s", exc)
                elif task in workers:
                    self.counters.failed_sessions += 1
                    log.error("closing session: its %s stopped: %r", workers[task], exc)
                elif exc is not None and not isinstance(exc, ConnectionError):
                    self.counters.failed_sessions += 1
                    log.error("closing session: reading %s failed: %r", readers[task], exc)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for writer in (self.sw_writer, self.ctl_writer):
                writer.close()

    # -- controller -> switch --------------------------------------------------------

    async def _from_controller(self) -> None:
        while (msg := await wire.read_message(self.ctl_reader)) is not None:
            if self.serial_down:
                await self.down.put(msg)        # full: stop reading, TCP pushes back
            else:
                await self._send(self.sw_writer, msg)
                self.counters.to_switch += 1

    async def _down_worker(self) -> None:
        while True:
            msg = await self.down.get()
            fm = (wire.parse_flow_mod(msg[0], msg)
                  if msg[1] == wire.FLOW_MOD and msg[0] in wire.SUPPORTED else None)
            if fm is not None:
                admitted = await self._admit(msg, fm)
                if admitted is None:
                    continue
                msg = admitted
                if fm.command in (wire.ADD, wire.MODIFY, wire.MODIFY_STRICT):
                    delay = self.profile.flow_mod_delay.sample(self.rng)
                    if delay > 0:
                        await self.sw_writer.drain()
                        await self._hold(delay)
            self.sw_writer.write(msg)
            self.counters.to_switch += 1
            if self.down.empty():
                await self.sw_writer.drain()

    async def _hold(self, delay: float) -> None:
        """Sleep for `delay` seconds of this clock, correcting for timer lateness."""
        due = time.monotonic() + delay
        await asyncio.sleep(max(0.0, delay - self.timer_lateness))
        late = time.monotonic() - due
        self.timer_lateness = min(max(0.0, self.timer_lateness + LATENESS_GAIN * late),
                                  MAX_LATENESS_S)

    async def _admit(self, msg: bytes, fm: wire.FlowMod) -> bytes | None:
        """Table admission: the message to forward, or None (error sent)."""
        if self.table is None:
            return msg
        version = msg[0]
        types = wire.TYPES[version]
        requested = fm.flags & types.send_flow_rem
        if not self.table.admit(version, fm, requested):
            self.counters.table_full += 1
            xid = wire.parse_header(msg).xid
            await self._reply_later(0.0, wire.error(version, xid, types.flow_mod_failed,
                                                    types.table_full, msg))
            return None
        if fm.command in (wire.ADD, wire.MODIFY, wire.MODIFY_STRICT) and not requested:
            msg = wire.with_flags(msg, fm, fm.flags | types.send_flow_rem)
        return msg

    # -- switch -> controller --------------------------------------------------------

    async def _from_switch(self) -> None:
        profile = self.profile
        while (msg := await wire.read_message(self.sw_reader)) is not None:
            version, msg_type = msg[0], msg[1]
            types = wire.TYPES.get(version)
            if msg_type == wire.PACKET_IN:
                if self.bucket is not None and not self.bucket.take():
                    self.counters.packet_in_dropped += 1
                    continue
                if profile.packet_in_delay_s > 0:
                    if self.packet_ins.full():      # the control CPU's queue overflows
                        self.counters.packet_in_dropped += 1
                    else:
                        self.packet_ins.put_nowait(msg)
                    continue
            elif types is not None and msg_type == wire.FLOW_REMOVED and self.table:
                key = wire.parse_flow_removed(version, msg)
                if key is not None and not self.table.removed(key):
                    continue                    # asked for by the model, not the controller
            elif types is not None and msg_type == types.barrier_reply \
                    and profile.barrier_delay_s > 0:
                await self._reply_later(profile.barrier_delay_s, msg)
                continue
            elif types is not None and msg_type == types.stats_reply \
                    and profile.stats_delay_s > 0:
                await self._reply_later(profile.stats_delay_s, msg)
                continue
            if self.pending_replies:
                await self._reply_later(0.0, msg)   # keep the order behind delayed replies
            else:
                await self._send(self.ctl_writer, msg)
                self.counters.to_controller += 1

    async def _reply_later(self, delay: float, msg: bytes) -> None:
        self.pending_replies += 1
        await self.replies.put((time.monotonic() + delay, msg))

    async def _reply_worker(self) -> None:
        while True:
            release, msg = await self.replies.get()
            wait = release - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            self.ctl_writer.write(msg)
            self.pending_replies -= 1
            self.counters.to_controller += 1
            if self.replies.empty():
                await self.ctl_writer.drain()

    async def _packet_in_worker(self) -> None:
        while True:
            msg = await self.packet_ins.get()
            await asyncio.sleep(self.profile.packet_in_delay_s)
            self.ctl_writer.write(msg)
            self.counters.to_controller += 1
            if self.packet_ins.empty():
                await self.ctl_writer.drain()

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, msg: bytes) -> None:
        writer.write(msg)
        if writer.transport.get_write_buffer_size() > DRAIN_BYTES:
            await writer.drain()


class Proxy:
    """Listens for switches; connects each to the controller through a Session."""

    def __init__(self, profile: Profile, controller: tuple[str, int]):
        self.profile = profile
        self.controller = controller
        self.counters = Counters()
        self.sessions: set[Session] = set()
        self.server: asyncio.base_events.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._accept, host, port)
        return self.server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            upstream = await asyncio.open_connection(*self.controller)
        except OSError as exc:
            log.warning("switch %s: controller %s:%d unreachable (%s); closing",
                        peer, *self.controller, exc.strerror or exc)
            writer.close()
            return
        self.counters.sessions += 1
        log.info("switch %s connected; controller %s:%d; profile %s", peer,
                 *self.controller, self.profile.name)
        session = Session(self.profile, self.counters, (reader, writer), upstream)
        self.sessions.add(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)
        log.info("switch %s: session closed", peer)

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
