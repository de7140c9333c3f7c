"""The lab: patched Xen and a Debian Dom0 booted in QEMU, for trying and testing selena
without a Xen host. `run_in_lab([...])` runs a command in Dom0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selena.lab.qemu import Lab, LabResult, run_in_lab

__all__ = ["Lab", "LabResult", "run_in_lab"]


def __getattr__(name: str) -> Any:
    # Imported on first use, not with the package: `python3 -m
    # selena.lab.control_from` must run before anything imports
    # selena.control (selena.lab.qemu does, through the backends).
    if name in __all__:
        from selena.lab import qemu
        return getattr(qemu, name)
    raise AttributeError(f"module 'selena.lab' has no attribute {name!r}")
