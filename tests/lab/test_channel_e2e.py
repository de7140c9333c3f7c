"""End to end in the lab, issue 35 item 2: a SELENA listing run by `selena
run` on the xl backend through the CommandChannel interface. Its pushCmd
commands are recorded with their origin, and `selena run` prints their
output by it (not the scenario's own command of the same text); a TDF change
from the scenario reaches the Xenstore channel once; nothing is left."""

import json

import lab_results
import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-channel")

LISTING = """\
newNode(0, "H1", NodeType.LINUX_HOST, [(1000, "RANDOM", "10.0.1.2", "255.255.255.0", "")])
newNode(1, "H2", NodeType.LINUX_HOST, [(1000, "RANDOM", "10.0.1.3", "255.255.255.0", "")])
newLink((0, 0), (1, 0), 100, 1)
setArp(0, "eth1", "10.0.1.3", "fe:ff:ff:00:01:03")
pushCmd(1, ["sleep 600 &"])
pushCmd(0, ["echo from-listing", "ping -c 1 10.0.1.3"])


def run(exp):
    exp.cmd("H2", "echo from-listing")          # the same text, from the scenario
    exp.set_tdf(4)
    records = sorted(exp.engine.records, key=lambda r: r.seq)
    print("origins:", " ".join(f"{r.result.guest}:{r.origin}" for r in records))
    print("tdf-now:", exp.tdf, exp.controller.tdf, type(exp.controller).__name__)
"""


def test_a_listing_runs_through_the_command_channel_with_its_origins(lab):
    result = lab_results.run_scenario_text(lab, OUT, LISTING, "--tdf 2 --no-monitor")
    assert "run-status=0" in result.output, result.output
    assert "0\nleftovers-counted" in result.output, result.output
    assert ("origins: H1:pushCmd H1:pushCmd H2:pushCmd H2:scenario"
            in result.output), result.output
    assert "tdf-now: 4.0 4.0 Controller" in result.output, result.output
    # What pushCmd printed is shown; the scenario's own `echo` is not.
    assert "H1$ echo from-listing\n  from-listing" in result.output, result.output
    assert "H2$ echo from-listing" not in result.output, result.output
    meta = json.loads((project_root() / OUT / "meta.json").read_text())
    assert meta["status"] == "ok"
    assert [seg["tdf"] for seg in meta["tdf_timeline"]] == [2, 4]
    assert [(c["node"], c["command"], c["state"]) for c in meta["commands"]] == [
        ("H1", "echo from-listing", "exited"), ("H1", "ping -c 1 10.0.1.3", "exited"),
        ("H2", "sleep 600 ", "killed"), ("H2", "echo from-listing", "exited")]
