"""End to end in the lab: an experiment of PVH guests (issue 32 item 4).
scenarios/pvh_pair.py: two hosts with virt="pvh" (the tiny kernel in an
HVM container, its TSC emulated) on an 80 ms link at TDF 6, through
everything a PV node does: deployed paused with their TDF, the agent over
Xenstore, Dom0 shaping, a change of TDF and back, a pause and a resume,
a crash, and the results bundle. scenarios/debian_pvh.py: the debian
template (Debian's kernel and systemd) as a PVH guest beside a tiny PV
host, on a 40 ms link at TDF 5 and then 10."""

import json

import lab_results
import pytest
from guest_pair import assert_pair_run
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-pvh")
DEBIAN_OUT = lab_results.out("test-pvh-debian")


# make test-long: make test's budget; PVH guests' time is checked in make
# test by the hypervisor job (tests/lab/test_hv_e2e.py).
@pytest.mark.long
def test_two_pvh_hosts_keep_an_80ms_link_at_tdf6(lab):
    result = lab.run(f"rm -rf {OUT}; selena run scenarios/pvh_pair.py --out {OUT}; "
                     "echo run-rc=$?; echo guests-left=$(xl list | grep -c selena-pvhpair)",
                     timeout=900)
    assert_pair_run(result.output, OUT, "pvh")


# A Debian guest booted as PVH under shadow paging: make test-long, for the budget.
@pytest.mark.long
def test_debians_own_kernel_runs_as_a_dilated_pvh_guest(lab):
    result = lab.run(f"rm -rf {DEBIAN_OUT}; selena run scenarios/debian_pvh.py "
                     f"--out {DEBIAN_OUT}; echo run-rc=$?; "
                     "echo guests-left=$(xl list | grep -c selena-debpvh)", timeout=900)
    out = result.output
    assert "run-rc=0" in out and "guests-left=0" in out, out
    bundle = project_root() / DEBIAN_OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["status"] == "ok" and meta["virt"] == {"d1": "pvh", "h2": "pv"}, meta
    first = min((bundle / "nodes" / "d1").glob("*.json"), key=lambda p: int(p.stem))
    facts = first.with_suffix(".stdout").read_text().splitlines()
    # The kernel says PVH; Debian's 6.1 kernel; systemd up with no failed unit.
    assert facts[0] == "PVH" and facts[1].startswith("Linux 6.1."), facts
    assert facts[2] == "running", facts
    metrics = json.loads((bundle / "metrics.json").read_text())
    # From the recorded runs (to 2026-12-04): at TDF 5, 11 runs gave
    # 1.027-1.060 (one over the old 1.05), a median of only 8 pings; the
    # 1 % proposal is 1.073. At TDF 10 the wake-ups cost half as much guest
    # time: 10 runs, 1.012-1.027.
    for name, below in (("rtt_ms", 1.08), ("rtt_ms_tdf10", 1.05)):
        rtt = metrics[name]
        assert rtt["n"] == 8, rtt
        check(f"pvh.debian.{name}_median_over_expected", rtt["median"] / 80.0, above=0.95,
              below=below, samples=rtt.get("samples"), context=rtt)
