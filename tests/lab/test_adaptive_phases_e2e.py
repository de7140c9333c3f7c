"""End to end in the lab: scenarios/adaptive_phases.py, the workload of
`selena reproduce adaptive`, with short phases (9 virtual s each: one flow,
four, one) under `--tdf auto:2-8`, and its bundle read the way `make
figures` reads docs/results/adaptive. Checks the workload and the pipeline,
not the goal: every phase has throughput windows and RTTs against the
configured values, four flows carry more than twice what one does, the
monitor's latency signal pings probe-srv (the pair no flow queues on), and
selena.analysis.adaptive gives the table and a verdict from the bundle,
with the scenario's real time (off the TDF timeline) inside the run's.

The flows are TCP here (`transport=tcp`), the reproduction's are
constant-rate UDP: at TDF 2 to 4 this lab carries four UDP flows at 8 to 12
Mbit/s of their 36 (the senders outrun the switch guest and most of their
datagrams are dropped), so with UDP "four flows carry more" would test
the lab's capacity at the controller's lowest TDFs, not the pipeline; TCP
flows back off to what the path carries.

Lab time: one deploy of seven guests (about a minute) and 30 virtual
seconds at TDF 2 to 8 (1 to 4 minutes): about 3 to 5 minutes on the shared
boot."""

import json
import shutil

import lab_results
import pytest

from selena.analysis.adaptive import judge, load, rows
from selena.paths import project_root

pytestmark = [pytest.mark.lab, pytest.mark.long]

OUT = lab_results.out("test-adaptive-phases")


def test_the_phases_workload_runs_adaptive_and_its_bundle_draws(lab, tmp_path):
    result = lab.run(["sh", "-c", f"rm -rf {OUT}; selena run scenarios/adaptive_phases.py "
                                  "--tdf auto:2-8 --param phase_s=9 --param transport=tcp "
                                  f"--out {OUT}; "
                                  "echo run-status=$?"], timeout=900)
    assert "run-status=0" in result.output, result.output
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    metrics = json.loads((bundle / "metrics.json").read_text())
    fidelity = json.loads((bundle / "fidelity.json").read_text())
    print("TDF timeline:", json.dumps(meta["tdf_timeline"], indent=1))
    print("verdict:", fidelity["verdict"], fidelity["reasons"], fidelity.get("latency"))
    assert meta["status"] == "ok" and meta["adaptive"]["policy"]["spec"] == "auto:2-8"
    assert metrics["phase_flows"]["samples"] == [1, 4, 1]
    assert metrics["phase_bounds_s"]["samples"] == pytest.approx([3, 12, 21, 30], abs=0.5)
    medians = {}
    for i in (1, 2, 3):
        mbit, rtt = metrics[f"phase{i}_mbit"], metrics[f"phase{i}_rtt_ms"]
        print(f"phase {i}:", mbit.get("median"), mbit["expected"], rtt.get("median"))
        # 1 s windows from 2 s in to 1 s before the end of 9 s: 6.
        assert mbit["n"] == 6 and mbit["expected"] > 0, mbit
        assert rtt["n"] >= 5 and rtt["expected"] == 200 and rtt["median"] >= 200, rtt
        medians[i] = mbit["median"]
    assert medians[2] > 2 * medians[1], medians
    assert fidelity["latency"]["path"] == "probe-srv", fidelity["latency"]
    # As docs/results/adaptive holds it: the run as the adaptive one, and as
    # the sweep's (its recommendation made up: one TDF of one run).
    root = tmp_path / "adaptive"
    shutil.copytree(bundle, root / "adaptive")
    shutil.copytree(bundle, root / "sweep" / "tdf2-r1")
    (root / "sweep" / "recommendation.json").write_text(json.dumps(
        {"tdfs": [2.0], "recommended": 2.0}))
    comparison = load(root)
    adaptive = comparison.by_role("adaptive")
    assert adaptive is not None and len(adaptive.phases) == 3
    assert 2 * 30 * 0.9 <= adaptive.scenario_real_s <= \
        meta["real_seconds"] - meta["timings"]["deploy_s"], (adaptive.scenario_real_s, meta)
    met, line = judge(comparison)
    print("\n".join(rows(comparison)))
    assert met is not None, line
