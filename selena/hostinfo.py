"""What a backend reports about the host it runs guests on."""

from __future__ import annotations

from dataclasses import dataclass

# Xen's domids for guests: 1 up to DOMID_FIRST_RESERVED (0x7FF0) - 1; 0 is
# Dom0. No host runs more guests than that at once, whatever its memory.
GUEST_DOMIDS_MAX = 0x7FEF


@dataclass(frozen=True)
class HostInfo:
    """Facts validation and results bundles need; None where unknown (e.g.
    `selena validate` on a machine without Xen)."""

    backend: str
    cpus: int | None = None             # physical CPUs guests can be pinned to
    free_memory_mb: int | None = None   # memory the host can still give guests
    hypervisor: str | None = None       # e.g. "Xen 4.17.5-pre"
    dom0_kernel: str | None = None
