"""vCPU pinning masks ("4,5,6,7", "2-3") and what a host can honour."""

from __future__ import annotations

import re

MASK_RE = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


def parse_mask(mask: str) -> list[int]:
    """The CPUs a mask names, in order, without repeats; ValueError if malformed."""
    if not MASK_RE.fullmatch(mask):
        raise ValueError(f"cpu mask {mask!r} is not like '4,5,6,7' or '2-3'")
    cpus: list[int] = []
    for part in mask.split(","):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"cpu mask {mask!r}: range {part} runs backwards")
        cpus += [c for c in range(first, last + 1) if c not in cpus]
    return cpus


def fold_mask(mask: str, host_cpus: int) -> str | None:
    """The rule for a mask naming CPUs the host does not have (SELENA's
    Listing 1 pins to CPUs 4-7, more than a small host has): CPU n becomes
    n mod host_cpus. Returns the folded mask, or None when the host can honour
    the mask as it is."""
    cpus = parse_mask(mask)
    if all(c < host_cpus for c in cpus):
        return None
    folded = sorted({c % host_cpus for c in cpus})
    return ",".join(str(c) for c in folded)
