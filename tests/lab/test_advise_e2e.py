"""End to end in the lab: `selena calibrate` measures the lab's floor (real
Xen, a shaped link, pings after several idle gaps, a TDF change half way),
`selena advise` reads it for the demo's topology with the demo's ping
interval, and a sweep at TDF 1 and at the advised TDF is compared with the
model's prediction at each: at the advised TDF the round trip must be
within the accuracy asked (the advice aims at half of it, for headroom) and
within the headroom of the prediction; TDF 1 must be outside it (the
advice was needed) and within half of its own prediction."""

import csv
import json
import re
import statistics

import lab_results
import pytest
from lab_stats import check

from selena.advise import Calibration
from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-advise")
ACCURACY = 5.0

# The demo's link and its pings (0.2 s apart), without its iperf part.
PING_CHECK = """
from selena.metrics import ping_rtts_ms
from selena.model import Topology


def build():
    topology = Topology("advcheck", tdf=1)
    h1 = topology.add_host("h1", ip="10.0.0.1/24", template="tools-host")
    h2 = topology.add_host("h2", ip="10.0.0.2/24", template="tools-host")
    topology.add_link(h1, h2, rate="20Mbit", delay="40ms")
    return topology


def run(exp):
    exp.cmd("h1", "ping -c 2 -W 5 10.0.0.2")
    ping = exp.cmd("h1", "ping -c 20 -i 0.2 -W 5 10.0.0.2", check=True)
    exp.record("rtt_ms", ping_rtts_ms(ping.stdout), expected=80.0, unit="ms")
"""

SCRIPT = f"""
set -e
rm -rf {OUT}; mkdir -p {OUT}
cat > {OUT}/ping_check.py <<'PY'
{PING_CHECK}
PY
selena calibrate --out {OUT}/calibration.json --bundle {OUT}/calibrate
status=0
selena advise scenarios/dilation_demo.py --calibration {OUT}/calibration.json \\
    --interval 0.2 --accuracy {ACCURACY:g} > {OUT}/advice.txt || status=$?
echo "advise-status=$status"
cat {OUT}/advice.txt
tdf=$(sed -n 's/^advice: TDF \\([0-9.]*\\).*/\\1/p' {OUT}/advice.txt)
if [ -n "$tdf" ]; then
    selena sweep {OUT}/ping_check.py --tdf "1,$tdf" --out {OUT}/sweep
fi
"""


def test_calibrate_advise_and_a_run_at_the_advised_tdf_agree(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=1500)
    assert result.returncode == 0, result.output
    out = project_root() / OUT
    cal = json.loads((out / "calibration.json").read_text())
    assert sorted(cal["rtt_by_gap_ms"]) == ["0.05", "0.2", "1"], cal
    assert all(len(v) >= 12 for v in cal["rtt_by_gap_ms"].values()), cal
    assert len(cal["rtt_high_ms"]) >= 25 and len(cal["tcp_mbit"]) >= 4, cal
    # The lab is slower than real time: a round trip gains real time at TDF 1.
    extra1 = statistics.median(cal["rtt_by_gap_ms"]["0.2"]) - 20.0
    check("advise.calibration.extra_rtt_ms_at_gap_0.2", extra1, above=1.0, unit=" ms",
          samples=cal["rtt_by_gap_ms"]["0.2"], context=cal)
    check("advise.calibration.wake_ms", cal["wake_ms"], above=1.0, unit=" ms", context=cal)
    # The calibration run's own bundle: deployed at TDF 1, changed to TDF 5.
    meta = json.loads((out / "calibrate" / "meta.json").read_text())
    assert [s["tdf"] for s in meta["tdf_timeline"]] == [1, 5] and meta["status"] == "ok"
    advice = (out / "advice.txt").read_text()
    assert "smallest round trip h1 <-> h2: 80 ms over 1 link(s), packets 0.2 s apart" \
        in advice, advice
    status = int(re.search(r"advise-status=(\d+)", result.output).group(1))
    assert status == 0, advice      # the lab's floor leaves a TDF that will do
    found = re.search(r"^advice: TDF ([\d.]+) \(predicted round-trip error \+([\d.]+)%",
                      advice, re.M)
    assert found, advice
    tdf, predicted = float(found.group(1)), float(found.group(2))
    check("advise.advised_tdf", tdf, above=1, context=advice)
    assert predicted <= ACCURACY / 2, advice    # what the advice aims at, by construction
    with open(out / "sweep" / "summary.csv") as f:
        rows = {float(r["tdf"]): r for r in csv.DictReader(f) if r["metric"] == "rtt_ms"}
    assert sorted(rows) == [1.0, tdf], rows
    cal = Calibration.load(out / "calibration.json")
    for at in (1.0, tdf):
        model = 100 * cal.extra_ms(at, 0.2) / 80.0
        print(f"TDF {at:g}: predicted {model:+.2f}%, measured "
              f"{float(rows[at]['error_pct']):+.2f}% (median {float(rows[at]['median']):.2f} ms of "
              f"{rows[at]['n']} pings)")
    assert abs(model - predicted) < 0.1, (model, predicted)
    measured = float(rows[tdf]["error_pct"])
    check("advise.advised_tdf.rtt_error_pct", measured, low=-ACCURACY, high=ACCURACY,
          unit="%", context=(tdf, predicted, advice))
    check("advise.advised_tdf.rtt_error_minus_prediction_pct", measured - predicted,
          low=-ACCURACY / 2, high=ACCURACY / 2, unit="%", context=(tdf, predicted, measured))
    # TDF 1 needed the advice, and the model explains what it measured
    # (within half: real time at TDF 1 scatters more between runs; two
    # runs measured 0.72 and 0.93 of the prediction there).
    at_1, model_1 = float(rows[1.0]["error_pct"]), 100 * cal.extra_ms(1.0, 0.2) / 80.0
    check("advise.tdf1.rtt_error_pct", at_1, above=ACCURACY, unit="%", context=rows[1.0])
    # |at_1 - model_1| <= model_1 / 2 as a ratio (model_1 > 0; else it fails, as before).
    check("advise.tdf1.measured_over_predicted", at_1 / model_1 if model_1 > 0 else float("nan"),
          low=0.5, high=1.5, context=(at_1, model_1))
