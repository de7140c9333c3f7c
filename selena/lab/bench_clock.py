"""Cost of reading time in a lab guest, dilated or not, with the native or the
emulated TSC: ns per clock_gettime(CLOCK_MONOTONIC) (the vDSO, or its syscall
fallback when Xen gives no stable-TSC pvclock) and per RDTSC.

Run in Dom0: python3 -m selena.lab.bench_clock
From the host: selena lab bench-clock
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from selena.lab.dom0 import console_log, create_paused, sh, tiny_guest_config, try_sh

GUEST = "selena-benchclock"
CONFIGS = ((1.0, "native"), (1.0, "always_emulate"), (10.0, "native"),
           (10.0, "always_emulate"))


def measure(tdf: float, tsc_mode: str, iterations: int, timeout: float) -> tuple[float, float]:
    """Guest ns per clock_gettime and per RDTSC, in the guest's own time."""
    cfg = tiny_guest_config(GUEST, f"selena.init=/usr/bin/clockcheck "
                                   f"selena.args=bench,{iterations}",
                            lines=(f'tsc_mode = "{tsc_mode}"',))
    create_paused(GUEST, cfg, tdf)
    log = console_log(GUEST)
    try:
        sh("xl", "unpause", GUEST)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            m = re.search(r"\bB ([\d.]+) ([\d.]+)", text)
            if m:
                return float(m.group(1)), float(m.group(2))
            time.sleep(0.2)
    finally:
        try_sh("xl", "destroy", GUEST)
    raise RuntimeError(f"no result from the guest at TDF {tdf:g}, tsc_mode {tsc_mode}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    print(f"{'TDF':>4} {'tsc_mode':<15} {'clock_gettime ns':>17} {'(real)':>9} "
          f"{'rdtsc ns':>9} {'(real)':>9}")
    for tdf, mode in CONFIGS:
        gettime, rdtsc = measure(tdf, mode, args.iterations, args.timeout)
        print(f"{tdf:>4g} {mode:<15} {gettime:>17.1f} {gettime * tdf:>9.1f} "
              f"{rdtsc:>9.1f} {rdtsc * tdf:>9.1f}")
    print("guest ns are the guest's own (dilated) time; real = guest ns x TDF")
    return 0


if __name__ == "__main__":
    sys.exit(main())
