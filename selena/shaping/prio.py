"""prio: a strict-priority queue for a link direction, standing in for a
switch port's priority queues (QJump's levels, 802.1p classes).

Three bands keyed on the IP precedence, the top three bits of IPv4's TOS
byte or IPv6's traffic class (what `ping -Q`, IP_TOS and IPV6_TCLASS set):
precedence 6-7 goes to band 1, served first; 4-5 to band 2; everything else,
and non-IP frames, to band 3. A band is served only while the bands above
it are empty, so high-precedence packets never wait behind a queue of bulk
traffic, only behind the one packet on the wire. Packets forwarded from a
vif carry no socket priority, hence filters on the header, not a priomap.
"""

from __future__ import annotations

PRIO_HANDLE = "10:"
BANDS = 3
# (tc u32 selector, value, mask, band): precedence 6-7, then 4-5.
PRECEDENCE_FILTERS = (
    (("ip", "tos"), "0xc0", "0xc0", 1),
    (("ip6", "priority"), "0xc0", "0xc0", 1),
    (("ip", "tos"), "0x80", "0xc0", 2),
    (("ip6", "priority"), "0x80", "0xc0", 2),
)


def prio_commands(dev: str, parent: str) -> list[list[str]]:
    """The prio qdisc under `parent` and its precedence filters."""
    commands = [["tc", "qdisc", "replace", "dev", dev, "parent", parent, "handle", PRIO_HANDLE,
                 "prio", "bands", str(BANDS), "priomap", *([str(BANDS - 1)] * 16)]]
    for pref, ((family, field), value, mask, band) in enumerate(PRECEDENCE_FILTERS, start=1):
        protocol = "ip" if family == "ip" else "ipv6"
        commands.append(["tc", "filter", "replace", "dev", dev, "parent", PRIO_HANDLE,
                         "protocol", protocol, "pref", str(pref), "u32", "match", family, field,
                         value, mask, "flowid", f"10:{band}"])
    return commands


def band_parents() -> list[tuple[str, str]]:
    """(parent class, handle) for the qdisc below each band."""
    return [(f"10:{band}", f"{20 + band}:") for band in range(1, BANDS + 1)]
