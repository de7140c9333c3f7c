"""A thread's CPU time as the scheduler's tick accounting saw it, stolen time
left out, read from the kernel's taskstats interface (generic netlink).

Why not /proc: in a Xen guest (the lab's PV Dom0) the time Xen runs another
vCPU while a thread is current on its own counts towards that thread's run
time, and /proc/<pid>/stat scales utime and stime so that they add up to the
run time (Debian's kernel has no PARAVIRT_TIME_ACCOUNTING to leave it out).
The tick accounting behind taskstats' ac_utime and ac_stime gives each tick
only what is left of it after the steal Xen reports. Sampled at the kernel's
tick (HZ): right over hundreds of milliseconds, not per call.

Needs CAP_NET_ADMIN (root).
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from pathlib import Path

NETLINK_GENERIC = 16
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID = 1
CTRL_ATTR_FAMILY_NAME = 2
TASKSTATS_CMD_GET = 1
TASKSTATS_CMD_ATTR_PID = 1
TASKSTATS_TYPE_AGGR_PID = 4
TASKSTATS_TYPE_STATS = 3
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
# struct taskstats (linux/taskstats.h): where ac_utime and ac_stime (u64,
# microseconds) sit; fixed since version 1, later versions only append.
AC_UTIME_OFFSET = 152
AC_STIME_OFFSET = 160

_NLMSGHDR = struct.Struct("=IHHII")
_GENLMSGHDR = struct.Struct("=BBH")
_NLATTR = struct.Struct("=HH")


class TaskstatsError(OSError):
    """The kernel refused a taskstats request or answered what this reader
    cannot parse."""


def _attr(kind: int, payload: bytes) -> bytes:
    body = _NLATTR.pack(_NLATTR.size + len(payload), kind) + payload
    return body + b"\0" * (-len(body) % 4)


def attrs(data: bytes) -> dict[int, bytes]:
    """Netlink attributes by type (the last of each type), payloads only."""
    found = {}
    offset = 0
    while offset + _NLATTR.size <= len(data):
        length, kind = _NLATTR.unpack_from(data, offset)
        if length < _NLATTR.size or offset + length > len(data):
            raise TaskstatsError(f"netlink attribute of length {length} at {offset} "
                                 f"overruns its {len(data)} bytes")
        found[kind & 0x3FFF] = data[offset + _NLATTR.size:offset + length]
        offset += (length + 3) & ~3
    return found


def message(kind: int, seq: int, cmd: int, payload: bytes) -> bytes:
    """A generic netlink request."""
    body = _GENLMSGHDR.pack(cmd, 1, 0) + payload
    return _NLMSGHDR.pack(_NLMSGHDR.size + len(body), kind, NLM_F_REQUEST, seq, 0) + body


def reply_attrs(data: bytes, seq: int) -> dict[int, bytes]:
    """The attributes of one generic netlink reply to request `seq`; a
    netlink error (ESRCH: the thread has ended) raises TaskstatsError."""
    if len(data) < _NLMSGHDR.size:
        raise TaskstatsError(f"netlink reply of {len(data)} bytes")
    length, kind, _flags, got_seq, _pid = _NLMSGHDR.unpack_from(data)
    if got_seq != seq or length > len(data):
        raise TaskstatsError(f"netlink reply {got_seq} of {length} bytes to request {seq}")
    if kind == NLMSG_ERROR:
        (code,) = struct.unpack_from("=i", data, _NLMSGHDR.size)
        raise TaskstatsError(-code, os.strerror(-code))
    return attrs(data[_NLMSGHDR.size + _GENLMSGHDR.size:length])


def cpu_seconds(stats: bytes) -> tuple[float, float]:
    """User and system seconds of a struct taskstats."""
    if len(stats) < AC_STIME_OFFSET + 8:
        raise TaskstatsError(f"struct taskstats of {len(stats)} bytes")
    utime, stime = struct.unpack_from("=QQ", stats, AC_UTIME_OFFSET)
    return utime / 1e6, stime / 1e6


class Taskstats:
    """A netlink socket to the kernel's taskstats family."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_GENERIC)
        self._seq = 0
        try:
            self._sock.bind((0, 0))
            found = self._ask(GENL_ID_CTRL, CTRL_CMD_GETFAMILY,
                              _attr(CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0"))
            (self._family,) = struct.unpack_from("=H", found[CTRL_ATTR_FAMILY_ID])
        except BaseException:
            self._sock.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Taskstats:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _ask(self, kind: int, cmd: int, payload: bytes) -> dict[int, bytes]:
        self._seq += 1
        self._sock.send(message(kind, self._seq, cmd, payload))
        return reply_attrs(self._sock.recv(65536), self._seq)

    def thread(self, tid: int) -> tuple[float, float] | None:
        """A thread's user and system seconds, stolen time left out; None if
        it has ended."""
        try:
            found = self._ask(self._family, TASKSTATS_CMD_GET,
                              _attr(TASKSTATS_CMD_ATTR_PID, struct.pack("=I", tid)))
        except TaskstatsError as exc:
            if exc.errno == errno.ESRCH:
                return None
            raise
        return cpu_seconds(attrs(found[TASKSTATS_TYPE_AGGR_PID])[TASKSTATS_TYPE_STATS])

    def threads(self, pid: int | str) -> dict[int, tuple[float, float]]:
        """Every live thread of process `pid` ("self" for this one)."""
        try:
            tids = [int(entry.name) for entry in Path(f"/proc/{pid}/task").iterdir()]
        except OSError:
            return {}                   # the process has ended
        seen = {}
        for tid in tids:
            used = self.thread(tid)
            if used is not None:
                seen[tid] = used
        return seen
