"""The one scaling rule of the paper reproductions (docs/reproductions.md,
"The scaling rule"): when a paper's link rates are divided by `factor` to fit
the lab, what the paper's result depends on is scaled with them so that the
physics stays the paper's:

- link rates: paper rate / factor;
- queues: sized in time, not packets: bytes = scaled rate x the paper's queue
  time, so a full queue delays a packet as long as the paper's did (a
  100-packet FIFO at 10 Gbit/s drains in 0.12 ms; kept at 100 packets at
  100 Mbit/s it would take 12 ms, inflating queueing latency 100 times);
- flow sizes and windows, where the result depends on them: paper bytes /
  factor, so a flow's completion time at the scaled rate is the paper's;
  a window counted in requests in flight likewise (scaled_window).

    link = scaled_link("10Gbit", 100, queue_s=QUEUE_S, delay="0.02ms")
    topology.add_link(a, b, **link)          # rate="100Mbit", delay=..., queue=2
    flow = scaled_bytes(10_000_000, 100)     # 100 kB

selena's queues are netem limits in packets, and netem counts the packets in
its delay line too: the limit is the queue's packets plus those the link's
delay holds at its rate, rounded up, at least one.
"""

from __future__ import annotations

import math
from typing import Any

from selena import units
from selena.errors import UnitError

MTU_BYTES = 1500
# Linux's default transmit queue (txqueuelen 1000) at a 1 Gbit/s port, the
# queue of the paper's own testbeds where it states none: 12 ms.
LINUX_QUEUE_S_AT_1GBIT = 1000 * MTU_BYTES * 8 / 1e9


def _factor(factor: float) -> float:
    if isinstance(factor, bool) or not isinstance(factor, int | float) \
            or not math.isfinite(factor) or factor < 1:
        raise UnitError(f"scaling factor {factor!r}: want a number >= 1 (the paper's rates "
                        "divided by it)")
    return float(factor)


def scaled_rate_bps(paper_rate: str | float, factor: float) -> float:
    """The lab's link rate (bit/s): the paper's divided by `factor`."""
    return units.rate_bps(paper_rate) / _factor(factor)


def queue_packets(rate_bps: float, queue_s: float, delay_s: float = 0.0,
                  mtu: int = MTU_BYTES) -> int:
    """netem's limit (packets) for a queue of `queue_s` seconds at `rate_bps`,
    plus the packets a delay of `delay_s` holds (netem counts them too)."""
    if queue_s < 0 or delay_s < 0 or rate_bps <= 0:
        raise UnitError(f"queue of {queue_s!r} s at {rate_bps!r} bit/s with {delay_s!r} s of "
                        "delay: want a positive rate and times >= 0")
    in_queue = rate_bps * queue_s / 8 / mtu
    in_flight = rate_bps * delay_s / 8 / mtu
    # A hair under a whole packet is that packet (float error), not one more.
    return max(1, math.ceil(in_queue - 1e-9) + math.ceil(in_flight - 1e-9))


def scaled_link(paper_rate: str | float, factor: float, *, queue_s: float,
                delay: str | float | None = None, mtu: int = MTU_BYTES) -> dict[str, Any]:
    """add_link keyword arguments for a paper link scaled by `factor`: the
    rate divided, the queue holding `queue_s` (the paper's queue time) at
    that rate, the delay kept (a time, not scaled)."""
    rate = scaled_rate_bps(paper_rate, factor)
    delay_s = 0.0 if delay is None else units.seconds(delay)
    link: dict[str, Any] = {"rate": f"{rate / 1e6:.12g}Mbit",
                            "queue": queue_packets(rate, queue_s, delay_s, mtu)}
    if delay is not None:
        link["delay"] = delay
    return link


def paper_queue_s(packets: int, paper_rate: str | float, mtu: int = MTU_BYTES) -> float:
    """A paper's queue of `packets` at its link rate, as a time (seconds)."""
    return packets * mtu * 8 / units.rate_bps(paper_rate)


def scaled_window(paper_count: int, factor: float, least: int = 1) -> int:
    """A window counted in messages (requests in flight, each about a
    packet) scaled with the rates: the paper's / factor, at least `least`
    (what the tool can run: memaslap needs one request per thread). Kept
    whole, it would put factor times the paper's bytes in flight against a
    queue sized in time."""
    if paper_count <= 0 or least < 1:
        raise UnitError(f"paper window {paper_count!r} (least {least!r}): want > 0")
    return max(least, round(paper_count / _factor(factor)))


def scaled_bytes(paper_bytes: int | float, factor: float) -> int:
    """A flow size or window scaled with the rates: the paper's / factor."""
    if paper_bytes <= 0:
        raise UnitError(f"paper size {paper_bytes!r} bytes: want > 0")
    return max(1, round(paper_bytes / _factor(factor)))
