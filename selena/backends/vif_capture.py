"""Frame timestamps on Dom0's vifs, for the packet-spacing check of the
fidelity monitor (Mininet-HiFi's link invariant).

A packet socket on a vif sees each frame the bridge sends toward the guest
(PACKET_OUTGOING, timestamped by the kernel as the qdisc hands it to
netback, that is at its departure from the shaping) and each frame the
guest sends into Dom0 (timestamped as it arrives). The kernel stamps and
queues them in the socket's buffer while this process sleeps; they are read
only after the window closes, so reading them costs Dom0 no CPU during the
window it measures.

Only the first SNAP_BYTES of each frame are kept: the headers identify the
same frame on the vif it entered by (a bridge forwards it unchanged), and the
original length comes from the kernel's auxiliary data.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from selena.backends.base import Frame
from selena.backends.vif_tap import ETH_P_ALL, drop_all

SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
PACKET_OUTGOING = 4
SNAP_BYTES = 96
# Room for a few thousand frames per vif and window (each queued clone is
# charged its whole buffer, a few KiB).
RCVBUF_BYTES = 32 << 20
_AUXDATA = struct.Struct("IIIHHHH")      # struct tpacket_auxdata
_TIMESPEC = struct.Struct("qq")


@dataclass
class VifFrames:
    outgoing: list[Frame] = field(default_factory=list)   # toward the guest
    incoming: list[Frame] = field(default_factory=list)   # from the guest
    dropped: int = 0          # frames the socket buffer could not hold
    started: float = 0.0      # real time (CLOCK_REALTIME) from which nothing was missed


def open_socket(vif: str) -> socket.socket:
    """A timestamping packet socket on `vif` that queues every frame both ways."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    sock.bind((vif, ETH_P_ALL))
    return sock


def receive(sock: socket.socket, snap: int = SNAP_BYTES
            ) -> tuple[int, int, bytes, bool] | None:
    """One queued frame of a socket from _open: (kernel timestamp in
    CLOCK_REALTIME ns, its original length, its first `snap` bytes, whether
    it went out toward the guest); None for a frame without a timestamp.
    Raises BlockingIOError / TimeoutError when nothing is queued."""
    ancillary = socket.CMSG_SPACE(_TIMESPEC.size) + socket.CMSG_SPACE(_AUXDATA.size)
    data, cmsgs, _flags, address = sock.recvmsg(snap, ancillary)
    stamp_ns = 0
    length = len(data)
    for level, kind, value in cmsgs:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack_from(value)
            stamp_ns = sec * 1_000_000_000 + nsec
        elif level == SOL_PACKET and kind == PACKET_AUXDATA:
            length = _AUXDATA.unpack_from(value)[1]          # tp_len
    if not stamp_ns:
        return None
    return stamp_ns, length, bytes(data), address[2] == PACKET_OUTGOING


def dropped(sock: socket.socket) -> int:
    """Frames the socket's buffer could not hold since the last call."""
    stats = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
    return int(struct.unpack("II", stats)[1])


def _drain(sock: socket.socket) -> VifFrames:
    frames = VifFrames()
    sock.setblocking(False)
    while True:
        try:
            got = receive(sock)
        except BlockingIOError:
            break
        if got is None:
            continue
        stamp_ns, length, data, outgoing = got
        frame = Frame(stamp_ns / 1e9, length, data)
        (frames.outgoing if outgoing else frames.incoming).append(frame)
    frames.dropped = dropped(sock)
    return frames


def capture(vifs: Sequence[str], seconds: float) -> dict[str, VifFrames]:
    """Every frame in and out of each vif during `seconds` real seconds.
    Raises OSError when a vif cannot be opened (gone, or not root)."""
    socks: dict[str, socket.socket] = {}
    try:
        for vif in vifs:
            socks[vif] = open_socket(vif)
        started = time.time()
        time.sleep(seconds)
        for sock in socks.values():
            drop_all(sock)          # stop queueing; what is queued stays
        frames = {vif: _drain(sock) for vif, sock in socks.items()}
        for vif_frames in frames.values():
            vif_frames.started = started
        return frames
    finally:
        for sock in socks.values():
            sock.close()


_open = open_socket      # the name it had
