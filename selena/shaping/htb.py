"""htb: the rate limit of a link direction, with netem hung below it."""

from __future__ import annotations

# A burst of at least one full frame at any rate, so the rate is exact for MTU traffic.
MIN_BURST_BYTES = 1600


def htb_commands(dev: str, rate_bps: float, *, reshape: bool = False) -> list[list[str]]:
    """The root htb and its one class; `reshape` changes only the class's rate
    of a device shaped before (htb has no change operation, so replacing its
    root qdisc with another htb fails)."""
    rate = f"{max(1, round(rate_bps))}bit"
    burst = f"{max(MIN_BURST_BYTES, round(rate_bps / 8 / 1000))}b"  # about 1 ms of traffic
    root = [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"]]
    return ([] if reshape else root) + [
        ["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
         "rate", rate, "ceil", rate, "burst", burst, "cburst", burst],
    ]
