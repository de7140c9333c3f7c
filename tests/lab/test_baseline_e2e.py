"""End to end in the lab: the Mininet baseline (Debian's mininet in Dom0)
runs the same link scenario as selena, in real time, through the same
lifecycle and results bundle: a ping over a 50 ms link and iperf3 over a
20 Mbit/s link (scenarios/link_fidelity.py)."""

import json
import re
import statistics

import lab_results
import pytest
from bundles import node_outputs
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-baseline")
RATE_MBIT = 20
DELAY_MS = 50


def test_mininet_runs_the_link_scenario_in_real_time(lab):
    result = lab.run(f"rm -rf {OUT}; selena run scenarios/link_fidelity.py --backend mininet "
                     f"--param rate_mbit={RATE_MBIT} --param delay_ms={DELAY_MS} --out {OUT}",
                     timeout=600)
    assert result.returncode == 0, result.output
    assert "mininet backend runs in real time: TDF 1, not 30" in result.output
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert (meta["backend"], meta["tdf"], meta["status"]) == ("mininet", 1, "ok")
    h1 = node_outputs(bundle, "h1")
    ping = next(out for info, out in h1 if info["command"].startswith("ping -c 20"))
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", ping)]
    assert len(rtts) == 20
    # TCLink puts the delay on each end's egress: a round trip adds it twice,
    # never less (real time can only add to it).
    check("baseline.mininet.rtt_median_ms", statistics.median(rtts), low=2 * DELAY_MS * 0.99,
          high=2 * DELAY_MS * 1.5, unit=" ms", samples=rtts)
    tcp, udp = [json.loads(out)["end"] for info, out in h1
                if info["command"].startswith("iperf3")]
    # htb caps the rate (Mbit/s, not bit/s or MB/s); under emulation it may fall short.
    for name, got in (("tcp", tcp), ("udp", udp)):
        mbit = got["sum_received"]["bits_per_second"] / 1e6
        check(f"baseline.mininet.{name}_mbit", mbit, low=0.3 * RATE_MBIT,
              high=1.03 * RATE_MBIT, unit=" Mbit/s")
    fidelity = json.loads((bundle / "fidelity.json").read_text())
    assert fidelity["intervals"] >= 5 and fidelity["dom0_busy"], fidelity


def test_mininet_runs_a_switched_topology(lab):
    """Hosts through an Open vSwitch bridge: the switch's ports need MACs of
    their own (Mininet's veth pair refused a host MAC beside none)."""
    out = lab_results.out("test-baseline-switch")
    result = lab.run(f"rm -rf {out}; selena run --topo single,3 --test pingall "
                     f"--backend mininet --out {out}", timeout=300)
    assert result.returncode == 0, result.output
    meta = json.loads((project_root() / out / "meta.json").read_text())
    assert (meta["backend"], meta["status"]) == ("mininet", "ok")
    # pingall: each host pings the two others in one command.
    pings = [c for c in meta["commands"] if c["command"].startswith("for ip in")]
    assert len(pings) == 3 and all(c["exit_code"] == 0 for c in pings), pings
    for c in pings:
        answered = (project_root() / out / "nodes" / c["node"] / f"{c['n']}.stdout").read_text()
        assert [line.split()[1] for line in answered.splitlines()] == ["1", "1"], answered
