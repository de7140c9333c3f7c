"""The two-host demo, run in the lab's Dom0.

Two tiny-host guests, h1 (10.0.0.1) and h2 (10.0.0.2), on one Open vSwitch
bridge in Dom0, both dilated by the same TDF before they first run. The link
is shaped in Dom0 with the TDF semantics selena uses everywhere: Dom0 runs in
real time, so the one-way delay d configured for the link becomes netem
delay d x TDF on the Dom0 side of each guest's vif (each direction is delayed
once, so the round trip adds 2d of guest time). h1 pings h2; the guest-measured
round-trip time should be 2d, whatever the TDF, while the experiment takes TDF
times longer in real time.

Run in Dom0: python3 -m selena.lab.demo --tdf 10
From the host: selena lab demo --tdf 10
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

from selena.errors import SelenaError
from selena.lab.dom0 import console_log, create_paused, sh, tiny_guest_config, try_sh
from selena.model import Topology
from selena.shaping import shaping_commands

BRIDGE = "sl-demo0"
DELAY_MS = 5.0
PINGS = 10
HOSTS = (("selena-demo-h1", "10.0.0.1", "00:16:3e:5e:1e:01"),
         ("selena-demo-h2", "10.0.0.2", "00:16:3e:5e:1e:02"))
RTT = re.compile(r"min/avg/max = ([\d.]+)/([\d.]+)/([\d.]+) ms")


class DemoFailed(Exception):
    pass


def config(name: str, ip: str, mac: str, init: str | None) -> str:
    extra = f"selena.ip={ip}/24" + (f" {init}" if init else "")
    return tiny_guest_config(name, extra,
                             vifs=(f"mac={mac},bridge={BRIDGE},script=vif-openvswitch",))


def cleanup() -> None:
    for name, _, _ in HOSTS:
        try_sh("xl", "destroy", name)
    try_sh("ovs-vsctl", "--if-exists", "del-br", BRIDGE)


def run(tdf: float) -> int:
    cleanup()
    sh("ovs-vsctl", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE,
       "external_ids:selena-experiment=demo")
    domids = []
    try:
        for i, (name, ip, mac) in enumerate(HOSTS):
            init = (f"selena.init=/bin/ping selena.args=-c,{PINGS},-i,0.5,-W,5,{HOSTS[1][1]}"
                    if i == 0 else None)
            domids.append(create_paused(name, config(name, ip, mac, init), tdf))
        # Dom0 shapes in real time: selena.shaping scales the delay by the TDF.
        topo = Topology("demo", tdf=tdf)
        link = topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"),
                             topo.add_host("h2", ip="10.0.0.2/24"), delay=DELAY_MS / 1000)
        for domid in domids:
            for command in shaping_commands(f"vif{domid}.0", link, tdf):
                sh(*command)
        start = time.monotonic()
        # h2 first, so it answers from h1's first ping on.
        sh("xl", "unpause", domids[1])
        h2_log = console_log(HOSTS[1][0])
        while "SELENA-GUEST-READY" not in (h2_log.read_text(errors="replace")
                                           if h2_log.exists() else ""):
            if time.monotonic() - start > 60 + 10 * tdf:
                raise DemoFailed("h2 did not boot")
            time.sleep(0.2)
        sh("xl", "unpause", domids[0])
        h1_log = console_log(HOSTS[0][0])
        deadline = start + 120 + 30 * tdf
        text = ""
        while time.monotonic() < deadline:
            text = h1_log.read_text(errors="replace") if h1_log.exists() else ""
            if "SELENA-GUEST-EXIT" in text:
                break
            time.sleep(0.2)
        real = time.monotonic() - start
        if not RTT.search(text):
            diag = [try_sh(*c).stdout for c in
                    (["ovs-vsctl", "show"], ["ip", "-br", "link"], ["tc", "qdisc"],
                     ["xl", "list"])]
            diag.append(h2_log.read_text(errors="replace")[-1500:] if h2_log.exists() else "")
            print("diagnostics:\n" + "\n".join(diag))
    finally:
        cleanup()
    lines = [ln.split("] ", 1)[-1] for ln in text.splitlines()]
    body = [ln for ln in lines if "bytes from" in ln or "packets" in ln or "round-trip" in ln]
    print(f"two-host demo: h1 -> h2 over a link with {DELAY_MS:g} ms one-way delay, TDF {tdf:g}")
    print("\n".join("  h1$ " + ln for ln in body) or "  (no ping output)")
    m = RTT.search(text)
    if not m:
        print("FAILED: h1 printed no ping summary; console tail:\n" + "\n".join(lines[-20:]))
        return 1
    avg = float(m.group(2))
    times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", text))
    median = times[len(times) // 2]
    expected = 2 * DELAY_MS
    print(f"guest-measured RTT: median {median:.3f} ms, avg {avg:.3f} ms "
          f"(configured: {expected:g} ms); real time for the run {real:.1f} s")
    # The first ping also resolves ARP; the median is the link's steady state.
    ok = expected <= median <= expected * 1.5
    print("RESULT: " + ("RTT matches the configured delay" if ok else
                        "RTT OUT OF RANGE (raise the TDF for more headroom)"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="selena two-host demo (run in Dom0)")
    parser.add_argument("--tdf", type=float, default=float(os.environ.get("SELENA_TDF", "10")))
    args = parser.parse_args(argv)
    try:
        return run(args.tdf)
    except (DemoFailed, SelenaError) as exc:
        print(f"FAILED: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
