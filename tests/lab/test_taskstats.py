"""The taskstats reader: netlink messages parsed from bytes, then the host's
own kernel asked about a thread that burns CPU."""

import os
import struct
import threading
import time

import pytest

from selena.lab.taskstats import (
    AC_STIME_OFFSET,
    AC_UTIME_OFFSET,
    NLMSG_ERROR,
    Taskstats,
    TaskstatsError,
    attrs,
    cpu_seconds,
    reply_attrs,
)


def _attr(kind: int, payload: bytes) -> bytes:
    body = struct.pack("=HH", 4 + len(payload), kind) + payload
    return body + b"\0" * (-len(body) % 4)


def _reply(seq: int, payload: bytes, kind: int = 0x17) -> bytes:
    body = struct.pack("=BBH", 2, 1, 0) + payload
    return struct.pack("=IHHII", 16 + len(body), kind, 0, seq, 0) + body


def test_attributes_are_read_by_type_past_their_padding():
    data = _attr(1, b"abc") + _attr(4, _attr(3, b"x" * 8)) + _attr(2, b"\x05\x00")
    found = attrs(data)
    assert found == {1: b"abc", 4: _attr(3, b"x" * 8), 2: b"\x05\x00"}
    assert attrs(found[4]) == {3: b"x" * 8}


def test_an_attribute_longer_than_its_message_is_refused():
    with pytest.raises(TaskstatsError, match="overruns"):
        attrs(struct.pack("=HH", 40, 1) + b"abcd")


def test_a_netlink_error_reply_raises_with_its_errno():
    error = struct.pack("=IHHII", 36, NLMSG_ERROR, 0, 7, 0) + struct.pack("=i", -3) + b"\0" * 16
    with pytest.raises(TaskstatsError) as caught:
        reply_attrs(error, 7)
    assert caught.value.errno == 3


def test_a_reply_to_another_request_is_refused():
    with pytest.raises(TaskstatsError, match="to request 8"):
        reply_attrs(_reply(7, _attr(1, b"ok")), 8)
    assert reply_attrs(_reply(8, _attr(1, b"ok")), 8) == {1: b"ok"}


def test_user_and_system_time_come_from_their_offsets_in_microseconds():
    stats = bytearray(AC_STIME_OFFSET + 8 + 64)
    struct.pack_into("=Q", stats, AC_UTIME_OFFSET, 1_500_000)
    struct.pack_into("=Q", stats, AC_STIME_OFFSET, 250_000)
    assert cpu_seconds(bytes(stats)) == (1.5, 0.25)
    with pytest.raises(TaskstatsError, match="of 100 bytes"):
        cpu_seconds(bytes(100))


@pytest.mark.skipif(os.geteuid() != 0, reason="taskstats answers only CAP_NET_ADMIN (root)")
def test_the_kernel_gives_a_busy_threads_time_and_none_for_one_that_ended():
    done = threading.Event()
    tid: list[int] = []

    def burn() -> None:
        tid.append(threading.get_native_id())
        deadline = time.thread_time() + 0.3
        while time.thread_time() < deadline:
            pass
        done.wait(10)
    thread = threading.Thread(target=burn)
    thread.start()
    try:
        while not tid:
            time.sleep(0.01)
        with Taskstats() as stats:
            deadline = time.monotonic() + 10
            while sum(stats.thread(tid[0]) or (0.0, 0.0)) < 0.2 and time.monotonic() < deadline:
                time.sleep(0.05)
            user, system = stats.thread(tid[0]) or (0.0, 0.0)
            assert 0.2 <= user + system <= 5
            assert tid[0] in stats.threads("self")
            done.set()
            thread.join()
            # join() returns as the thread lets go of its lock, a moment
            # before the kernel has ended it.
            deadline = time.monotonic() + 10
            while stats.thread(tid[0]) is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert stats.thread(tid[0]) is None
            assert tid[0] not in stats.threads("self")
    finally:
        done.set()
        thread.join()
