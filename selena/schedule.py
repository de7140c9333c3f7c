"""Link and node changes during a run, in virtual time.

A change is one of

    link A B set rate=10Mbit delay=20ms jitter=1ms loss=1% queue=100
    link A B delay=20ms            (`set` may be left out)
    link A B down | up
    node N crash | restart
    node N cpu_share=0.25          (`none` lifts it)

given to `exp.link(a, b).set(...)`, `.down()`, `.up()`, `exp.node(n).crash()`,
`.restart()`, `.set_cpu_share(0.25)` directly, as a string to `exp.at(t,
"link h1 s1 down")`, at the `selena>` prompt, or one per line with its
virtual time first in a schedule file
(`selena run --events FILE`):

    # virtual seconds, target, change
    12.5 link h1 s1 delay=20ms
    30   link h1 s1 down
    40   node h2 crash

Values use the topology's units and checks (selena.units, validate), so a
bad one is refused in one line naming the link, before a run starts when
it comes from a file. Unset values keep theirs; `rate=none` lifts the rate
limit. The experiment records each change applied (selena.experiment).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from selena import units
from selena.errors import Problem, ScenarioError, UnitError
from selena.model import Link, Topology
from selena.model.cpus import checked_share
from selena.validate import check_link

# The values a link change may set, with an example for the error messages.
LINK_VALUES = {"rate": "10Mbit", "delay": "20ms", "jitter": "1ms", "loss": "1%",
               "queue": "100"}
NODE_CHANGES = ("crash", "restart")
NODE_USAGE = "want `node N crash`, `node N restart` or `node N cpu_share=0.25` (or none)"
USAGE = ("want `link A B set NAME=VALUE...`, `link A B down|up` or `node N "
         f"crash|restart|cpu_share=SHARE` (NAME one of {', '.join(LINK_VALUES)}, e.g. "
         "delay=20ms)")


@dataclass(frozen=True)
class Event:
    """One change: to the link(s) between two nodes or to a node; `t` is its
    virtual time (None: now), `where` the FILE:LINE it came from."""

    target: str                         # "link" or "node"
    nodes: tuple[str, ...]              # (a, b) or (node,)
    change: str                         # "set", "down", "up", "crash", "restart"
    # set's NAME=VALUE, as written (a node's: cpu_share)
    values: tuple[tuple[str, str], ...] = ()
    t: float | None = None
    where: str = field(default="", compare=False)

    def text(self) -> str:
        """The change as it would be written (without the time)."""
        words = [self.target, *self.nodes]
        if self.change == "set":
            words += [f"{k}={v}" for k, v in self.values]
        else:
            words.append(self.change)
        return " ".join(words)


def parse_change(words: list[str], where: str = "") -> Event:
    """`link A B ...` or `node N ...` (no time) as an Event; ScenarioError in
    one line, prefixed by `where`, for anything else."""
    prefix = f"{where}: " if where else ""
    if not words:
        raise ScenarioError(f"{prefix}empty change: {USAGE}")
    target, rest = words[0], words[1:]
    if target == "link":
        if len(rest) < 3:
            raise ScenarioError(f"{prefix}{' '.join(words)!r}: {USAGE}")
        a, b, *change = rest
        if change in (["down"], ["up"]):
            return Event("link", (a, b), change[0], where=where)
        if change[:1] == ["set"]:
            change = change[1:]
        if not change:
            raise ScenarioError(f"{prefix}link {a} {b} set: give NAME=VALUE (e.g. "
                                "delay=20ms)")
        values: list[tuple[str, str]] = []
        for word in change:
            name, sep, value = word.partition("=")
            if not sep or name not in LINK_VALUES or not value:
                raise ScenarioError(f"{prefix}link {a} {b}: {word!r} is not NAME=VALUE with "
                                    f"NAME one of {', '.join(LINK_VALUES)} (e.g. "
                                    "delay=20ms), nor down or up")
            given = next((f"{name}={v}" for n, v in values if n == name), None)
            if given is not None:
                # Not the last one silently: which the author meant is theirs to say.
                raise ScenarioError(f"{prefix}link {a} {b}: {name} given twice ({given}, "
                                    f"{word}): give each value once")
            values.append((name, value))
        return Event("link", (a, b), "set", tuple(values), where=where)
    if target == "node":
        if len(rest) == 2 and rest[1].startswith("cpu_share="):
            value = rest[1].partition("=")[2]
            if not value:
                raise ScenarioError(f"{prefix}node {rest[0]}: give cpu_share a share of the "
                                    "host's CPUs (cpu_share=0.25) or none")
            return Event("node", (rest[0],), "set", (("cpu_share", value),), where=where)
        if len(rest) != 2 or rest[1] not in NODE_CHANGES:
            raise ScenarioError(f"{prefix}{' '.join(words)!r}: {NODE_USAGE}")
        return Event("node", (rest[0],), rest[1], where=where)
    raise ScenarioError(f"{prefix}{' '.join(words)!r}: {USAGE}")


def parse_line(line: str, where: str = "") -> Event | None:
    """One line of a schedule file: VIRTUAL_SECONDS CHANGE; None for a blank
    line or a comment."""
    words = line.split("#", 1)[0].split()
    if not words:
        return None
    prefix = f"{where}: " if where else ""
    try:
        t = float(words[0])
    except ValueError:
        raise ScenarioError(f"{prefix}{words[0]!r} is not a virtual time: start the line "
                            "with seconds after the scenario's start (e.g. `12.5 link h1 "
                            "s1 delay=20ms`)") from None
    if not math.isfinite(t) or t < 0:
        what = "is not a finite number" if not math.isfinite(t) else "is negative"
        raise ScenarioError(f"{prefix}virtual time {words[0]} {what}: give zero or more "
                            "seconds after the scenario's start")
    return dataclasses.replace(parse_change(words[1:], where), t=t)


def load_events(path: str | Path) -> list[Event]:
    """Every event of a schedule file, in time order (file order for equal
    times); the first bad line raises ScenarioError as FILE:LINE: what, fix."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not text"
        raise ScenarioError(f"events file {path}: cannot read it ({why})") from None
    events = [e for n, line in enumerate(text.splitlines(), start=1)
              if (e := parse_line(line, f"{path}:{n}")) is not None]
    return sorted(events, key=lambda e: e.t or 0.0)


