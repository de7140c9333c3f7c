"""htb: the rate limit of a link direction, with netem hung below it."""

from __future__ import annotations

# A burst of at least one full frame at any rate, so the rate is exact for MTU traffic.
MIN_BURST_BYTES = 1600


def htb_commands(dev: str, rate_bps: float) -> list[list[str]]:
    rate = f"{max(1, round(rate_bps))}bit"
    burst = f"{max(MIN_BURST_BYTES, round(rate_bps / 8 / 1000))}b"  # about 1 ms of traffic
    return [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
        ["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
         "rate", rate, "ceil", rate, "burst", burst, "cburst", burst],
    ]
