"""Mininet's link classes, as names (`link=TCLink`). selena shapes every
link that has bw/delay/jitter/loss/max_queue_size, whichever class is named
(as if every link were a TCLink)."""

from __future__ import annotations


class Intf:
    pass


class TCIntf(Intf):
    pass


class Link:
    pass


class TCLink(Link):
    pass


class TCULink(TCLink):
    pass


OVSLink = Link
