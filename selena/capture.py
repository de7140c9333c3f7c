"""Packet captures of a link in the guests' virtual time (`exp.capture("h1",
"s1")`, `selena run --capture h1,s1`).

While the run is on, a thread reads a packet socket on the Dom0 interface of
one end of the link (the vif of its first-named node) and streams each frame,
with the kernel's real-time stamp, into a pcapng file in the bundle's
staging directory (`.capture-<a>-<b>.real.pcapng`): memory stays bounded
whatever the run's length. At the end of the run that file is converted,
frame by frame, into `capture-<a>-<b>.pcapng`, whose timestamps are virtual:
the real instant mapped through the run's TDF timeline (every set_tdf, pause
and resume), counted from the real wall-clock instant at which virtual time
started (virtual second 0). Each frame keeps its real timestamp in its
comment (`real=<epoch seconds, ns> to=<node>|from=<node>`), and its
direction in epb_flags (inbound: from the guest into Dom0).

pcapng is written here (SHB, one IDB with if_tsresol = 9, so nanoseconds,
and EPBs), as the pcapng specification (IETF draft-ietf-opsawg-pcapng) lays
them out; read_pcapng reads what this module writes (and simple pcapng
files of others) back.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from selena.errors import ScenarioError, SelenaError

log = logging.getLogger(__name__)

# Block types and option codes (pcapng specification).
SHB = 0x0A0D0D0A
IDB = 0x00000001
EPB = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_END = 0
OPT_COMMENT = 1
SHB_USERAPPL = 4
IF_NAME = 2
IF_DESCRIPTION = 3
IF_TSRESOL = 9
EPB_FLAGS = 2
LINKTYPE_ETHERNET = 1
# epb_flags bits 0-1: the direction, as seen by the captured interface.
INBOUND = 0b01          # from the guest into Dom0
OUTBOUND = 0b10         # from Dom0 toward the guest
# Whole Ethernet frames (offloads are off on selena's vifs; 64 KiB covers
# a GSO frame if they are on).
SNAP_LEN = 65535
# The capture thread empties the socket's queue this often (real seconds),
# instead of waking for every frame: the kernel has stamped each frame as it
# passed, so reading later changes no timestamp, and a wake-up per batch
# costs Dom0 less CPU. The queue (vif_capture.RCVBUF_BYTES, 32 MiB) holds
# far more than a batch at any rate a vif carries.
POLL_S = 0.05
FILE_BUFFER = 1 << 20

_NS = 1_000_000_000


# -- pcapng ---------------------------------------------------------------------


def _option(code: int, value: bytes) -> bytes:
    pad = -len(value) % 4
    return struct.pack("<HH", code, len(value)) + value + b"\0" * pad


def _options(items: Sequence[tuple[int, bytes]]) -> bytes:
    if not items:
        return b""
    return b"".join(_option(c, v) for c, v in items) + struct.pack("<HH", OPT_END, 0)


def _block(kind: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


@dataclass(frozen=True)
class Packet:
    """One frame of a pcapng file."""

    t_ns: int                   # timestamp, ns since the epoch
    data: bytes
    length: int                 # original length on the wire
    interface: int = 0
    comment: str | None = None
    flags: int | None = None


@dataclass(frozen=True)
class Interface:
    linktype: int
    snaplen: int
    name: str | None = None
    description: str | None = None
    tsresol: int = 6            # decimal digits after the second (if_tsresol)


class PcapngWriter:
    """A pcapng section with one Ethernet interface, nanosecond timestamps."""

    def __init__(self, f: IO[bytes], *, name: str, description: str = "",
                 snaplen: int = SNAP_LEN, application: str = "selena"):
        self.f = f
        self.packets = 0
        f.write(_block(SHB, struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1)
                       + _options([(SHB_USERAPPL, application.encode())])))
        opts = [(IF_NAME, name.encode()), (IF_TSRESOL, bytes([9]))]
        if description:
            opts.insert(1, (IF_DESCRIPTION, description.encode()))
        f.write(_block(IDB, struct.pack("<HHI", LINKTYPE_ETHERNET, 0, snaplen)
                       + _options(opts)))

    def write(self, t_ns: int, data: bytes, length: int | None = None, *,
              comment: str | None = None, flags: int | None = None) -> None:
        opts: list[tuple[int, bytes]] = []
        if comment:
            opts.append((OPT_COMMENT, comment.encode()))
        if flags is not None:
            opts.append((EPB_FLAGS, struct.pack("<I", flags)))
        t_ns = max(0, int(t_ns))
        body = (struct.pack("<IIIII", 0, t_ns >> 32, t_ns & 0xFFFFFFFF, len(data),
                            len(data) if length is None else length)
                + data + b"\0" * (-len(data) % 4) + _options(opts))
        self.f.write(_block(EPB, body))
        self.packets += 1


def _parse_options(raw: bytes, endian: str) -> list[tuple[int, bytes]]:
    out = []
    pos = 0
    while pos + 4 <= len(raw):
        code, length = struct.unpack_from(endian + "HH", raw, pos)
        pos += 4
        if code == OPT_END:
            break
        out.append((code, raw[pos:pos + length]))
        pos += length + (-length % 4)
    return out


def read_pcapng(path: Path) -> tuple[list[Interface], Iterator[Packet]]:
    """The interfaces of a pcapng file's first section (read at once) and
    its EPBs, one at a time (a long capture is not held in memory)."""
    f = open(path, "rb")        # noqa: SIM115 - closed by the iterator
    head = f.read(12)
    if len(head) < 12 or struct.unpack_from("<I", head)[0] != SHB:
        f.close()
        raise SelenaError(f"{path}: not a pcapng file (no section header block)")
    magic = struct.unpack_from("<I", head, 8)[0]
    endian = "<" if magic == BYTE_ORDER_MAGIC else ">"
    length = struct.unpack_from(endian + "I", head, 4)[0]
    f.read(length - 12)
    interfaces: list[Interface] = []
    pending: list[bytes] = []
    # The IDBs come before the packets that use them: read up to the first
    # EPB now, so that the caller has the interfaces.
    while True:
        hdr = f.read(8)
        if len(hdr) < 8:
            break
        kind, length = struct.unpack(endian + "II", hdr)
        block = hdr + f.read(length - 8)
        if kind == IDB:
            linktype, _, snaplen = struct.unpack_from(endian + "HHI", block, 8)
            opts = dict(_parse_options(block[16:length - 4], endian))
            resol = opts.get(IF_TSRESOL, bytes([6]))[0]
            interfaces.append(Interface(
                linktype, snaplen,
                opts[IF_NAME].decode() if IF_NAME in opts else None,
                opts[IF_DESCRIPTION].decode() if IF_DESCRIPTION in opts else None,
                resol))
        elif kind == EPB:
            pending.append(block)
            break

    def packets() -> Iterator[Packet]:
        try:
            block: bytes | None = pending[0] if pending else None
            while block is not None:
                kind, length = struct.unpack_from(endian + "II", block)
                if kind == EPB:
                    yield _epb(block, length, endian, interfaces)
                hdr = f.read(8)
                if len(hdr) < 8:
                    return
                kind, length = struct.unpack(endian + "II", hdr)
                block = hdr + f.read(length - 8)
        finally:
            f.close()

    return interfaces, packets()


def _epb(block: bytes, length: int, endian: str, interfaces: Sequence[Interface]) -> Packet:
    iface, high, low, caplen, origlen = struct.unpack_from(endian + "IIIII", block, 8)
    data = block[28:28 + caplen]
    opts = _parse_options(block[28 + caplen + (-caplen % 4):length - 4], endian)
    resol = interfaces[iface].tsresol if iface < len(interfaces) else 6
    if resol & 0x80:
        raise SelenaError("pcapng timestamps in powers of two are not read")
    ticks = (high << 32) | low
    t_ns = ticks * 10 ** (9 - resol) if resol <= 9 else ticks // 10 ** (resol - 9)
    comment = next((v.decode(errors="replace") for c, v in opts if c == OPT_COMMENT), None)
    flags = next((struct.unpack(endian + "I", v)[0] for c, v in opts
                  if c == EPB_FLAGS and len(v) == 4), None)
    return Packet(t_ns, data, origlen, iface, comment, flags)


# -- real time to virtual time ----------------------------------------------------


def to_virtual(real_s: float, timeline: Sequence[Mapping[str, float]]) -> float:
    """Virtual seconds at `real_s` real seconds since virtual time started,
    through a run's TDF timeline (meta.json's `tdf_timeline`: segments of
    `tdf`, starting at `real_s` and `virtual_s`). Within a segment virtual
    time advances at 1/TDF of real time; a segment that starts at a virtual
    instant earlier than its predecessor would reach there (a pause: virtual
    time stood still until the resume) caps its predecessor. Before the
    first segment (frames while the guests booted) the first TDF applies."""
    if not timeline:
        raise ValueError("an empty TDF timeline")
    starts = [float(seg["real_s"]) for seg in timeline]
    i = max(0, bisect.bisect_right(starts, real_s) - 1)
    seg = timeline[i]
    virtual = float(seg["virtual_s"]) + (real_s - float(seg["real_s"])) / float(seg["tdf"])
    if i + 1 < len(timeline):
        virtual = min(virtual, float(timeline[i + 1]["virtual_s"]))
    return virtual


def virtual_ns(real_ns: int, origin_ns: int, timeline: Sequence[Mapping[str, float]]) -> int:
    """A real wall-clock instant (ns since the epoch) as a virtual one: the
    origin (the wall-clock instant virtual time started) plus the virtual
    seconds elapsed by then. Integer ns around the float so that epoch
    values keep their nanoseconds."""
    return origin_ns + round(to_virtual((real_ns - origin_ns) / _NS, timeline) * _NS)


def real_text(t_ns: int) -> str:
    return f"{t_ns // _NS}.{t_ns % _NS:09d}"


def convert(raw: Path, out: Path, origin_ns: int,
            timeline: Sequence[Mapping[str, float]]) -> int:
    """Write `out`: the frames of the real-time capture `raw` with virtual
    timestamps; each keeps its real one in its comment (`real=... `, before
    what the raw comment said). Returns the number of frames."""
    interfaces, packets = read_pcapng(raw)
    iface = interfaces[0] if interfaces else Interface(LINKTYPE_ETHERNET, SNAP_LEN)
    tmp = out.with_name(f".{out.name}.part")
    with open(tmp, "wb", buffering=FILE_BUFFER) as f:
        writer = PcapngWriter(f, name=iface.name or "?",
                              description=(iface.description or "") + "; timestamps in "
                              "virtual time (the real ones in each frame's comment)",
                              snaplen=iface.snaplen)
        for p in packets:
            comment = f"real={real_text(p.t_ns)}" + (f" {p.comment}" if p.comment else "")
            writer.write(virtual_ns(p.t_ns, origin_ns, timeline), p.data, p.length,
                         comment=comment, flags=p.flags)
    os.replace(tmp, out)
    return writer.packets


# -- the capture while the run is on ------------------------------------------------


@dataclass
class CaptureSource:
    """Where a backend captures a link (exp.capture): the Dom0 interface of
    one end, the node whose traffic it carries (both directions of the link
    pass it), and the backend's functions that read it."""

    iface: str
    node: str                   # the end the interface belongs to
    peer: str                   # the other end
    opener: Callable[[str], Any]                # a socket on iface, frames both ways
    # One frame: (real ns, length, bytes kept, toward the node), None for one
    # to skip; BlockingIOError when none is queued.
    receiver: Callable[[Any, int], tuple[int, int, bytes, bool] | None]
    counter: Callable[[Any], int]               # frames lost since the last call


