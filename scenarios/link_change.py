"""A link's delay changed mid-run at a chosen virtual time: two hosts over one
link of 30 ms one-way delay, a ping every 0.2 s the whole time, and at 4
virtual seconds into the pings `exp.at(t, exp.link("h1", "h2").set,
delay="60ms")`. Each ping's round trip should be 2 x the delay in force
when it was sent: 60 ms before the change, 120 ms after.

The run is at TDF 10 because the lab adds about 11 ms of real time to each
round trip (docs/fidelity.md, the calibrated floor): at TDF 10 that is
about 1.3 ms of virtual time, 2% of the shorter round trip; at TDF 1 it
would be 18%. Both delays are re-rendered in Dom0 x TDF (300 ms, then
600 ms of real delay per direction).

    selena run scenarios/link_change.py --out results/link-change
    selena run scenarios/link_change.py --param delays=20,60 --tdf 20

Or with the change from a schedule file instead of exp.at (the scenario then
only watches: its pings must span the event's time, about 0.5 to 8.5 s):

    echo "4.5 link h1 h2 delay=60ms" > change.events
    selena run scenarios/link_change.py --param change=events --events change.events

Records rtt_ms_before and rtt_ms_after (against 2 x each delay) and
change_late_ms, how much later than asked (virtual ms) the change was in
force; the bundle's meta.json `events` has the change with its virtual and
real time. tests/lab/test_link_change_e2e.py runs it.
"""

import re

from selena.model import Topology

TDF = 10
DEFAULT_DELAYS = "30,60"     # one-way ms before and after the change
SEGMENT_S = 4.0              # virtual seconds of pings on each side of the change
PING_INTERVAL_S = 0.2
MARGIN_S = 0.5               # pings sent this close to the change are left out


def delays_ms(text):
    """`--param delays=30,60`: the one-way delay before and after the change."""
    try:
        before, after = (float(part) for part in str(text).split(","))
    except ValueError:
        raise ValueError(f"delays={text!r}: want two one-way delays in ms, e.g. "
                         "30,60") from None
    return before, after


def build(delays=DEFAULT_DELAYS, change="at"):
    """`--param change=events`: the change comes from `--events FILE`."""
    if change not in ("at", "events"):
        raise ValueError(f"change={change!r}: want at (the scenario changes the link) or "
                         "events (selena run --events FILE does)")
    topology = Topology("linkchange", tdf=TDF)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, delay=f"{delays_ms(delays)[0]:g}ms")
    return topology


def split_rtts(text, start, change, interval=PING_INTERVAL_S, margin=MARGIN_S):
    """ping's replies (busybox's seq from 0, as the guests have it, or
    iputils' icmp_seq from 1; one sent every `interval` virtual seconds from
    `start`) as round trips sent before and after the virtual instant
    `change`, leaving out those within `margin` of it."""
    before, after = [], []
    for name, seq, rtt in re.findall(r"(icmp_seq|seq)=(\d+) ttl=\d+ time=([\d.]+) ms", text):
        first = 1 if name == "icmp_seq" else 0
        sent = start + (int(seq) - first) * interval
        if sent <= change - margin:
            before.append(float(rtt))
        elif sent >= change + margin:
            after.append(float(rtt))
    return before, after


def run(exp):
    d1, d2 = delays_ms(exp.params.get("delays", DEFAULT_DELAYS))
    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")          # ARP first
    count = int(2 * SEGMENT_S / PING_INTERVAL_S)
    ping = exp.start("h1", f"ping -c {count} -i {PING_INTERVAL_S} -W 5 10.0.0.2",
                     timeout=2 * SEGMENT_S + 60)
    start = exp.now()
    if exp.params.get("change", "at") == "events":       # selena run --events FILE
        result = exp.wait(ping)
        if not exp.events:
            raise RuntimeError("--param change=events: no event was applied during the "
                               "pings (give --events with one 1 to 8 s in)")
        due = exp.events[-1].get("scheduled_s", exp.events[-1]["virtual_s"])
    else:
        due = start + SEGMENT_S
        change = exp.at(due, exp.link("h1", "h2").set, delay=f"{d2:g}ms")
        result = exp.wait(ping)
        change.result()
    changed = exp.events[-1]["virtual_s"]
    before, after = split_rtts(result.stdout.decode(), start, changed)
    exp.record("rtt_ms_before", before, expected=2 * d1, unit="ms")
    exp.record("rtt_ms_after", after, expected=2 * d2, unit="ms")
    exp.record("change_late_ms", (changed - due) * 1000, unit="ms")
