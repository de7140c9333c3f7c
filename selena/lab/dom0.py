"""Helpers for the lab's Dom0-side programs (check-clock, demo, bench).

They run inside Dom0 and drive xl and selena-tdf through the one Runner, like
every other part of selena.
"""

from __future__ import annotations

from pathlib import Path

from selena.backends.xl import HVM_XL_LINES
from selena.runner import CommandResult, Runner

TEMPLATE_DIR = Path("/usr/share/selena/templates/tiny-host")
CONSOLE_DIR = Path("/var/log/xen/console")
# The Flask hypervisor and policies `make -C xen-patches flask` builds on the
# host, read by Dom0 through the shared tree. Here, not in check_hv, which
# uses them: the lab's build imports it, and `python3 -m selena.lab.check_hv`
# would otherwise find its module imported twice.
FLASK_POLICIES = Path("xen-patches/build/flask")
GUEST_CMDLINE = "console=hvc0 clocksource=xen tsc=unstable quiet"
# An HVM guest's clocks read one of HVM_CLOCKSOURCES' counters. Without the
# vector callback Linux registers neither Xen's clocksource nor its timer
# device, so its timers fire on the LAPIC timer; event channels (console,
# watchdog) come through the Xen platform PCI device's interrupt. Such a
# guest does not resume from a save (Linux 6.1; with or without a TDF):
# one to be saved keeps the callback, its timers on Xen's timer device. So
# does one whose clocks read Xen's clocksource ("xen": the pvclock and its
# secondary time area, as PVHVM Linux reads them).
HVM_GUEST_CMDLINE = "console=hvc0 quiet"
HVM_LAPIC_TIMER = "xen_no_vector_callback"
HVM_CLOCKSOURCES = ("hpet", "acpi_pm", "tsc", "xen")
# The firmware, the device model's option ROM that loads the kernel and the
# shadow page tables need more than a PV guest's memory.
HVM_EXTRA_MEMORY_MB = 32

RUNNER = Runner()


def sh(*argv: str) -> str:
    """Run a command; its stdout. Raises CommandError (naming it) on failure."""
    return RUNNER.run(argv).stdout


def try_sh(*argv: str) -> CommandResult:
    """Run a command whose failure is expected and harmless (e.g. cleanup)."""
    return RUNNER.run(argv, check=False)


def status(domid: str) -> dict[str, str]:
    """`selena-tdf status`: tdf, frozen (yes/no), virtual_ns, real_ns."""
    out = sh("selena-tdf", "status", domid)
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def console_log(name: str) -> Path:
    return CONSOLE_DIR / f"guest-{name}.log"


def template_memory_mb() -> int:
    """The tiny-host template's own memory size (template.yaml)."""
    import yaml

    data = yaml.safe_load((TEMPLATE_DIR / "template.yaml").read_text())
    return int(data["memory_mb"])


def tiny_guest_config(name: str, extra: str, *, memory_mb: int | None = None,
                      vifs: tuple[str, ...] = (), vcpus: int = 1,
                      lines: tuple[str, ...] = (), virt: str = "pv",
                      clocksource: str = "hpet", lapic_timer: bool = True) -> str:
    """An xl config for a tiny-host guest with `extra` on its kernel command line
    (memory: the template's unless given), `vcpus` vCPUs and further xl `lines`;
    `virt` "pv", "pvh" or "hvm" (the same kernel boots as each; an HVM guest
    runs on Dom0's device model, its clocks on `clocksource`, its timers on
    the LAPIC timer unless not `lapic_timer`)."""
    if memory_mb is None:
        memory_mb = template_memory_mb() + (HVM_EXTRA_MEMORY_MB if virt == "hvm" else 0)
    cmdline = GUEST_CMDLINE
    hvm: list[str] = []
    if virt == "hvm":
        if clocksource not in HVM_CLOCKSOURCES:
            raise ValueError(f"clocksource {clocksource!r}: one of {', '.join(HVM_CLOCKSOURCES)}")
        # tsc=reliable: the clocksource watchdog must not swap the TSC for
        # another counter mid-run under the emulator's jitter.
        cmdline = f"{HVM_GUEST_CMDLINE} clocksource={clocksource}" + (
            f" {HVM_LAPIC_TIMER}" if lapic_timer else "") + (
            " tsc=reliable" if clocksource == "tsc" else "")
        hvm = [*HVM_XL_LINES, "hpet = 1", "acpi = 1"]
    config = [
        f'name = "{name}"', f'type = "{virt}"',
        f'kernel = "{TEMPLATE_DIR / "vmlinuz"}"', f'ramdisk = "{TEMPLATE_DIR / "initrd.gz"}"',
        f'extra = "{cmdline} {extra}"', f"memory = {memory_mb}", f"vcpus = {vcpus}",
        'on_poweroff = "destroy"', 'on_crash = "destroy"', *hvm,
    ]
    if vifs:
        config.append("vif = [ " + ", ".join(f"'{v}'" for v in vifs) + " ]")
    return "\n".join(config + list(lines)) + "\n"


def create_paused(name: str, config: str, tdf: float) -> str:
    """Create a guest paused, with a fresh console log, and set its TDF; its domid."""
    try_sh("xl", "destroy", name)
    console_log(name).unlink(missing_ok=True)
    cfg = Path("/tmp") / f"{name}.cfg"
    cfg.write_text(config)
    sh("xl", "create", "-p", "-q", str(cfg))
    domid = sh("xl", "domid", name).strip()
    sh("selena-tdf", "set", domid, f"{tdf:g}")
    return domid
