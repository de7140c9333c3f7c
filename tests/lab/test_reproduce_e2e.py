"""End to end in the lab, issue 34 items 1 and 3: a link sized by the
scaling rule (QJump's: 10 Gbit/s / 100, the paper's 0.12 ms queue, 2
packets with the delay line) carries traffic, and `selena reproduce`'s
collect() turns the real bundle into docs/results' trimmed layout (about a
minute of lab time on the shared boot)."""

import csv
import json
import shutil

import lab_results
import pytest

from selena.paths import project_root
from selena.reproduce import collect

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-reproduce")

SCENARIO = """\
from selena.metrics import ping_rtts_ms
from selena.model import Topology
from selena.scaling import paper_queue_s, scaled_link

LINK = scaled_link("10Gbit", 100, queue_s=paper_queue_s(100, "10Gbit"), delay="0.02ms")
topology = Topology("scaledq", tdf=10)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(h1, h2, **LINK)


def run(exp):
    print("link:", LINK)
    ping = exp.cmd("h1", "ping -c 10 -i 0.2 -W 2 10.0.0.2", check=True)
    exp.record("rtt_ms", ping_rtts_ms(ping.stdout), unit="ms")
"""


# make test-long, with the reproductions it stands for (make test's budget).
@pytest.mark.long
def test_a_scaled_link_carries_pings_and_its_bundle_collects(lab, tmp_path):
    result = lab_results.run_scenario_text(lab, OUT, SCENARIO, "--no-monitor")
    assert "run-status=0" in result.output, result.output
    assert "0\nleftovers-counted" in result.output, result.output
    assert "link: {'rate': '100Mbit', 'queue': 2, 'delay': '0.02ms'}" in result.output
    bundle = project_root() / OUT
    metrics = json.loads((bundle / "metrics.json").read_text())
    # A queue of two packets still carries one ping at a time, none lost.
    assert metrics["rtt_ms"]["n"] == 10, metrics
    # As `selena reproduce` finds it: the run's bundle in a fresh directory.
    fresh = tmp_path / "fresh"
    shutil.copytree(bundle, fresh / "scaledq")
    target = collect(fresh, tmp_path / "results" / "scaledq", {"command": "test"})
    run = target / "scaledq"
    assert sorted(p.name for p in run.iterdir()) == ["meta.json", "metrics.json",
                                                     "summary.csv"]
    assert json.loads((run / "meta.json").read_text())["status"] == "ok"
    rows = list(csv.DictReader((run / "summary.csv").open()))
    assert [(r["metric"], r["unit"], r["n"]) for r in rows] == [("rtt_ms", "ms", "10")]
    assert json.loads((target / "provenance.json").read_text()) == {"command": "test"}
