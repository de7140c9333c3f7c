"""Switch profiles: YAML data files describing a switch's control plane.

    name: pica8-p3290
    provenance: {source: ..., measured: ..., assumed: ...}
    flow_mod:
      delay: {distribution: constant, ms: 6}        # or uniform min_ms/max_ms,
                                                    # or empirical samples_ms: [...]
    packet_in:
      delay_ms: 2          # processing time of each packet_in (serial)
      max_rate: 50         # packet_in per second; null: no limit
      burst: 5             # token bucket depth
    table:
      capacity: 2048       # flow entries; null: no limit
    replies:
      barrier_ms: 0
      stats_ms: 0
    seed: 0                # for the delay distributions

Every duration is in the switch guest's (dilated) time.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ProfileError(Exception):
    """A profile file that cannot be used; the message names the field."""


@dataclass(frozen=True)
class Distribution:
    kind: str                       # constant | uniform | empirical
    values_s: tuple[float, ...]     # constant: (v,), uniform: (lo, hi), empirical: samples

    def sample(self, rng: random.Random) -> float:
        if self.kind == "constant":
            return self.values_s[0]
        if self.kind == "uniform":
            return rng.uniform(*self.values_s)
        return rng.choice(self.values_s)

    @property
    def median_s(self) -> float:
        if self.kind == "uniform":
            return sum(self.values_s) / 2
        ordered = sorted(self.values_s)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    @property
    def is_zero(self) -> bool:
        return all(v == 0 for v in self.values_s)

    def to_yaml(self) -> dict[str, Any]:
        ms = [round(v * 1000, 4) for v in self.values_s]
        if self.kind == "constant":
            return {"distribution": "constant", "ms": ms[0]}
        if self.kind == "uniform":
            return {"distribution": "uniform", "min_ms": ms[0], "max_ms": ms[1]}
        return {"distribution": "empirical", "samples_ms": ms}


ZERO = Distribution("constant", (0.0,))


@dataclass(frozen=True)
class Profile:
    name: str
    flow_mod_delay: Distribution = ZERO
    packet_in_delay_s: float = 0.0
    packet_in_rate: float | None = None
    packet_in_burst: int = 1
    table_capacity: int | None = None
    barrier_delay_s: float = 0.0
    stats_delay_s: float = 0.0
    seed: int = 0
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_yaml(self) -> str:
        data = {
            "name": self.name,
            "provenance": self.provenance,
            "flow_mod": {"delay": self.flow_mod_delay.to_yaml()},
            "packet_in": {"delay_ms": round(self.packet_in_delay_s * 1000, 4),
                          "max_rate": self.packet_in_rate, "burst": self.packet_in_burst},
            "table": {"capacity": self.table_capacity},
            "replies": {"barrier_ms": round(self.barrier_delay_s * 1000, 4),
                        "stats_ms": round(self.stats_delay_s * 1000, 4)},
            "seed": self.seed,
        }
        return yaml.safe_dump(data, sort_keys=False)


def _optional_number(data: dict[str, Any], key: str, where: str, *,
                     minimum: float = 0.0) -> float | None:
    """The number at `key`, or None when it is absent or null."""
    if data.get(key) is None:
        return None
    return _number(data, key, where, minimum=minimum)


def _number(data: dict[str, Any], key: str, where: str, *, default: float | None = 0.0,
            minimum: float = 0.0) -> float:
    """The number at `key` (`default` when absent; None: required)."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value < minimum:
        raise ProfileError(f"{where}.{key}: want a number >= {minimum:g}, got {value!r}")
    return float(value)


def _section(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise ProfileError(f"{where}.{key}: want a mapping, got {value!r}")
    return value


def _distribution(data: Any, where: str) -> Distribution:
    if data is None:
        return ZERO
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: want a mapping with `distribution`, got {data!r}")
    kind = data.get("distribution")
    if kind == "constant":
        return Distribution("constant", (_number(data, "ms", where, default=None) / 1000,))
    if kind == "uniform":
        lo = _number(data, "min_ms", where, default=None) / 1000
        hi = _number(data, "max_ms", where, default=None) / 1000
        if hi < lo:
            raise ProfileError(f"{where}: max_ms is below min_ms")
        return Distribution("uniform", (lo, hi))
    if kind == "empirical":
        samples = data.get("samples_ms")
        if not isinstance(samples, list) or not samples:
            raise ProfileError(f"{where}.samples_ms: want a non-empty list of milliseconds")
        values = []
        for i, v in enumerate(samples):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ProfileError(f"{where}.samples_ms[{i}]: want a number >= 0, got {v!r}")
            values.append(v / 1000)
        return Distribution("empirical", tuple(values))
    raise ProfileError(f"{where}.distribution: want constant, uniform or empirical, "
                       f"got {kind!r}")


def parse_profile(data: Any, source: str = "profile") -> Profile:
    if not isinstance(data, dict):
        raise ProfileError(f"{source}: want a mapping at the top level")
    known = {"name", "provenance", "flow_mod", "packet_in", "table", "replies", "seed"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{source}: unknown field(s) {', '.join(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ProfileError(f"{source}.name: want a non-empty string")
    flow_mod = _section(data, "flow_mod", source)
    packet_in = _section(data, "packet_in", source)
    table = _section(data, "table", source)
    replies = _section(data, "replies", source)
    rate = _optional_number(packet_in, "max_rate", f"{source}.packet_in", minimum=0.001)
    burst = packet_in.get("burst", 1)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
        raise ProfileError(f"{source}.packet_in.burst: want an integer >= 1, got {burst!r}")
    capacity = table.get("capacity")
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int)
                                 or capacity < 1):
        raise ProfileError(f"{source}.table.capacity: want an integer >= 1 or null, "
                           f"got {capacity!r}")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ProfileError(f"{source}.seed: want an integer, got {seed!r}")
    provenance = data.get("provenance") or {}
    if not isinstance(provenance, dict):
        raise ProfileError(f"{source}.provenance: want a mapping")
    return Profile(
        name=name,
        flow_mod_delay=_distribution(flow_mod.get("delay"), f"{source}.flow_mod.delay"),
        packet_in_delay_s=_number(packet_in, "delay_ms", f"{source}.packet_in") / 1000,
        packet_in_rate=rate, packet_in_burst=burst, table_capacity=capacity,
        barrier_delay_s=_number(replies, "barrier_ms", f"{source}.replies") / 1000,
        stats_delay_s=_number(replies, "stats_ms", f"{source}.replies") / 1000,
        seed=seed, provenance=provenance)


def profiles_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "profiles"


def load_profile(name_or_path: str) -> Profile:
    """A profile by file path, or by name from switch-model/profiles."""
    path = Path(name_or_path)
    if not path.suffix:
        path = profiles_dir() / f"{name_or_path}.yaml"
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ProfileError(f"cannot read profile {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not YAML: {exc}") from None
    return parse_profile(data, str(path))
