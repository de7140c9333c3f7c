"""Mininet's command-line habits: `--topo NAME[,ARGS]`,
`--link tc,bw=..,delay=..,jitter=..,loss=..,max_queue_size=..` and
`--host cfs,cpu=..`, with
Mininet's meanings (bw in Mbit/s, loss in percent, delay and jitter as tc
times such as 5ms; delay applied once per direction, so the round trip adds
twice the delay, as with Mininet's TCLink)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from selena import topologies, units
from selena.errors import ScenarioError, UnitError
from selena.model import Link, LinkOptions, NodeKind, Topology
from selena.model.cpus import is_share
from selena.validate import RATE_MAX_BPS, RATE_MIN_BPS

# Mininet's names; `star` and `fattree` are selena's own.
TOPOS: dict[str, Callable[..., Topology]] = {
    "minimal": topologies.minimal,
    "single": topologies.single,
    "reversed": topologies.reversed_single,
    "linear": topologies.linear,
    "tree": topologies.tree,
    "torus": topologies.torus,
    "star": topologies.star,
    "fattree": topologies.fat_tree,
}
LINK_KEYS = ("bw", "delay", "jitter", "loss", "max_queue_size")


def _parameters(builder: Callable[..., Topology]) -> list[str]:
    """The size parameters of a topology builder, in order (not name/tdf/link)."""
    return [p.name for p in inspect.signature(builder).parameters.values()
            if p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in ("name", "tdf")]


def topo_usage(name: str) -> str:
    builder = TOPOS[name]
    params = []
    for p in inspect.signature(builder).parameters.values():
        if p.name in _parameters(builder):
            if p.default is p.empty:
                params.append(p.name)
            else:  # a None default is "optional, derived from the others"
                params.append(f"[{p.name}]" if p.default is None else f"{p.name}={p.default}")
    return f"{name}" + (f",{','.join(params)}" if params else "")


def parse_topo_spec(spec: str, link: LinkOptions | None = None) -> Topology:
    """`linear`, `linear,3`, `tree,depth=2,fanout=3`, `torus,3,3`..."""
    name, *args = [part.strip() for part in spec.split(",")]
    if name not in TOPOS:
        raise ScenarioError(f"--topo {spec!r}: unknown topology {name!r} "
                            f"(have {', '.join(topo_usage(t) for t in TOPOS)})")
    builder = TOPOS[name]
    allowed = _parameters(builder)
    positional: list[int] = []
    keywords: dict[str, int] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        text = value if sep else arg
        try:
            number = int(text)
        except ValueError:
            raise ScenarioError(f"--topo {spec!r}: {arg!r} is not an integer "
                                f"(usage: {topo_usage(name)})") from None
        if not sep:
            if keywords:
                raise ScenarioError(f"--topo {spec!r}: a positional argument after a "
                                    "keyword one")
            positional.append(number)
        elif key not in allowed:
            raise ScenarioError(f"--topo {spec!r}: {name} has no parameter {key!r} "
                                f"(usage: {topo_usage(name)})")
        else:
            keywords[key] = number
    if len(positional) > len(allowed):
        raise ScenarioError(f"--topo {spec!r}: too many arguments (usage: {topo_usage(name)})")
    for key in allowed[:len(positional)]:
        if key in keywords:
            raise ScenarioError(f"--topo {spec!r}: {key} given twice")
    try:
        topo = builder(*positional, **keywords)
    except TypeError:
        raise ScenarioError(f"--topo {spec!r}: missing arguments "
                            f"(usage: {topo_usage(name)})") from None
    except ValueError as exc:
        raise ScenarioError(f"--topo {spec!r}: {exc}") from None
    # The user wrote the spec, not a file: problems point at it (not at the
    # line of whatever program called the builder, such as selena's own script).
    where = f"--topo {spec}"
    for node in topo.nodes.values():
        node.defined_at = where
    for made in topo.links:
        made.defined_at = where
    for hub in topo.hubs:
        hub.defined_at = where
    apply_link_spec(topo, link or {})
    return topo


# mn's --link classes: every selena link is a Dom0 bridge shaped as TCLink
# shapes (tcu, TCLink for user switches; ovs, a patch between OVS switches).
LINK_CLASSES = ("tc", "tcu", "default", "ovs")


def parse_link_spec(spec: str) -> LinkOptions:
    """Mininet's `tc,bw=10,delay=5ms,jitter=1ms,loss=1,max_queue_size=100`
    as add_link keyword arguments (a class alone, `tc` or `default`: no
    shaping); TCLink's use_htb is accepted and ignored, its enable_ecn and
    enable_red refused (selena.mininet's reasons)."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if parts and parts[0] in LINK_CLASSES:
        parts = parts[1:]
    kwargs: LinkOptions = {}
    given: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise ScenarioError(f"--link {spec!r}: {part!r} is not KEY=VALUE "
                                f"({', '.join(LINK_KEYS)})")
        if key in given:        # Mininet keeps the last; which one was meant is the user's
            raise ScenarioError(f"--link {spec!r}: {key} given twice ({key}={given[key]}, "
                                f"{part}): give each once")
        given[key] = value
        try:
            _link_value(spec, key, value, kwargs)
        except ValueError:
            raise ScenarioError(f"--link {spec!r}: bad value for {key}: {value!r}") from None
    return kwargs


def _link_value(spec: str, key: str, value: str, kwargs: LinkOptions) -> None:
    """One KEY=VALUE of a --link spec into `kwargs` (ValueError: not a number)."""
    from selena.mininet.topo import LINK_REFUSED

    if key == "bw":
        mbit = float(value)                         # Mbit/s, as in Mininet
        if not RATE_MIN_BPS <= mbit * 1e6 <= RATE_MAX_BPS:     # and not NaN
            raise ScenarioError(f"--link {spec!r}: bw {value} is out of range: "
                                f"Mininet's bw is in Mbit/s, from "
                                f"{RATE_MIN_BPS / 1e6:g} to {RATE_MAX_BPS / 1e6:g}")
        kwargs["rate"] = mbit * 1e6
    elif key == "delay":
        kwargs["delay"] = _tc_time(spec, key, value)
    elif key == "jitter":
        kwargs["jitter"] = _tc_time(spec, key, value)
    elif key == "loss":
        percent = float(value)
        if not 0 <= percent <= 100:
            raise ScenarioError(f"--link {spec!r}: loss {value} is not a percentage "
                                "from 0 to 100")
        kwargs["loss"] = f"{value}%"
    elif key == "max_queue_size":
        kwargs["queue"] = int(value)
    elif key == "use_htb":          # selena picks its own qdiscs for a link
        if value.lower() not in ("true", "false", "1", "0"):
            raise ScenarioError(f"--link {spec!r}: use_htb={value}: True or False")
    elif key in LINK_REFUSED:
        raise ScenarioError(f"--link {spec!r}: {key} is not supported: {LINK_REFUSED[key]}")
    else:
        raise ScenarioError(f"--link {spec!r}: unknown parameter {key!r} "
                            f"({', '.join(LINK_KEYS)})")


def _tc_time(spec: str, key: str, value: str) -> str:
    try:
        float(value)
    except ValueError:
        pass
    else:
        raise ScenarioError(f"--link {spec!r}: {key}={value} has no unit; write e.g. "
                            f"{key}={value}ms (Mininet's {key} is a tc time: 5ms, 100us, 1s)")
    try:
        units.seconds(value)
    except UnitError as exc:
        raise ScenarioError(f"--link {spec!r}: {exc}") from None
    return value


def apply_link_spec(topo: Topology, link: LinkOptions) -> None:
    """Set the given parameters on every link of the topology."""
    for existing in topo.links:
        _apply(existing, link)


def _apply(existing: Link, link: LinkOptions) -> None:
    # A --link spec never carries None (parse_link_spec): present is a value.
    if (rate := link.get("rate")) is not None:
        existing.rate_bps = units.rate_bps(rate)
    if "delay" in link:
        existing.delay_s = units.seconds(link["delay"])
    if "jitter" in link:
        existing.jitter_s = units.seconds(link["jitter"])
    if "loss" in link:
        existing.loss = units.ratio(link["loss"])
    if (queue := link.get("queue")) is not None:
        existing.queue_packets = int(queue)
    existing.given.update(link)


# mn's --host classes: proc is Host, cfs CPULimitedHost (sched cfs); rt,
# CPULimitedHost under the real-time scheduler, has no Xen counterpart.
HOST_CLASSES = ("proc", "cfs", "rt")


def parse_host_spec(spec: str) -> float | None:
    """mn's `--host cfs,cpu=0.25` as a cpu_share for every host (None: no
    cap, as `proc`, `cfs` alone or cpu=-1)."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts or parts[0] not in HOST_CLASSES:
        raise ScenarioError(f"--host {spec!r}: start with a host class, one of "
                            f"{', '.join(HOST_CLASSES)} (e.g. --host cfs,cpu=0.25)")
    if parts[0] == "rt":
        raise ScenarioError(f"--host {spec!r}: rt (the real-time scheduler) has no Xen "
                            "counterpart here; use cfs (a credit2 cap, quota-like as cfs's)")
    share: float | None = None
    if [p.partition("=")[0] for p in parts[1:]].count("cpu") > 1:
        raise ScenarioError(f"--host {spec!r}: give cpu= once (--host {parts[0]},cpu=SHARE)")
    for part in parts[1:]:
        key, sep, value = part.partition("=")
        if key != "cpu" or not sep:
            raise ScenarioError(f"--host {spec!r}: {part!r} is not cpu=SHARE (a share of "
                                "the host's CPUs, 0.25; pin vCPUs with add_host(cpus=...))")
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if number == -1:
            share = None            # Mininet's default: no limit
        elif not is_share(number):
            raise ScenarioError(f"--host {spec!r}: cpu={value} is not a share of the host's "
                                "CPUs: give a number above 0 and at most 1, or -1 for none")
        else:
            share = number
    if share is not None and parts[0] == "proc":
        raise ScenarioError(f"--host {spec!r}: Mininet's proc hosts ignore cpu=; give "
                            f"cfs,cpu={share:g} to cap them")
    return share


def apply_host_spec(topo: Topology, share: float | None) -> list[str]:
    """Give every host without a CPU cap of its own (a cpu_share, or
    cpu_time='real') the share; the names of those given it."""
    given: list[str] = []
    if share is None:
        return given
    for node in topo.nodes.values():
        if node.kind is NodeKind.HOST and node.cpu_share is None and node.cpu_time != "real":
            node.cpu_share = share
            given.append(node.name)
    return given
