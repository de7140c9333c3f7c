"""End to end in the lab: `selena calibrate` measures the lab's floor (real
Xen, a shaped link, a TDF change half way) and `selena advise` reads it for
the demo scenario.

What this checks is the pipeline, not the prediction's accuracy: in the lab
the extra round trip varies between boots and with the idle time between
packets (README, "Predicting the TDF"), so a demo run at the advised TDF
landed outside the 5% asked (+7.8% at TDF 2, before the headroom)."""

import json
import re
import statistics

import pytest

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = "build/results/test-advise"

SCRIPT = f"""
set -e
rm -rf {OUT}; mkdir -p {OUT}
selena calibrate --out {OUT}/calibration.json --bundle {OUT}/calibrate
status=0
selena advise scenarios/dilation_demo.py --calibration {OUT}/calibration.json \
    > {OUT}/advice.txt || status=$?
echo "advise-status=$status"
"""


def test_calibrate_measures_the_floor_and_advise_reads_it(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=900)
    assert result.returncode == 0, result.output
    out = project_root() / OUT
    cal = json.loads((out / "calibration.json").read_text())
    assert len(cal["rtt_tdf1_ms"]) >= 25 and len(cal["rtt_high_ms"]) >= 25, cal
    assert len(cal["tcp_mbit"]) >= 4, cal
    # The two parts add up to what TDF 1 measured over the 2 x 10 ms link.
    extra1 = statistics.median(cal["rtt_tdf1_ms"]) - 20.0
    assert cal["real_ms"] + cal["virtual_ms"] == pytest.approx(max(extra1, 0), abs=1e-6)
    # The lab is slower than real time: a round trip gains real time at TDF 1.
    assert cal["real_ms"] > 1.0, cal
    # The calibration run's own bundle: deployed at TDF 1, changed to TDF 5.
    meta = json.loads((out / "calibrate" / "meta.json").read_text())
    assert [s["tdf"] for s in meta["tdf_timeline"]] == [1, 5] and meta["status"] == "ok"
    advice = (out / "advice.txt").read_text()
    assert "smallest round trip h1 <-> h2: 80 ms over 1 link(s)" in advice, advice
    status = int(re.search(r"advise-status=(\d+)", result.output).group(1))
    if status == 0:
        tdf = float(re.search(r"^advice: TDF ([\d.]+)", advice, re.M).group(1))
        assert tdf > 1, advice       # TDF 1 adds the whole floor: never faithful here
    else:
        assert status == 1 and "advice: no TDF" in advice, (status, advice)