@dataclass
class LinkRecorder:
    """One link's capture while the run is on: a thread streaming frames,
    real-time stamped, to `raw`."""

    a: str
    b: str
    source: CaptureSource
    raw: Path
    snap: int = SNAP_LEN
    packets: int = 0
    lost: int = 0               # frames the socket's buffer could not hold
    # Why `lost` counts none of the socket's drops: its counter could not be read.
    lost_error: str | None = None
    error: str | None = None
    started_ns: int = 0         # wall clock (ns) from which frames were captured
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _sock: Any = None

    @property
    def name(self) -> str:
        return f"capture-{self.a}-{self.b}"

    def start(self) -> LinkRecorder:
        """Open the socket (raises OSError: not root, interface gone) and
        start the thread."""
        self._sock = self.source.opener(self.source.iface)
        try:
            self._sock.setblocking(False)
            f = open(self.raw, "wb", buffering=FILE_BUFFER)  # noqa: SIM115 - the thread closes it
        except BaseException:
            self._sock.close()
            raise
        writer = PcapngWriter(f, name=self.source.iface, snaplen=self.snap,
                              description=f"link {self.a}-{self.b}: Dom0 interface of "
                                          f"{self.source.node}")
        self.started_ns = time.time_ns()
        self._thread = threading.Thread(target=self._run, args=(f, writer), daemon=True,
                                        name=self.name)
        self._thread.start()
        return self

    def _run(self, f: IO[bytes], writer: PcapngWriter) -> None:
        node = self.source.node
        receive = self.source.receiver
        try:
            while True:
                stopping = self._stop.is_set()
                while True:         # every frame queued now
                    try:
                        got = receive(self._sock, self.snap)
                    except (BlockingIOError, TimeoutError):
                        break
                    if got is None:
                        continue
                    stamp_ns, length, data, toward = got
                    writer.write(stamp_ns, data, length,
                                 comment=f"{'to' if toward else 'from'}={node}",
                                 flags=OUTBOUND if toward else INBOUND)
                    self.packets += 1
                if stopping:
                    break
                self._stop.wait(POLL_S)
        except OSError as exc:
            self.error = f"{self.source.iface}: {exc.strerror or exc}"
            log.warning("capture of %s-%s stopped: %s", self.a, self.b, self.error)
        finally:
            f.close()

    def stop(self) -> None:
        """Stop capturing; the raw file is complete once this returns."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._sock is not None:
            try:
                self.lost += self.source.counter(self._sock)
            except OSError as exc:
                # Said, not taken for no loss: the bundle's lost_frames is 0 then.
                self.lost_error = f"the socket's drop count unreadable: {exc.strerror or exc}"
                log.warning("capture of %s-%s: %s", self.a, self.b, self.lost_error)
            self._sock.close()
            self._sock = None

    def finish(self, directory: Path, origin_ns: int,
               timeline: Sequence[Mapping[str, float]]) -> dict[str, Any]:
        """Convert into `directory/capture-<a>-<b>.pcapng` (virtual time),
        remove the raw file, and say what was captured (for meta.json)."""
        self.stop()
        out = directory / f"{self.name}.pcapng"
        frames = convert(self.raw, out, origin_ns, timeline)
        self.raw.unlink(missing_ok=True)
        info: dict[str, Any] = {"link": f"{self.a}-{self.b}", "file": out.name,
                                "interface": self.source.iface, "node": self.source.node,
                                "frames": frames, "lost_frames": self.lost,
                                "started_real": self.started_ns / _NS}
        if self.error:
            info["error"] = self.error
        if self.lost_error:
            info["lost_frames_error"] = self.lost_error
        return info


# -- naming a link ------------------------------------------------------------------


def parse_link(text: str, nodes: Sequence[str],
               links: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """`h1,s1` (as Mininet's comma-separated options) or `h1-s1` (when the
    split is not ambiguous) as the link between those nodes, in that order.
    Raises ScenarioError in one line naming the links there are."""
    joined = sorted({f"{a},{b}" for a, b in links})
    have = f"(links: {' '.join(joined) or 'none'})"
    text = text.strip()
    if "," in text:
        a, _, b = text.partition(",")
        candidates = [(a.strip(), b.strip())]
    else:
        candidates = [(text[:i], text[i + 1:]) for i, ch in enumerate(text) if ch == "-"]
        candidates = [(a, b) for a, b in candidates if a in nodes and b in nodes] or candidates
    pairs = {frozenset(link) for link in links}
    found = [(a, b) for a, b in candidates if frozenset((a, b)) in pairs and a != b]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise ScenarioError(f"capture {text!r} is ambiguous: write it as "
                            + " or ".join(f"{a},{b}" for a, b in found))
    if not candidates:
        raise ScenarioError(f"capture {text!r}: name a link as NODE,NODE {have}")
    a, b = candidates[0]
    for node in (a, b):
        if node not in nodes:
            raise ScenarioError(f"capture {text!r}: no node named {node!r} {have}")
    raise ScenarioError(f"capture {text!r}: no link between {a} and {b} {have}")
