"""`selena lab bench-guests`: PV against PVH, the figures that decide a
node's default guest type (printed, never asserted), all in one boot:

- boot: unpause to agents ready of two tiny guests (through the experiment
  lifecycle), real seconds and the guest seconds they are at the TDF;
- memory: what a guest sees (used and available after boot, of the same
  configured memory) and what the host gives per guest (Xen's free memory
  before and after the deploy: a PVH guest also costs its shadow or HAP
  page tables and its HVM state);
- RTT floor: ping between the two guests over an unshaped link, median and
  90th percentile in the guests' own (virtual) milliseconds;
- clock error: clockcheck in one guest at TDF 10 (as `selena lab
  check-clock --no-change` runs it), its CLOCK_MONOTONIC rate against 1/TDF
  and a 300 ms nanosleep's real duration against TDF x 300 ms;

each at TDF 1 and 10 where the TDF matters.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass

from selena import units
from selena.backends.xl import XlBackend
from selena.experiment import Experiment
from selena.lab import check_clock
from selena.lab.bench import meminfo_kb
from selena.model import Topology

PINGS = 30
TYPES = ("pv", "pvh")
CLOCK_TDF = 10.0


@dataclass
class Row:
    virt: str
    tdf: float
    boot_s: float
    configured_mb: int
    used_mb: int
    available_mb: int
    host_mb_per_guest: float
    rtt_p50_ms: float
    rtt_p90_ms: float


def _free_memory_mb(backend: XlBackend) -> int:
    free = backend.host_free_mb()
    if free is None:
        raise RuntimeError("selena-tdf host gave no free_memory")
    return free


def pair(virt: str, tdf: float) -> Row:
    name = f"bg{virt}{units.tdf_text(tdf).replace('.', '-')}"
    topo = Topology(name, tdf=tdf)
    h1 = topo.add_host("h1", ip="10.0.0.1/24", virt=virt)
    h2 = topo.add_host("h2", ip="10.0.0.2/24", virt=virt)
    topo.add_link(h1, h2)
    backend = XlBackend()
    before = _free_memory_mb(backend)
    with Experiment(topo, backend=backend) as exp:
        after = _free_memory_mb(backend)
        meminfo = exp.cmd("h1", "cat /proc/meminfo", check=True).stdout.decode()
        exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")        # ARP first
        out = exp.cmd("h1", f"ping -c {PINGS} -i 0.2 -W 5 10.0.0.2", check=True)
        rtts = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", out.stdout.decode()))
        boot = exp.timings["boot_to_agents_s"]
    if not rtts:
        raise RuntimeError(f"{virt} at TDF {tdf:g}: ping gave no round trip")
    total = meminfo_kb(meminfo, "MemTotal")
    available = meminfo_kb(meminfo, "MemAvailable")
    return Row(virt, tdf, boot, topo.nodes["h1"].memory_mb, (total - available) // 1024,
               available // 1024, (before - after) / 2, statistics.median(rtts),
               rtts[min(len(rtts) - 1, int(0.9 * len(rtts)))])


def clock_error(virt: str) -> tuple[float, float]:
    """(CLOCK_MONOTONIC rate error in ppm, nanosleep's real duration error
    in %) of one guest at CLOCK_TDF, no change of TDF."""
    run = check_clock.run_guest_checkpointed(CLOCK_TDF, [], 600.0, kinds=[], virt=virt)
    first = check_clock.segments(run, CLOCK_TDF)[0][1]
    rate = check_clock.fit_rate([(s.real, s.mono / 1e9) for s in first])
    marks = run.timers.get("nanosleep@0", {})
    if "T0" not in marks or "T1" not in marks:
        raise RuntimeError(f"{virt}: clockcheck gave no nanosleep result")
    real = marks["T1"][0] - marks["T0"][0]
    expected = CLOCK_TDF * check_clock.TIMER_MS / 1000
    return (rate * CLOCK_TDF - 1) * 1e6, (real - expected) / expected * 100


def main_in_dom0(tdfs: list[float]) -> int:
    rows = [pair(virt, tdf) for tdf in tdfs for virt in TYPES]
    clocks = {virt: clock_error(virt) for virt in TYPES}
    print(f"  PV against PVH: two tiny guests ({rows[0].configured_mb} MB each) on an "
          "unshaped link, one boot")
    print(f"  {'type':<4} {'TDF':>4} {'boot real s':>11} {'boot guest s':>12} "
          f"{'used MB':>7} {'avail MB':>8} {'host MB/guest':>13} "
          f"{'RTT p50 ms':>10} {'RTT p90 ms':>10}")
    for r in rows:
        print(f"  {r.virt:<4} {r.tdf:>4g} {r.boot_s:>11.1f} {r.boot_s / r.tdf:>12.2f} "
              f"{r.used_mb:>7} {r.available_mb:>8} {r.host_mb_per_guest:>13.1f} "
              f"{r.rtt_p50_ms:>10.2f} {r.rtt_p90_ms:>10.2f}")
    print(f"  clock at TDF {CLOCK_TDF:g} (clockcheck, no change): CLOCK_MONOTONIC rate error "
          f"and a {check_clock.TIMER_MS} ms nanosleep's real duration error")
    for virt, (ppm, timer) in clocks.items():
        print(f"  {virt:<4} rate {ppm:+.0f} ppm, nanosleep {timer:+.2f} %")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--tdfs", default="1,10")
    a = parser.parse_args()
    sys.exit(main_in_dom0([float(x) for x in a.tdfs.split(",")]))
