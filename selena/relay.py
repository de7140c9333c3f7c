"""A command's output handed on as it comes (CommandHandle.follow), from a
thread of its own where the receiver may block (a terminal, a user's
callback): one command's (OutputRelay), or every command's of a run
(SharedRelay, `selena run --follow`). Outside selena.control because
`selena lab bench-control --baseline REV` runs this tree's engine over
an older tree's control channel, which has none of it."""

from __future__ import annotations

import codecs
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

log = logging.getLogger(__name__)

# Called with (stream, data): 0 stdout, 1 stderr; an empty `data` is that
# stream's end.
OutputFollower = Callable[[int, bytes], None]


class TextPieces:
    """A command's output pieces as text, each stream decoded on its own
    (UTF-8, bad bytes replaced): a character split between two pieces
    comes out whole, with the second."""

    def __init__(self) -> None:
        self._decoders = [codecs.getincrementaldecoder("utf-8")(errors="replace")
                          for _ in range(2)]

    def text(self, stream: int, data: bytes) -> str:
        return self._decoders[stream].decode(data)

class Followed(Protocol):
    """What a relay needs of a command's handle."""

    def follow(self, on_output: OutputFollower) -> None: ...


class OutputRelay:
    """A command's output handed to `on_output` as it comes, from a thread
    of its own: the channel's follower must not block, a terminal may."""

    # Real seconds stop() waits for the output still queued to be handed on.
    FLUSH_S = 10.0

    def __init__(self, handle: Followed, on_output: OutputFollower):
        self._pending: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()
        self._on_output = on_output
        # What on_output raised: it gets nothing more, the caller gets it (check).
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="output-relay")
        self._thread.start()
        handle.follow(lambda stream, data: self._pending.put((stream, data)))

    def _run(self) -> None:
        ends = 0
        while ends < 2 and (item := self._pending.get()) is not None:
            stream, data = item
            if not data:
                ends += 1
            elif self.error is None:
                try:
                    self._on_output(stream, data)
                except Exception as exc:  # noqa: BLE001 - handed to the caller by check()
                    self.error = exc

    def stop(self) -> None:
        """After the command's result (or an interrupt): what came before is
        handed on (the ends are queued before a command is done), then the
        thread ends."""
        self._pending.put(None)
        self._thread.join(self.FLUSH_S)

    def check(self) -> None:
        """After stop(): what on_output raised, raised here, in the caller's
        thread."""
        if self.error is not None:
            raise self.error


@contextlib.contextmanager
def relayed(handle: Followed, on_output: OutputFollower | None) -> Iterator[None]:
    """While the caller waits for `handle`: its output to `on_output` as it
    comes (None: nowhere); all of it handed on by the end of the block, and
    what on_output raised raised then, unless the block raised first."""
    if on_output is None:
        yield
        return
    relay = OutputRelay(handle, on_output)
    try:
        yield
    finally:
        relay.stop()
    relay.check()

# Called with (node, command id, stream, data) for every command shown; an
# empty `data` is that command's stream's end.
NodeOutput = Callable[[str, str, int, bytes], None]


class SharedRelay:
    """Many commands' output handed to one `on_output` (a run's
    show_output) from one thread, in the order it came."""

    def __init__(self, on_output: NodeOutput):
        self._pending: queue.SimpleQueue[tuple[str, str, int, bytes] | None] = \
            queue.SimpleQueue()
        self._on_output = on_output
        self._thread = threading.Thread(target=self._run, daemon=True, name="output-shown")
        self._thread.start()

    def follower(self, node: str, command_id: str) -> OutputFollower:
        """What a command's handle is to follow (it must not block)."""
        def queued(stream: int, data: bytes) -> None:
            self._pending.put((node, command_id, stream, data))
        return queued

    def _run(self) -> None:
        failed = False
        while (item := self._pending.get()) is not None:
            if failed:
                continue                # drained: the followers must never block
            try:
                self._on_output(*item)
            except Exception as exc:  # noqa: BLE001 - the run goes on; said once
                failed = True
                log.error("showing the commands' output failed (%s: %s); the rest of the "
                          "run's output is not shown (the bundle keeps it)",
                          type(exc).__name__, exc)

    def stop(self) -> None:
        """What came so far handed on (OutputRelay.FLUSH_S at most), then
        the thread ends."""
        self._pending.put(None)
        self._thread.join(OutputRelay.FLUSH_S)
