"""`python3 -m ofmodel bench`: forwarding throughput of the model.

A source and a sink in this process exchange N OpenFlow messages directly
(baseline) and through the model running as its own process (as in a switch
guest) with a profile (default `ideal`: no limits), in each direction:
packet_in (switch -> controller) and flow_mod (controller -> switch). Prints
messages per second and the ratio to the baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path

from ofmodel import wire
from ofmodel.ofclient import flow_mod, ipv4_dst_match

PACKET_IN = wire.message(wire.OF13, wire.PACKET_IN, 0, b"\0" * 120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _transfer(send_to: tuple[str, int], listen_port: int, messages: list[bytes],
                    switch_side_sends: bool) -> float:
    """Seconds to move every message. The listener plays the controller; the
    connecting side the switch."""
    done = asyncio.Event()
    sent_at: list[float] = []
    accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def on_connect(reader, writer):
        await accepted.put((reader, writer))

    server = await asyncio.start_server(on_connect, "127.0.0.1", listen_port)
    sw_reader, sw_writer = await asyncio.open_connection(*send_to)
    ctl_reader, ctl_writer = await asyncio.wait_for(accepted.get(), 30)
    sender = sw_writer if switch_side_sends else ctl_writer
    receiver = ctl_reader if switch_side_sends else sw_reader

    async def receive():
        for _ in range(len(messages)):
            if await wire.read_message(receiver) is None:
                raise RuntimeError("connection closed early")
        done.set()

    task = asyncio.create_task(receive())
    sent_at.append(time.monotonic())
    for i in range(0, len(messages), 256):
        sender.write(b"".join(messages[i:i + 256]))
        await sender.drain()
    await asyncio.wait_for(task, 300)
    seconds = time.monotonic() - sent_at[0]
    for w in (sw_writer, ctl_writer):
        w.close()
    server.close()
    return seconds


async def bench_main(args: argparse.Namespace) -> int:
    n = args.messages
    workloads = {
        "packet_in (switch -> controller)": ([PACKET_IN] * n, True),
        "flow_mod (controller -> switch)":
            ([flow_mod(i, wire.ADD, ipv4_dst_match(i)) for i in range(n)], False),
    }
    print(f"ofmodel bench: {n} messages per run, profile {args.profile}")
    print(f"  {'workload':<34} {'direct msg/s':>13} {'model msg/s':>12} {'ratio':>6}")
    for name, (messages, upward) in workloads.items():
        port = _free_port()
        direct = await _transfer(("127.0.0.1", port), port, messages, upward)
        ctl_port, model_port = _free_port(), _free_port()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ofmodel", "proxy", "--listen", f"127.0.0.1:{model_port}",
            "--controller", f"127.0.0.1:{ctl_port}", "--profile", args.profile,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            stderr=asyncio.subprocess.PIPE)
        assert proc.stderr is not None
        await proc.stderr.readline()            # "listening"
        try:
            proxied = await _transfer(("127.0.0.1", model_port), ctl_port, messages, upward)
        finally:
            proc.terminate()
            await proc.wait()
        print(f"  {name:<34} {n / direct:>13,.0f} {n / proxied:>12,.0f} "
              f"{direct / proxied:>6.2f}")
    return 0
