"""End to end in the lab: a guest with cpu_time="real" does about as much CPU
work per virtual second at TDF 10 as at TDF 1; a dilated guest does about TDF
times more; a guest with cpu_share=0.25 (Mininet's cpu=) of the lab host's two
CPUs does half the dilated guest's work at TDF 1 and about as much at TDF 10,
and the dilated guest's once its share is lifted during the run
(scenarios/cpu_time.py).

The bound on the capped guest is loose on purpose: in the lab (Xen under
QEMU's software emulation) credit2's 10% cap delivered 53-74% of the work
its share should give in five runs (CPU ratio 0.65-0.74 in four, 0.53 in a
verification CI, not 1): Xen refills a capped vCPU's budget every 10 ms,
and emulated timers make that coarse. What must hold is that the cap brings
the guest from TDF times the work down to the order of TDF 1's."""

import json

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-cpu-time")


# make test-long: make test's budget (cpu_time's plan and caps are unit
# tested; `make reproduce-mflops` measures the same in the lab).
@pytest.mark.long
def test_real_cpu_time_and_a_cpu_share_keep_the_work_per_virtual_second_of_tdf_1(lab):
    result = lab.run(f"rm -rf {OUT}; selena run scenarios/cpu_time.py --param iterations=15000 "
                     f"--out {OUT}",
                     timeout=900)
    assert result.returncode == 0, result.output
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["cpu_time"]["hreal"] == {"mode": "real", "vcpus": 1, "cap_percent_at_start": 10}
    assert meta["cpu_time"]["hdil"]["mode"] == "dilated"
    assert meta["cpu_time"]["hshare"] == {"mode": "dilated", "vcpus": 1, "cpu_share": 0.25,
                                          "cap_percent_at_start": 5}      # 50 / TDF 10
    metrics = json.loads((bundle / "metrics.json").read_text())
    real, dilated = metrics["real_cpu_ratio"], metrics["dilated_cpu_ratio"]
    # Low side from the data (20 runs to 2026-12-04: 0.41-0.82, the 1 %
    # proposal >= 0.2509; the bound was 0.4); dilated_over_real below keeps
    # the cap's meaning, TDF times the work brought down to TDF 1's order.
    check("cpu_time.real_cpu_ratio.median", real["median"], low=0.25, high=1.1,
          context=metrics)
    # Above: twice the TDF would be the factor applied twice. The work at
    # TDF 1, the ratio's denominator, scatters under emulation (18.8k to
    # 29.2k per second in one CI run), so the ratio does too: 9.1 to 14.8
    # in ten runs.
    check("cpu_time.dilated_cpu_ratio.median", dilated["median"], low=6.0, high=20.0,
          context=metrics)
    check("cpu_time.dilated_over_real", dilated["median"] / real["median"], low=6.0,
          context=metrics)
    # The share at TDF 1: a 50% cap, Xen's credit2 refilling it every 10 ms
    # of real time, which the emulation makes coarse as for cpu_time='real'.
    share, over = metrics["share_cpu_ratio"], metrics["share_over_dilated_tdf1"]
    assert over["expected"] == 0.5, metrics
    check("cpu_time.share_over_dilated_tdf1", over["median"], low=0.3, high=0.65,
          context=metrics)
    # At TDF 10 the cap is 5%: the same coarseness as the real guest's 10%.
    check("cpu_time.share_cpu_ratio.median", share["median"], low=0.25, high=1.1,
          context=metrics)
    # Lifted during the run: the dilated guest's work again, and the event
    # recorded with its virtual time.
    check("cpu_time.lifted_over_dilated_tdf1", metrics["lifted_over_dilated_tdf1"]["median"],
          low=0.8, high=1.25, context=metrics)
    assert [(e["target"], e["change"], e["tdf"]) for e in meta["events"]] == [
        ("node hshare", "cpu_share=none", 1.0)], meta["events"]
