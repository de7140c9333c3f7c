"""The lab: patched Xen and a Debian Dom0 booted in QEMU, for trying and testing selena
without a Xen host. `run_in_lab([...])` runs a command in Dom0."""

from selena.lab.qemu import Lab, LabResult, run_in_lab

__all__ = ["Lab", "LabResult", "run_in_lab"]
