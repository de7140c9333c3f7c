"""End to end in the lab: a node restarted mid-run (scenarios/node_restart.py):
h2's domain destroyed and created again at the run's TDF of the moment (12,
changed from the topology's 10 just before), its link shaped again, its
agent ready, the command left running on it ended `lost`; pings on both
sides of the restart within 5 % of the configured round trip, h2's clock
running at the run's virtual rate, and nothing of the run left after it.
About 90 s of lab time in a running lab (2 min 39 s with its boot): three
guest boots and 6 virtual s of pings at TDF 10-12."""

import json

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-node-restart")


# make test-long: make test's budget (its cold run is within 6 minutes of
# the hour); the pieces a restart reuses (create, TDF, shaping, agent) are
# the deploy's, which every lab test of make test exercises.
@pytest.mark.long
def test_a_restarted_node_comes_back_at_the_runs_tdf_with_its_link_shaped(lab):
    result = lab.run(f"rm -rf {OUT}; selena run scenarios/node_restart.py --out {OUT}; "
                     "echo run-rc=$?; echo guests-left=$(xl list | grep -c selena-noderestart-); "
                     "echo states-left=$(ls /run/selena/noderestart.* 2>/dev/null | wc -l); "
                     "echo bridges-left=$(ovs-vsctl find bridge "
                     "external_ids:selena-experiment=noderestart | grep -c '^name')",
                     timeout=900)
    out = result.output
    assert "run-rc=0" in out, out
    assert "guests-left=0" in out and "states-left=0" in out and "bridges-left=0" in out, out
    assert "noderestart: h2 restarted as domain" in out and "at TDF 12" in out, out
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["status"] == "ok", meta.get("error")
    [event] = meta["events"]
    assert (event["target"], event["change"], event["tdf"]) == ("node h2", "restart", 12.0)
    lost = [c for c in meta["commands"] if c["state"] == "lost"]
    assert [(c["node"], c["n"], c["command"]) for c in lost] == [("h2", 1, "sleep 600")], lost
    record = json.loads((bundle / "nodes/h2/1.json").read_text())
    assert (record["reason"], record["detail"]) == ("lost", "node h2 restarted"), record
    metrics = json.loads((bundle / "metrics.json").read_text())
    assert metrics["running_command_lost"]["median"] == 1.0
    # A fresh boot: its uptime is the boot's, a few virtual seconds at TDF 12,
    # not the minutes the old guest had run.
    check("node_restart.h2_uptime_after_s", metrics["h2_uptime_after_s"]["median"], above=0.0,
          below=30.0, unit=" s", context=metrics["h2_uptime_after_s"])
    # Its new domain dilated as the others: 1.2 if it had kept the topology's
    # TDF 10, 12 without one.
    check("node_restart.h2_clock_rate", metrics["h2_clock_rate"]["median"], low=0.97,
          high=1.03, context=metrics["h2_clock_rate"])
    for name in ("rtt_ms_before", "rtt_ms_after"):
        m = metrics[name]
        check(f"node_restart.{name}.n", m["n"], low=12, context=m)
        check(f"node_restart.{name}.error_pct", m["error_pct"], low=-5.0, high=5.0, unit="%",
              samples=m.get("samples"), context=m)
