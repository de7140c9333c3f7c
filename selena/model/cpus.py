"""vCPU pinning masks ("4,5,6,7", "2-3") and what a host can honour."""

from __future__ import annotations

import math
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
# A node's cpu_share (Mininet's CPULimitedHost cpu=) caps it instead to that
# share of the host's CPUs per virtual second, at any TDF.
CPU_TIME_MODES = ("dilated", "real")


def credit_cap(vcpus: int, tdf: float, cpu_time: str, cpu_share: float | None = None,
               host_cpus: int | None = None) -> int:
    """The cap Xen's credit schedulers are given (whole percent; 0 = no cap).
    ValueError when Xen cannot express it (under 1%), or for a share on a
    host whose CPUs are not known."""
    if cpu_share is not None:
        if not host_cpus:
            raise ValueError(f"cpu_share={cpu_share:g} is a share of the host's CPUs, and "
                             "this host did not say how many it has (selena-tdf host)")
        return worth_cap(cpu_share * host_cpus, vcpus, tdf,
                         f"cpu_share={cpu_share:g} of {host_cpus} CPUs")
    if cpu_time != "real":
        return 0
    return worth_cap(vcpus, vcpus, tdf, f"cpu_time='real' with {vcpus} vCPU(s)")


def worth_cap(cpus: float, vcpus: int, tdf: float, what: str) -> int:
    """The cap that gives a domain of `vcpus` vCPUs `cpus` CPUs' worth of time
    per virtual second at `tdf` (100 x cpus / TDF percent of one CPU); 0
    when its vCPUs cannot use more anyway (credit2 refuses a cap above 100
    per vCPU). ValueError, naming `what`, under Xen's smallest, 1%."""
    exact = 100.0 * cpus / tdf
    if exact >= 100.0 * vcpus:
        return 0
    if exact < 1.0:
        raise ValueError(f"{what} at TDF {tdf:g} needs a cap of {exact:.2f}% of a CPU; "
                         f"Xen's smallest is 1% (TDF at most {max_capped_tdf(cpus)})")
    return round(exact)


def max_capped_tdf(cpus: float) -> int:
    """The largest TDF at which `cpus` CPUs' worth per virtual second is
    still a cap Xen can give (1%)."""
    return int(100 * cpus + 1e-9)


def is_share(value: float) -> bool:
    """A cpu_share's range: above 0, at most 1 (NaN is not)."""
    return 0 < value <= 1


def checked_share(share: object) -> float | None:
    """A cpu_share given at run time: None, or a number above 0 and at most 1
    (as validation wants it of add_host's); ValueError saying what to give."""
    if share is None or (isinstance(share, str) and share.lower() == "none"):
        return None
    try:
        if isinstance(share, bool):
            raise ValueError
        value = float(share)            # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = math.nan
    if not is_share(value):
        shown = share if isinstance(share, str) else repr(share)
        raise ValueError(f"cpu_share {shown} is not a share of the host's CPUs: give more "
                         "than 0 and at most 1 (0.25: a quarter of them), or none to lift it")
    return value
