"""End to end in the lab: the fidelity verdict catches the held-out case of
issue 33 (clients sending at once through a star's switch, with pings, no
expected values). A two-point sweep, TDF 1 and 20, of
scenarios/held_out_star.py (80 ms configured between two clients): at TDF 1
the lab's wake-up latency adds about 10 ms per link to every round trip, so
the run is `degraded` with a latency reason; at TDF 20 that is under 1 ms a
link and the run is `ok`; the sweep recommends TDF 20, never TDF 1.

Lab time: two deploys of four guests (about 15 s each) and about 5 virtual
seconds of scenario, 5 s at TDF 1 and 100 s at TDF 20: under 3 minutes."""

import csv
import json

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root
from selena.sweep import analyze

pytestmark = [pytest.mark.lab, pytest.mark.long]

OUT = lab_results.out("test-verdict")


def test_the_held_out_star_is_degraded_at_tdf_1_and_ok_at_tdf_20(lab):
    result = lab.run(["sh", "-c", f"rm -rf {OUT}; selena sweep scenarios/held_out_star.py "
                                  f"--tdf 1,20 --out {OUT}; echo sweep-status=$?"],
                     timeout=900)
    assert "sweep-status=0" in result.output, result.output
    root = project_root() / OUT
    fidelity = {tdf: json.loads((root / "runs" / f"tdf{tdf}-r1" / "fidelity.json").read_text())
                for tdf in (1, 20)}
    for tdf, data in fidelity.items():
        print(f"TDF {tdf}:", data["verdict"], data["reasons"], data["unchecked"],
              data["latency"], data["monitor"])
    low, high = fidelity[1], fidelity[20]
    # The probe ran in both runs, over the clients' 80 ms path.
    for data in (low, high):
        assert data["latency"]["path"] == "h1-h2" and data["latency"]["configured_ms"] == 80.0
        assert data["latency"]["echoes"] >= 5, data["latency"]
    check("verdict.tdf1.rtt_excess_share", low["latency"]["excess_share"], above=0.05,
          context=low["latency"])
    assert low["verdict"] == "degraded", low
    assert any(r.startswith("round trip h1-h2 at least ") for r in low["reasons"]), low
    check("verdict.tdf20.rtt_excess_share", high["latency"]["excess_share"], below=0.05,
          context=high["latency"])
    assert high["verdict"] == "ok", high
    # The sweep: one verdict column, what it could not check in another, and
    # TDF 20 recommended (TDF 1 never).
    with (root / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    verdicts = {(r["tdf"], r["metric"]): r["verdict"] for r in rows}
    assert verdicts[("20", "rtt_ms")] == "ok" and verdicts[("20", "tcp_mbit")] == "ok", rows
    assert verdicts[("1", "rtt_ms")].startswith("degraded (") and \
        "round trip h1-h2" in verdicts[("1", "rtt_ms")]
    assert all(r["unchecked"].startswith("no expected value") for r in rows), rows
    analysis = analyze(root)
    assert analysis.recommended == 20.0, analysis.report()
    assert "recommendation: TDF 20" in result.output