def links_between(topo: Topology, a: str, b: str) -> list[Link]:
    """The point-to-point links joining nodes a and b (either way round);
    ScenarioError naming what there is for an unknown node or no link."""
    for name in (a, b):
        if name not in topo.nodes:
            raise ScenarioError(f"no node named {name!r} in experiment {topo.name} "
                                f"(have {', '.join(sorted(topo.nodes))})")
    links = [link for link in topo.links
             if {link.a.node, link.b.node} == {a, b} and a != b]
    if not links:
        peers = sorted({e.node for link in topo.links
                        for e in (link.a, link.b) if a in (link.a.node, link.b.node)} - {a})
        raise ScenarioError(f"no link between {a} and {b} in {topo.name} "
                            f"({a} is linked to {', '.join(peers) or 'nothing'})")
    return links


_KEEP = object()


def value_text(name: str, value: object) -> str:
    """A link value as a schedule file writes it: a string as given, a
    number (in its base unit: bit/s, seconds, a ratio) with its unit, so
    an event from the API reads `rate=5Mbit delay=20ms loss=1%`; None is
    `none` (no limit)."""
    if value is None:
        return "none"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if name == "rate":
        scale, unit = next(((s, u) for s, u in ((1e9, "Gbit"), (1e6, "Mbit"), (1e3, "kbit"))
                            if value >= s), (1.0, "bit"))
        return f"{value / scale:.12g}{unit}"
    if name in ("delay", "jitter"):
        scale, unit = next(((s, u) for s, u in ((1.0, "s"), (1e-3, "ms")) if value >= s),
                           (1e-6, "us"))
        return f"{value / scale:.12g}{unit}" if value else "0ms"
    if name == "loss":
        return f"{value * 100:.12g}%"
    return f"{value:.12g}"


