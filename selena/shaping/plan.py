"""Shaping of one direction of a link, at a placement and a TDF."""

from __future__ import annotations

import enum

from selena.model import Link
from selena.shaping.htb import htb_commands
from selena.shaping.netem import netem_args
from selena.shaping.prio import band_parents, prio_commands


class Placement(enum.Enum):
    DOM0 = "dom0"     # Dom0 side of the vif: real time, so time parameters are scaled
    GUEST = "guest"   # inside the guest on egress: already dilated, nothing scaled


def real_seconds(virtual_s: float, tdf: float) -> float:
    """A virtual duration (delay, jitter) as Dom0's real clock sees it."""
    return virtual_s * tdf


def real_rate_bps(virtual_bps: float, tdf: float) -> float:
    """A virtual rate as Dom0's real clock sees it: TDF times fewer bits per
    real second."""
    return virtual_bps / tdf


def shaping_commands(dev: str, link: Link, tdf: float,
                     placement: Placement = Placement.DOM0,
                     reshape: bool = False) -> list[list[str]]:
    """The exact tc commands shaping traffic leaving `dev` for one direction of
    `link`; `reshape` for a device these commands shaped before (a TDF change)."""
    scale = tdf if placement is Placement.DOM0 else 1.0
    netem = netem_args(real_seconds(link.delay_s, scale), real_seconds(link.jitter_s, scale),
                       link.loss, link.queue_packets)
    commands: list[list[str]] = []
    if link.rate_bps is not None:
        commands += htb_commands(dev, real_rate_bps(link.rate_bps, scale), reshape=reshape)
        parent = ["parent", "1:1", "handle", "10:"]
    else:
        parent = ["root", "handle", "1:"]
    if link.prio:
        # validate() requires a rate: the queue forms at the rate limit.
        if not reshape:
            commands += prio_commands(dev, "1:1")
        if netem:
            for band, handle in band_parents():
                commands.append(["tc", "qdisc", "replace", "dev", dev, "parent", band,
                                 "handle", handle, "netem", *netem])
    elif netem:
        commands.append(["tc", "qdisc", "replace", "dev", dev, *parent, "netem", *netem])
    return commands
