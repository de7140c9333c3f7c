"""End to end in the lab: `selena run --tdf auto:1-16` on a scenario with a
quiet phase (pings a second apart, 12 virtual s, over a link of 50 ms each
way) and then a busy one (an unlimited iperf3 UDP flow over a 100 Mbit/s
link for 5 virtual s, which keeps the sender's vCPU busy at any TDF), then 1
quiet virtual second. The latency probe may raise the TDF in the quiet
phase (the lab's round-trip floor against the 100 ms configured; long
delays so that it stops well below MAX); the controller must then raise it
at least once more during the busy phase, through set_tdf, with its
reasons in meta.json's TDF timeline and decisions; and the run must tear
everything down. About 2 to 3 minutes of lab time with the shared boot."""

import json

import lab_results
import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-adaptive")

SCENARIO = '''
from selena.model import Topology


def build():
    topology = Topology("adaptive", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, rate="100Mbit", delay="50ms")
    return topology


def run(exp):
    exp.cmd("h1", "ping -c 12 -i 1 -W 5 10.0.0.2", check=True, timeout=120)
    server = exp.start("h2", ["iperf3", "-s", "-1"])
    exp.sleep(1)
    exp.record("busy_start_s", exp.now(), unit="s")
    exp.cmd("h1", ["iperf3", "-c", "10.0.0.2", "-u", "-b", "0", "-t", "5", "-J"],
            check=True, timeout=120)
    exp.record("busy_end_s", exp.now(), unit="s")
    exp.wait(server)
    exp.sleep(1)
'''


def test_the_tdf_rises_during_a_busy_phase_with_its_reasons(lab):
    result = lab_results.run_scenario_text(lab, OUT, SCENARIO, "--tdf auto:1-16",
                                           timeout=600)
    out = result.output
    assert "run-status=0" in out, out
    assert "0\nleftovers-counted" in out, out       # no selena domain left behind
    assert "adaptive TDF auto:1-16: every 2 real s" in out, out
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["status"] == "ok"
    timeline = meta["tdf_timeline"]
    print("TDF timeline:", json.dumps(timeline, indent=1))
    print("decisions:", json.dumps(meta["adaptive"]["decisions"], indent=1))
    assert timeline[0]["tdf"] == 1 and timeline[0]["reason"].startswith("start of auto:1-16")
    metrics = json.loads((bundle / "metrics.json").read_text())
    busy_start = metrics["busy_start_s"]["median"]
    busy_end = metrics["busy_end_s"]["median"]
    raises = [seg for seg in timeline[1:] if seg.get("reason", "").startswith("raise: ")
              and busy_start <= seg["virtual_s"] <= busy_end]
    assert raises, timeline
    assert all(1 <= seg["tdf"] <= 16 for seg in timeline), timeline
    # Each change is in the decisions with the signal values behind it, and printed.
    decisions = meta["adaptive"]["decisions"]
    assert len(decisions) == len(timeline) - 1
    assert all(d["signals"]["intervals"] >= 1 for d in decisions), decisions
    assert "adaptive TDF 1 -> 2 (raise: " in out, out
    assert "TDF timeline (" in out, out
    fidelity = json.loads((bundle / "fidelity.json").read_text())
    assert len(fidelity["segments"]) == len(timeline), fidelity.get("segments")
