"""End to end in the lab: link rate and delay as the guests perceive them
(issue 4's fidelity checks), measured with iperf3 and ping inside the guests
at a TDF where the emulated lab has headroom."""

import json
import re
import statistics
from pathlib import Path

import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = "build/results/test-fidelity"
TDF = 30


def _outputs(bundle: Path, node: str) -> list[tuple[dict, str]]:
    base = bundle / "nodes" / node
    found = []
    for info in sorted(base.glob("*.json"), key=lambda p: int(p.stem)):
        found.append((json.loads(info.read_text()),
                      (base / f"{info.stem}.stdout").read_text(errors="replace")))
    return found


@pytest.mark.parametrize("shaping", ["dom0", "guest"])
def test_guests_see_100_mbit_and_a_20_ms_round_trip(lab, shaping):
    """UDP payload within 5% of the 100 Mbit/s link rate, TCP goodput within 5%
    of what TCP can carry over it (1448 of every 1514 bytes), and the median
    RTT within 5% of 2 x 10 ms, all measured inside the guests; with the links
    shaped on the Dom0 side of each vif (scaled by the TDF) and inside the
    guests on egress (unscaled)."""
    out = f"{OUT}-{shaping}"
    script = (f"rm -rf {out}; selena run scenarios/link_fidelity.py --tdf {TDF} "
              f"--shaping {shaping} --out {out}")
    result = lab.run(["sh", "-c", script], timeout=1800)
    assert result.returncode == 0, result.output
    if shaping == "guest":
        assert "shaped h1 inside the guest" in result.output, result.output
    h1 = _outputs(project_root() / out, "h1")
    ping = next(out for info, out in h1 if info["command"].startswith("ping -c 20"))
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping)]
    assert len(rtts) == 20
    median = statistics.median(rtts)
    assert 19.0 <= median <= 21.0, f"median RTT {median} ms, want 20 ms +-5%: {rtts}"
    tcp, udp = [json.loads(out)["end"] for info, out in h1
                if info["command"].startswith("iperf3")]
    # The link rate counts whole Ethernet frames (1514 bytes per full packet).
    tcp_mbit = tcp["sum_received"]["bits_per_second"] / 1e6
    tcp_max = 100 * 1448 / 1514
    assert abs(tcp_mbit / tcp_max - 1) <= 0.05, f"TCP {tcp_mbit:.1f} Mbit/s, max {tcp_max:.1f}"
    udp_mbit = udp["sum_received"]["bits_per_second"] / 1e6
    assert abs(udp_mbit / 100 - 1) <= 0.05, f"UDP {udp_mbit:.1f} Mbit/s, want 100 +-5%"
