"""A packet tap on an experiment's vifs that gives each guest its transmit
buffers back as soon as Dom0 has received a packet.

Why: xen-netback maps a guest's transmit pages instead of copying them and
answers the guest's transmit request only when Dom0 frees the packet. With a
link delay shaped in Dom0 (netem on the receiving vif) that is a whole
one-way delay later, and Linux's TCP Small Queues, which caps the bytes a
socket may have "in the NIC" at about a millisecond of its rate, then
throttles the sender to a few packets per round trip: a 20 Mbit/s link with
20 ms of delay carried 1.6 Mbit/s of TCP. A packet socket listening on the
vif makes the kernel copy each packet's mapped pages when it arrives
(deliver_skb -> skb_orphan_frags_rx), which completes the transmission
towards the guest at once, as a real NIC does once the frame is on the wire.
Its filter accepts nothing, so no packet reaches this process.

Run by the xl backend for each experiment (`python3 -m selena.backends.vif_tap
EXPERIMENT STATE_DIR VIF...`); it exits when the experiment's state file is
gone, and the backend stops it on teardown.
"""

from __future__ import annotations

import ctypes
import socket
import struct
import sys
import time
from pathlib import Path

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
# Classic BPF: one instruction, "ret #0": accept no bytes of any packet.
_DROP_ALL = struct.pack("HBBI", 0x06, 0, 0, 0)
POLL_S = 2.0


def drop_all(sock: socket.socket) -> None:
    """Make a packet socket accept no further frame."""
    program = ctypes.create_string_buffer(_DROP_ALL)
    fprog = struct.pack("HL", 1, ctypes.addressof(program))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def open_tap(vif: str) -> socket.socket:
    """A packet socket on `vif` that receives nothing."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    drop_all(sock)
    sock.bind((vif, ETH_P_ALL))
    return sock


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: python3 -m selena.backends.vif_tap EXPERIMENT STATE_DIR VIF...",
              file=sys.stderr)
        return 2
    experiment, state_dir, vifs = argv[0], Path(argv[1]), argv[2:]
    taps = [open_tap(vif) for vif in vifs]
    print(f"tapping {len(taps)} vifs of {experiment}", flush=True)
    state = state_dir / f"{experiment}.json"
    while state.exists():
        time.sleep(POLL_S)
    for tap in taps:
        tap.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
