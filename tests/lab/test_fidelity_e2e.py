"""End to end in the lab: link rate and delay as the guests perceive them
(issue 4's fidelity checks), measured with iperf3 and ping inside the guests
at a TDF where the emulated lab has headroom."""

import json
import re
import statistics
from pathlib import Path

import pytest

from selena.lab import Lab
from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = "build/results/test-fidelity"
TDF = 20


def _outputs(bundle: Path, node: str) -> list[tuple[dict, str]]:
    base = bundle / "nodes" / node
    found = []
    for info in sorted(base.glob("*.json"), key=lambda p: int(p.stem)):
        found.append((json.loads(info.read_text()),
                      (base / f"{info.stem}.stdout").read_text(errors="replace")))
    return found


def test_guests_see_100_mbit_and_a_20_ms_round_trip():
    script = (f"rm -rf {OUT}; selena run scenarios/link_fidelity.py --tdf {TDF} --out {OUT}")
    result = Lab().run(["sh", "-c", script], timeout=1800)
    assert result.returncode == 0, result.output
    h1 = _outputs(project_root() / OUT, "h1")
    ping = next(out for info, out in h1 if info["command"].startswith("ping -c 20"))
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping)]
    assert len(rtts) == 20
    median = statistics.median(rtts)
    assert 19.0 <= median <= 21.0, f"median RTT {median} ms, want 20 ms +-5%: {rtts}"
    iperf = next(out for info, out in h1 if info["command"].startswith("iperf3"))
    mbit = json.loads(iperf)["end"]["sum_received"]["bits_per_second"] / 1e6
    assert 95.0 <= mbit <= 105.0, f"{mbit:.1f} Mbit/s, want 100 +-5%"
