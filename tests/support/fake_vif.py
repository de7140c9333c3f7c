"""A vif's packet socket for the capture's tests: frames put in a queue
(stamp, bytes, toward the guest), read as selena.backends.vif_capture's
receive reads a real one; None in the queue ends it."""

from __future__ import annotations

import queue


class FakeSocket:
    """Frames put in a queue, delivered as vif_capture.receive would."""

    def __init__(self):
        self.frames: queue.Queue = queue.Queue()
        self.blocking = True
        self.closed = False

    def setblocking(self, flag):
        self.blocking = flag

    def close(self):
        self.closed = True


def fake_receive(sock, snap):
    assert not sock.blocking
    try:
        got = sock.frames.get_nowait()
    except queue.Empty:
        raise BlockingIOError from None
    if got is None:
        return None
    stamp, data, toward = got
    return stamp, len(data), data[:snap], toward