def changed_link(link: Link, topo: Topology, *, rate: object = _KEEP, delay: object = _KEEP,
                 jitter: object = _KEEP, loss: object = _KEEP,
                 queue: object = _KEEP) -> tuple[Link, list[Problem]]:
    """`link` with the given values (units as Topology.add_link takes them;
    rate None lifts the rate limit, queue None the queue limit), checked
    as validation checks a topology's links: ScenarioError in one line naming
    the link and the value; returns the changed copy and the warnings (likely
    unit slips)."""
    where = str(link)
    given = dict(link.given)
    changes: dict[str, object] = {}

    def parse(what: str, value: object, parser: Callable[[Any], float],
              field_name: str) -> None:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ScenarioError(f"{where}: {what} must be a string or a number (e.g. "
                                f"{what}={LINK_VALUES[what]!r}), not "
                                f"{type(value).__name__} {value!r}")
        try:
            changes[field_name] = parser(value)
        except UnitError as exc:
            shown = str(exc) if str(exc).startswith(what) else f"{what}: {exc}"
            raise ScenarioError(f"{where}: {shown}") from None
        given[what] = value

    if rate is not _KEEP:
        if rate is None or (isinstance(rate, str) and rate.lower() == "none"):
            changes["rate_bps"] = None
            given["rate"] = None
        else:
            parse("rate", rate, units.rate_bps, "rate_bps")
    if delay is not _KEEP:
        parse("delay", delay, units.seconds, "delay_s")
    if jitter is not _KEEP:
        parse("jitter", jitter, units.seconds, "jitter_s")
    if loss is not _KEEP:
        parse("loss", loss, units.ratio, "loss")
    if queue is not _KEEP:
        if queue is None or (isinstance(queue, str) and queue.lower() == "none"):
            changes["queue_packets"] = None
        else:
            try:
                if isinstance(queue, bool) or not isinstance(queue, int | str):
                    raise ValueError
                changes["queue_packets"] = int(queue)
            except ValueError:
                raise ScenarioError(f"{where}: queue {queue!r} is not a number of packets "
                                    "(e.g. queue=100)") from None
    candidate = dataclasses.replace(link, **changes)    # type: ignore[arg-type]
    candidate.given = given
    problems: list[Problem] = []
    warnings: list[Problem] = []
    check_link(candidate, topo.describe(candidate), dict(topo.nodes),
               lambda kind, msg, at=None: problems.append(Problem(kind, msg)),
               lambda kind, msg, at=None: warnings.append(Problem(kind, msg)))
    if problems:
        raise ScenarioError(str(problems[0]))
    return candidate, warnings


def check_event(event: Event, topo: Topology,
                changed: dict[int, Link] | None = None) -> None:
    """What applying `event` to `topo` would refuse, refused now (nothing is
    changed): unknown nodes, no link, bad values. ScenarioError
    prefixed by the event's FILE:LINE. `changed` holds the links as earlier
    events of a schedule leave them (by id of the topology's link), and is
    updated."""
    changed = {} if changed is None else changed
    try:
        if event.target == "link":
            for link in links_between(topo, *event.nodes):
                if event.change == "set":
                    base = changed.get(id(link), link)
                    changed[id(link)] = changed_link(base, topo, **dict(event.values))[0]
        else:
            node = event.nodes[0]
            if node not in topo.nodes:
                raise ScenarioError(f"no node named {node!r} in experiment {topo.name} "
                                    f"(have {', '.join(sorted(topo.nodes))})")
            if event.change == "set":
                try:
                    checked_share(dict(event.values)["cpu_share"])
                except ValueError as exc:
                    raise ScenarioError(f"node {node}: {exc}") from None
                if topo.nodes[node].cpu_time == "real":
                    raise ScenarioError(f"node {node} has cpu_time='real', a cap of its own; "
                                        "a cpu_share would replace it: give the node one or "
                                        "the other")
    except ScenarioError as exc:
        if event.where:
            raise ScenarioError(f"{event.where}: {exc}") from None
        raise


def check_events(events: Sequence[Event], topo: Topology) -> None:
    """check_event for each event in time order, each value checked against
    the link as the events before it leave it (a jitter lowered at 10 s lets
    the delay go below its old jitter at 20 s)."""
    changed: dict[int, Link] = {}
    for event in sorted(events, key=lambda e: e.t or 0.0):
        check_event(event, topo, changed)


__all__ = ["LINK_VALUES", "Event", "changed_link", "check_event", "check_events",
           "links_between", "load_events", "parse_change", "parse_line"]
