"""End to end in the lab: link rate and delay as the guests perceive them
(issue 4's fidelity checks), measured with iperf3 and ping inside the guests
at a TDF where the emulated lab has headroom. The test runs a 20 Mbit/s link
at TDF 10 to stay short; `selena run scenarios/link_fidelity.py --tdf 30`
does the same at 100 Mbit/s."""

import json
import re
import statistics
from pathlib import Path

import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = "build/results/test-fidelity"
TDF = 10
RATE_MBIT = 20


def _outputs(bundle: Path, node: str) -> list[tuple[dict, str]]:
    base = bundle / "nodes" / node
    found = []
    for info in sorted(base.glob("*.json"), key=lambda p: int(p.stem)):
        found.append((json.loads(info.read_text()),
                      (base / f"{info.stem}.stdout").read_text(errors="replace")))
    return found


@pytest.mark.parametrize("shaping", ["dom0", "guest"])
def test_guests_see_the_link_rate_and_a_20_ms_round_trip(lab, shaping):
    """UDP payload within 5% of the link rate, TCP goodput within 5%
    of what TCP can carry over it (1448 of every 1514 bytes), and the median
    RTT within 5% of 2 x 10 ms, all measured inside the guests; with the links
    shaped on the Dom0 side of each vif (scaled by the TDF) and inside the
    guests on egress (unscaled)."""
    out = f"{OUT}-{shaping}"
    script = (f"rm -rf {out}; selena run scenarios/link_fidelity.py --tdf {TDF} "
              f"--param rate_mbit={RATE_MBIT} --shaping {shaping} --out {out}")
    result = lab.run(["sh", "-c", script], timeout=900)
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
    tcp_max = RATE_MBIT * 1448 / 1514
    assert abs(tcp_mbit / tcp_max - 1) <= 0.05, f"TCP {tcp_mbit:.1f} Mbit/s, max {tcp_max:.1f}"
    udp_mbit = udp["sum_received"]["bits_per_second"] / 1e6
    assert abs(udp_mbit / RATE_MBIT - 1) <= 0.05, \
        f"UDP {udp_mbit:.1f} Mbit/s, want {RATE_MBIT} +-5%"
