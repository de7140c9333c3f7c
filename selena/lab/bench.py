"""`selena lab bench`: figures for the lab (printed, never asserted).

- lab cold build time: what the last cold build of each artefact took;
- boot-to-Dom0: QEMU start until Dom0 runs a command;
- a tiny guest and a debian guest (Debian's kernel and systemd): unpause
  until its agent is ready (through the experiment lifecycle), in real time
  and in the guest's virtual time, at TDF 1 and 10, and the guest's memory
  (configured, and used and available as the guest sees it).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from selena import units
from selena.experiment import Experiment
from selena.lab.build import LabBuilder, build_times_file
from selena.lab.qemu import Lab
from selena.model import Topology


def run_bench(progress: Callable[[str], None]) -> int:
    t = time.monotonic()
    builder = LabBuilder(progress=progress)
    # The in-Dom0 part boots a debian guest too.
    art = builder.build(with_debian=True)
    check_seconds = time.monotonic() - t
    lab = Lab(artefacts=art, progress=progress)
    result = lab.run(["python3", "-m", "selena.lab.bench", "--in-dom0"], timeout=900)
    times = json.loads(build_times_file().read_text()) if build_times_file().exists() else {}
    xen_seconds = _xen_build_seconds()
    print("selena lab bench")
    print(f"  lab cold build: patched Xen {xen_seconds or '?'} s, "
          f"Dom0 base image {times.get('dom0_base', '?')} s, "
          f"guest kernel {times.get('guest_kernel', '?')} s "
          "(as last measured when built)")
    print(f"  lab rebuild with nothing changed: {check_seconds:.1f} s")
    print(f"  boot to Dom0 command: {result.boot_seconds:.1f} s (QEMU {_accel()})")
    print(result.output, end="")
    return result.returncode


def _xen_build_seconds() -> str | None:
    found = Path(__file__).resolve().parents[2] / "xen-patches" / "out" / "build-seconds"
    return found.read_text().strip() if found.exists() else None


def _accel() -> str:
    from selena.lab.qemu import kvm_usable

    return "KVM" if kvm_usable() else "TCG software emulation"


def guest_bench(tdf: float, template: str = "tiny-host") -> tuple[float, int, int, int]:
    """Deploy one guest of `template` through the experiment lifecycle;
    (unpause to agent ready in real seconds, configured MB, used MB and
    available MB after boot)."""
    name = f"bench{template[:3]}{units.tdf_text(tdf).replace('.', '-')}"
    topo = Topology(name, tdf=tdf)
    topo.add_host("h1", template=template)
    with Experiment(topo) as exp:
        meminfo = exp.cmd("h1", "cat /proc/meminfo", check=True).stdout.decode()
        configured = topo.nodes["h1"].memory_mb
    total = meminfo_kb(meminfo, "MemTotal")
    available = meminfo_kb(meminfo, "MemAvailable")
    return exp.timings["boot_to_agents_s"], configured, (total - available) // 1024, \
        available // 1024


def meminfo_kb(text: str, key: str) -> int:
    m = re.search(rf"{key}:\s+(\d+) kB", text)
    return int(m.group(1)) if m else 0


def main_in_dom0() -> int:
    for template, label in (("tiny-host", "tiny guest"), ("debian", "debian guest")):
        for tdf in (1.0, 10.0):
            boot, configured, used, available = guest_bench(tdf, template)
            print(f"  {label} at TDF {tdf:g}: unpause to agent ready {boot:.1f} s real "
                  f"(about {boot / tdf:.2f} s virtual); memory {configured} MB configured, "
                  f"{used} MB used and {available} MB available after boot")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--in-dom0"]:
        sys.exit(main_in_dom0())
    sys.exit(2)
