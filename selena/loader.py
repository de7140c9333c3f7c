"""Where topologies come from: a scenario file (clean API or SELENA style) or a
Mininet-style `--topo` spec, with an optional `--link` spec for every link."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from selena import topologies
from selena.compat import Action, SelenaScript, load_selena_file
from selena.errors import ScenarioError
from selena.model import Topology

_TOPOS = {
    "single": lambda a: topologies.star(*a), "star": lambda a: topologies.star(*a),
    "linear": lambda a: topologies.linear(*a), "tree": lambda a: topologies.tree(*a),
    "fattree": lambda a: topologies.fat_tree(*a),
}


def parse_link_spec(spec: str) -> dict[str, object]:
    """Mininet's `tc,bw=10,delay=5ms,jitter=1ms,loss=1,max_queue_size=100`.

    bw is in Mbit/s and loss in percent, as in Mininet.
    """
    parts = [p for p in spec.split(",") if p]
    if parts and parts[0] == "tc":
        parts = parts[1:]
    kwargs: dict[str, object] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise ScenarioError(f"--link {spec!r}: {part!r} is not KEY=VALUE")
        try:
            if key == "bw":
                kwargs["rate"] = float(value) * 1e6
            elif key in ("delay", "jitter"):
                kwargs[key] = value
            elif key == "loss":
                kwargs["loss"] = float(value) / 100
            elif key == "max_queue_size":
                kwargs["queue"] = int(value)
            else:
                raise ScenarioError(f"--link {spec!r}: unknown parameter {key!r} "
                                    "(bw, delay, jitter, loss, max_queue_size)")
        except ValueError:
            raise ScenarioError(f"--link {spec!r}: bad value for {key}: {value!r}") from None
    return kwargs


def parse_topo_spec(spec: str, link: dict[str, object]) -> Topology:
    name, *args = spec.split(",")
    if name not in _TOPOS:
        raise ScenarioError(f"--topo {spec!r}: unknown topology {name!r} "
                            f"(have {', '.join(sorted(_TOPOS))})")
    try:
        numbers = [int(a) for a in args]
    except ValueError:
        raise ScenarioError(f"--topo {spec!r}: arguments must be integers") from None
    try:
        topo = _TOPOS[name](numbers)
    except (TypeError, ValueError) as exc:
        raise ScenarioError(f"--topo {spec!r}: {exc}") from None
    for existing in topo.links:
        _apply_link(existing, link)
    return topo


def _apply_link(existing, link: dict[str, object]) -> None:
    from selena import units

    if "rate" in link:
        existing.rate_bps = units.rate_bps(link["rate"])  # type: ignore[arg-type]
    if "delay" in link:
        existing.delay_s = units.seconds(link["delay"])  # type: ignore[arg-type]
    if "jitter" in link:
        existing.jitter_s = units.seconds(link["jitter"])  # type: ignore[arg-type]
    if "loss" in link:
        existing.loss = float(link["loss"])  # type: ignore[arg-type]
    if "queue" in link:
        existing.queue_packets = int(link["queue"])  # type: ignore[call-overload]


@dataclass
class Scenario:
    topology: Topology
    actions: list[Action]
    run: Callable[..., object] | None      # the file's `run(exp)`, if it has one


def load(source: str, *, tdf: float | None = None,
         link_spec: str | None = None) -> tuple[Topology, list[Action]]:
    """Load a scenario file or a `--topo` spec; apply --tdf and --link overrides."""
    scenario = load_scenario(source, tdf=tdf, link_spec=link_spec)
    return scenario.topology, scenario.actions


def load_scenario(source: str, *, tdf: float | None = None,
                  link_spec: str | None = None) -> Scenario:
    """A scenario: topology, SELENA-style actions, and the run function."""
    run_fn = None
    link = parse_link_spec(link_spec) if link_spec else {}
    path = Path(source)
    if path.suffix == ".py":
        if not path.exists():
            raise ScenarioError(f"no such scenario file: {source}")
        script: SelenaScript = load_selena_file(path)
        namespace = script.namespace_after_run
        topo = namespace.get("topology")
        if topo is None and callable(namespace.get("build")):
            topo = namespace["build"]()  # type: ignore[operator]
        if topo is None:
            topo = script.topology
        if not isinstance(topo, Topology):
            raise ScenarioError(f"{source}: `topology` must be a selena Topology")
        for existing in topo.links:
            _apply_link(existing, link)
        actions = script.actions
        candidate = namespace.get("run")
        if candidate is not None and not callable(candidate):
            raise ScenarioError(f"{source}: `run` must be a function run(exp)")
        run_fn = candidate  # type: ignore[assignment]
    else:
        topo, actions = parse_topo_spec(source, link), []
    if tdf is not None:
        topo.tdf = tdf
    return Scenario(topo, actions, run_fn)  # type: ignore[arg-type]
