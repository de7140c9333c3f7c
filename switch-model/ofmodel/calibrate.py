"""Calibration in the spirit of OFLOPS: measure a switch's control plane
through its OpenFlow channel (acting as its controller) and write a profile.

- channel round trip: echo request/reply (no rule of the model delays it);
- barrier and stats (multipart DESC) latency: their round trip minus the
  echo round trip;
- flow insertion delay: flow_mod ADD + barrier round trip minus the
  barrier-only round trip, one flow at a time, as empirical samples;
- packet_in delay: packet_out(output:CONTROLLER) to packet_in, at a low rate,
  minus the echo round trip;
- packet_in rate limit: packet_outs to CONTROLLER at well above any plausible
  limit for a few seconds; the steady rate of packet_ins that arrive is the
  limit (none if nearly all arrive), what arrives beyond it the burst;
- table capacity: distinct ADDs, pipelined, until the switch answers with
  FLOW_MOD_FAILED/TABLE_FULL (or up to --max-table).
The switch is left with an empty flow table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import date

from ofmodel import wire
from ofmodel.ofclient import (
    SwitchConnection,
    accept_one,
    delete_all,
    ethernet_frame,
    flow_mod,
    ipv4_dst_match,
    packet_out_to_controller,
)
from ofmodel.profile import Distribution, Profile

BASELINE_SAMPLES = 20
# packet_out rate while probing the packet_in limit, and what counts as "no limit".
PROBE_RATE = 1000.0
NO_LIMIT_SHARE = 0.95


async def _median_rtt(conn: SwitchConnection, make, n: int) -> float:
    return statistics.median([await conn.rtt(make()) for _ in range(n)])


async def _clear(conn: SwitchConnection) -> None:
    conn.send(delete_all(conn.xid()))
    await conn.rtt(conn.barrier())


async def measure_insertion(conn: SwitchConnection, samples: int) -> list[float]:
    round_trips = []
    for i in range(samples):
        start = time.monotonic()
        conn.send(flow_mod(conn.xid(), wire.ADD, ipv4_dst_match(i)))
        arrived, _ = await conn.request(conn.barrier())
        round_trips.append(arrived - start)
    await _clear(conn)
    # A barrier answered after the channel sat idle costs more than one sent
    # back to back (every process on the path wakes from sleep; about 1 ms
    # here): the baseline barriers follow an idle gap as long as an insertion.
    idle = statistics.median(round_trips)
    baseline = []
    for _ in range(BASELINE_SAMPLES):
        await asyncio.sleep(idle)
        baseline.append(await conn.rtt(conn.barrier()))
    barrier = statistics.median(baseline)
    return [max(0.0, rtt - barrier) for rtt in round_trips]


async def measure_packet_in_delay(conn: SwitchConnection, echo: float, n: int = 20) -> float:
    delays = []
    for i in range(n):
        before = len(conn.received.packet_ins)
        start = time.monotonic()
        conn.send(packet_out_to_controller(conn.xid(), ethernet_frame(i)))
        deadline = start + 5.0
        while len(conn.received.packet_ins) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.0005)
        if len(conn.received.packet_ins) > before:
            delays.append(conn.received.packet_ins[before] - start - echo)
        await asyncio.sleep(0.25)       # well under any plausible rate limit
    return max(0.0, statistics.median(delays)) if delays else 0.0


async def measure_packet_in_rate(conn: SwitchConnection,
                                 seconds: float) -> tuple[float | None, int]:
    """(steady packet_in rate limit or None, burst)."""
    await asyncio.sleep(2.0)            # let a token bucket refill
    first = len(conn.received.packet_ins)
    start = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - start) < seconds:
        due = int(elapsed * PROBE_RATE) + 1
        while sent < due:
            conn.send(packet_out_to_controller(conn.xid(), ethernet_frame(sent)))
            sent += 1
        await conn.writer.drain()
        await asyncio.sleep(0.001)
    await conn.rtt(conn.echo())
    await asyncio.sleep(0.5)            # packet_ins still being processed
    arrivals = [t - start for t in conn.received.packet_ins[first:]]
    if len(arrivals) >= NO_LIMIT_SHARE * sent:
        return None, 1
    # Steady state: the second half of the probe, away from the initial burst.
    half = seconds / 2
    steady = [t for t in arrivals if half <= t < seconds]
    rate = len(steady) / (seconds - half)
    in_probe = [t for t in arrivals if t < seconds]
    burst = max(1, round(len(in_probe) - rate * seconds))
    return rate, burst


async def measure_table(conn: SwitchConnection, limit: int) -> int | None:
    errors_before = len(conn.received.errors)
    xids = []
    for i in range(limit):
        xid = conn.xid()
        xids.append(xid)
        conn.send(flow_mod(xid, wire.ADD, ipv4_dst_match(1_000_000 + i)))
        if i % 64 == 63:
            await conn.writer.drain()
    await conn.request(conn.barrier(), timeout=600)
    table_full = wire.TYPES[wire.OF13]
    refused = {x for x, t, c in conn.received.errors[errors_before:]
               if t == table_full.flow_mod_failed and c == table_full.table_full}
    await _clear(conn)
    if not refused:
        return None
    return next(i for i, x in enumerate(xids) if x in refused)


async def calibrate(conn: SwitchConnection, *, name: str, samples: int, max_table: int,
                    rate_seconds: float, log=lambda msg: None) -> Profile:
    await _clear(conn)
    echo = await _median_rtt(conn, conn.echo, BASELINE_SAMPLES)
    barrier = await _median_rtt(conn, conn.barrier, BASELINE_SAMPLES)
    stats = await _median_rtt(conn, conn.stats, BASELINE_SAMPLES)
    log(f"echo {echo * 1e3:.2f} ms, barrier {barrier * 1e3:.2f} ms, stats {stats * 1e3:.2f} ms")
    insertion = await measure_insertion(conn, samples)
    log(f"flow insertion: median {statistics.median(insertion) * 1e3:.2f} ms "
        f"over {len(insertion)} flows")
    pin_delay = await measure_packet_in_delay(conn, echo)
    log(f"packet_in delay {pin_delay * 1e3:.2f} ms")
    rate, burst = await measure_packet_in_rate(conn, rate_seconds)
    log(f"packet_in rate limit {'none' if rate is None else f'{rate:.1f}/s'}, burst {burst}")
    capacity = await measure_table(conn, max_table)
    log(f"table capacity {capacity if capacity is not None else f'no limit up to {max_table}'}")
    return Profile(
        name=name,
        flow_mod_delay=Distribution("empirical", tuple(round(v, 6) for v in insertion)),
        packet_in_delay_s=round(pin_delay, 6), packet_in_rate=round(rate, 2) if rate else None,
        packet_in_burst=burst, table_capacity=capacity,
        barrier_delay_s=round(max(0.0, barrier - echo), 6),
        stats_delay_s=round(max(0.0, stats - echo), 6),
        provenance={
            "source": "python3 -m ofmodel calibrate",
            "date": date.today().isoformat(),
            "method": f"{samples} flow_mod+barrier samples; packet_out to CONTROLLER at "
                      f"{PROBE_RATE:g}/s for {rate_seconds:g} s; up to {max_table} flows",
            "channel_rtt_ms": round(echo * 1e3, 3),
        })


async def calibrate_main(args: argparse.Namespace) -> int:
    print(f"calibrate: waiting for a switch on {args.listen[0]}:{args.listen[1]}",
          file=sys.stderr, flush=True)
    host, port = args.listen
    conn, server = await accept_one(host, port, timeout=300)
    try:
        profile = await calibrate(conn, name=args.name, samples=args.samples,
                                  max_table=args.max_table, rate_seconds=args.rate_seconds,
                                  log=lambda m: print(f"calibrate: {m}", file=sys.stderr,
                                                      flush=True))
    finally:
        await conn.close()
        server.close()
    with open(args.out, "w") as out:
        out.write(profile.to_yaml())
    print(f"calibrate: wrote {args.out}", file=sys.stderr)
    return 0
