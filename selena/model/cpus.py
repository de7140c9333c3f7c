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


# A node's CPU time: "dilated" (SELENA's behaviour: a dilated guest's CPU
# seems TDF times faster) or "real" (capped to the speed it has at TDF 1).
CPU_TIME_MODES = ("dilated", "real")


def real_cpu_cap(vcpus: int, tdf: float) -> float:
    """The scheduler cap, in percent of one physical CPU for the whole domain,
    that gives each of its vCPUs 100/TDF % of a CPU: a virtual second then
    holds as much CPU time as a real second does at TDF 1."""
    return 100.0 * vcpus / tdf


def credit_cap(vcpus: int, tdf: float, cpu_time: str) -> int:
    """The cap Xen's credit schedulers are given (whole percent; 0 = no cap).
    ValueError when Xen cannot express it (under 1%)."""
    if cpu_time != "real" or tdf <= 1.0:
        return 0
    exact = real_cpu_cap(vcpus, tdf)
    if exact < 1.0:
        raise ValueError(f"cpu_time='real' with {vcpus} vCPU(s) at TDF {tdf:g} needs a cap "
                         f"of {exact:.2f}% of a CPU; Xen's smallest is 1% (TDF at most "
                         f"{100 * vcpus})")
    return round(exact)
