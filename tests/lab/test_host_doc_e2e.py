"""End to end in the lab: docs/host.md ("Run it on your own Xen server") as
a user would follow it on a server whose Xen is booted. Its `# lab: dom0`
blocks, extracted by tests/support/doc_blocks.py, run in the lab's Dom0 in
page order, each in its own `sh -e` (as root, in the tree, with a `sudo`
that runs its arguments: the Dom0 has none); the `# lab: skip (...)` blocks
(installing Xen and selena, GRUB, reboots, building) are not run, and
tests/test_host_doc.py checks that each says why. The page installs selena
editable from the clone (`pip install -e`, skipped: no network), so that
`selena host setup` finds the clone's guest-templates; PYTHONPATH=the tree
stands in for it (the Dom0 image's own copy of selena has no source tree
beside it).

Every block must exit 0, and what each shows must be what the page says:
this is Dom0, the hypervisor answers the TDF domctl, setup's dry run
changes nothing, the doctor passes, calibrate and advise give a TDF, and
the first run at that TDF measures the configured round trip within the
accuracy advise aimed at.

The page's calibration is then the advisor's test (once the lab's own
test_advise_e2e.py, which calibrated a second time in the same boot): its
fit has every gap, advise reads the demo's topology right, the prediction
at the advised TDF is the model's, the first run's error lies within half
the accuracy of it, and a run at TDF 1 needs the advice (outside the share
of the accuracy advise aims at) with the model explaining it (0.2 to 2.4
times the prediction).
One job of the shared boot: about 3 minutes of lab time, 2 of them `selena
calibrate` (the page's own step; the floor it measures is the lab's, so the
advised TDF is the lab's too: 4 to 17 in the recorded runs)."""

import json
import re
import shutil
import statistics

import lab_results
import pytest
from doc_blocks import dom0_script, outputs, page_blocks
from lab_stats import check

from selena.advise import HEADROOM, Calibration
from selena.paths import project_root

pytestmark = pytest.mark.lab

PAGE = project_root() / "docs" / "host.md"
WORK = "/tmp/host-doc-e2e"
# What the skipped `pip install -e '.[analysis]'` gives: selena from the clone
# (the cwd), without writing bytecode into the shared tree.
EDITABLE_INSTALL = ('export PYTHONPATH="$PWD"', "export PYTHONDONTWRITEBYTECODE=1")
ACCURACY_PCT = 5.0      # what `selena advise` is asked for (its default)
# The page's run says where its bundle went (results/, in the tree).
RESULTS_LINE = re.compile(r"^results: (results/first_run-\S+) \(real time", re.M)
OUT = lab_results.out("test-host-doc")
CONFIGURED_RTT_MS = 80.0     # scenarios/first_run.py's
# After the page: its calibration copied out, advise on the demo's topology,
# and the first run at TDF 1.
AFTER_PAGE = f"""
set -e
rm -rf {OUT}; mkdir -p {OUT}
cp "$1" {OUT}/calibration.json
status=0
selena advise scenarios/dilation_demo.py --calibration {OUT}/calibration.json \\
    --interval 0.2 --accuracy {ACCURACY_PCT:g} > {OUT}/advice.txt || status=$?
echo "advise-status=$status"
cat {OUT}/advice.txt
selena run scenarios/first_run.py --tdf 1 --out {OUT}/tdf1
"""


def _output_of(blocks, got, pattern: str) -> str:
    """What the first dom0 block whose commands match `pattern` printed."""
    for b in blocks:
        if b.runs and re.search(pattern, b.body, re.M):
            return got[b.line][1]
    raise AssertionError(f"docs/host.md has no dom0 block matching {pattern!r}")


def _remove_run_results(text: str) -> None:
    """The page's `selena run` writes its bundle into the tree (results/,
    ignored by git): remove that one directory, nothing else."""
    for path in RESULTS_LINE.findall(text):
        target = (project_root() / path).resolve()
        if target.parent == (project_root() / "results").resolve():
            shutil.rmtree(target, ignore_errors=True)


def test_the_host_pages_dom0_commands_run_in_the_labs_dom0(lab):
    blocks = page_blocks(PAGE)
    runs = [b for b in blocks if b.runs]
    assert runs and all(b.reason for b in blocks if not b.runs)
    result = lab.run(["sh", "-c", dom0_script(blocks, WORK, EDITABLE_INSTALL)], timeout=900)
    out = result.output
    try:
        got = outputs(out)
        assert sorted(got) == [b.line for b in runs], out
        print("seconds per block (line: s):",
              ", ".join(f"{m.group(1)}: {m.group(3)}"
                        for m in re.finditer(r"^HOSTDOC-END (\d+) rc=(\d+) seconds=(\d+)$",
                                             out, re.M)))
        failed = {line: text[-2000:] for line, (rc, text) in got.items() if rc != 0}
        # Each failed block's last line first: make test's closing lines keep
        # a message's first 400 characters.
        last = {line: (text.strip().splitlines() or ["(no output)"])[-1][-200:]
                for line, text in failed.items()}
        assert not failed, (f"docs/host.md blocks failed in the lab's Dom0 (line: last "
                            f"output line): {last}; their output (by line): {failed}")

        # 3: the GRUB snippet went where the page says (tee shows it).
        grub = _output_of(blocks, got, r"GRUB_CMDLINE_XEN_DEFAULT=")
        assert 'GRUB_CMDLINE_XEN_DEFAULT="dom0_mem=' in grub, grub
        # 5: Dom0 of a hypervisor that answers the TDF domctl, Dom0 at TDF 1.
        xen = _output_of(blocks, got, r"selena-tdf get 0")
        assert "control_d" in xen and re.search(r"^xen_version\s*: 4\.17", xen, re.M), xen
        assert re.search(r"^1$", xen, re.M), xen
        # 7: the dry run says every step and changes nothing.
        dry = _output_of(blocks, got, r"selena host setup --dry-run")
        # The lab's Dom0 has scipy and matplotlib (selena/lab/build.py).
        assert "[1/5] analysis (scipy, matplotlib): nothing to do" in dry, dry
        assert "[5/5] guest templates: would" in dry, dry
        assert "host setup: dry run, nothing was changed" in dry, dry
        # 8: the doctor passes (the block's status) with the checks a run needs.
        doctor = _output_of(blocks, got, r"selena host doctor")
        for name in ("dom0", "tdf-domctl", "xenstored", "openvswitch", "templates"):
            assert re.search(rf"^ok   {name}: ", doctor, re.M), (name, doctor)
        # 9: calibrate and advise, then the run at the advised TDF.
        advice = _output_of(blocks, got, r"selena calibrate")
        assert re.search(r"^calibration: \S+calibration-\S+\.json$", advice, re.M), advice
        tdf = re.search(r"^advice: TDF (\d+(?:\.\d+)?) ", advice, re.M)
        assert tdf, advice
        run = _output_of(blocks, got, r"selena run scenarios/first_run\.py")
        # The block reads the TDF from advise's output itself: the same one.
        assert f"running scenarios/first_run.py at TDF {tdf.group(1)}" in run, run
        rtt = re.search(r"^rtt_ms: .*; expected 80 ms, error ([+-]\d+\.\d)%$", run, re.M)
        assert rtt, run
        assert re.search(r"^fidelity: ", run, re.M), run
        bundle = RESULTS_LINE.search(run)
        assert bundle, run
        predicted = re.search(r"^advice: .*predicted round-trip error \+([\d.]+)%", advice, re.M)
        # advise's output rounds the prediction to 0.1 %.
        assert predicted and float(predicted.group(1)) <= HEADROOM * ACCURACY_PCT + 0.05, advice
        # In the lab's floor a TDF above 1 (the record keeps which, beside the error).
        check("host_doc.advised_tdf", float(tdf.group(1)), above=1, context=advice)
        pings = json.loads((project_root() / bundle.group(1) / "metrics.json").read_text())
        check("host_doc.first_run.rtt_error_abs_pct", abs(float(rtt.group(1))),
              below=ACCURACY_PCT, unit=" %", samples=pings["rtt_ms"]["samples"],
              context={"advised_tdf": tdf.group(1), "predicted_pct": predicted.group(1)})
        calibration = re.search(r"^calibration: (\S+calibration-\S+\.json)$", advice, re.M)
        assert calibration, advice
        _check_the_advisor(lab, calibration.group(1), float(tdf.group(1)),
                           float(predicted.group(1)), pings["rtt_ms"]["error_pct"])
    finally:
        _remove_run_results(out)


def _check_the_advisor(lab, calibration: str, tdf: float, predicted: float,
                       measured: float) -> None:
    """The page's calibration, its advice and its first run, as the advisor's test."""
    result = lab.run(["sh", "-c", AFTER_PAGE, "sh", calibration], timeout=600)
    assert result.returncode == 0, result.output
    out = project_root() / OUT
    cal = json.loads((out / "calibration.json").read_text())
    assert sorted(cal["rtt_by_gap_ms"]) == ["0.05", "0.2", "1"], cal
    assert all(len(v) >= 25 for v in cal["rtt_by_gap_ms"].values()), cal
    assert len(cal["rtt_high_ms"]) >= 25 and len(cal["tcp_mbit"]) >= 4, cal
    assert cal["rtt_ms"] == 20.0 and cal["high_tdf"] == 5, cal
    # The lab is slower than real time: a round trip gains real time at TDF 1.
    extra1 = statistics.median(cal["rtt_by_gap_ms"]["0.2"]) - 20.0
    check("advise.calibration.extra_rtt_ms_at_gap_0.2", extra1, above=1.0, unit=" ms",
          samples=cal["rtt_by_gap_ms"]["0.2"], context=cal)
    check("advise.calibration.wake_ms", cal["wake_ms"], above=1.0, unit=" ms", context=cal)
    advice = (out / "advice.txt").read_text()
    assert "smallest round trip h1 <-> h2: 80 ms over 1 link(s), packets 0.2 s apart" \
        in advice, advice
    status = re.search(r"advise-status=(\d+)", result.output)
    assert status, result.output
    assert status.group(1) == "0", advice      # the lab's floor leaves a TDF that will do
    # The first run's advice is the model's, at the path's round trip.
    model = Calibration.load(out / "calibration.json")
    assert abs(100 * model.extra_ms(tdf, 0.2, CONFIGURED_RTT_MS) / CONFIGURED_RTT_MS
               - predicted) < 0.1, (tdf, predicted)
    # Within half the accuracy, widened to the recorded runs' 1% points
    # (scripts/lab-thresholds, n = 23: -1.43 to +1.56 seen, -2.61 and +2.75
    # proposed).
    check("advise.advised_tdf.rtt_error_minus_prediction_pct", measured - predicted,
          low=-2.75, high=2.75, unit="%", context=(tdf, predicted, measured))
    # TDF 1 needed the advice, and the model explains what it measured. The
    # advisor went above TDF 1 because TDF 1's prediction exceeds the share of
    # the accuracy it aims at (HEADROOM), so that is what TDF 1 must measure:
    # not the accuracy itself, which the lab's floor decides (recorded runs
    # fell from 7-19% to 4.7% at TDF 1 as the floor dropped, the model's
    # prediction with them: 4.78% predicted, 4.72% measured in stop 64's CI).
    # The ratio's bounds hold the recorded distribution's 1% points
    # (scripts/lab-thresholds, n = 31: 0.60 to 1.33, and 2.01 in stop 53's CI,
    # proposed 0.25 and 2.36):
    # real time at TDF 1 scatters between the calibration and a run minutes
    # later, and ten pings over 2 s take a burst of the host's load whole (that
    # run's median ping 95 ms, 86 to 93 in the 30 before it).
    at_1 = json.loads((out / "tdf1" / "metrics.json").read_text())["rtt_ms"]
    model_1 = 100 * model.extra_ms(1.0, 0.2, CONFIGURED_RTT_MS) / CONFIGURED_RTT_MS
    print(f"TDF {tdf:g}: predicted {predicted:+.2f}%, measured {measured:+.2f}%; TDF 1: "
          f"predicted {model_1:+.2f}%, measured {at_1['error_pct']:+.2f}%")
    check("advise.tdf1.rtt_error_pct", at_1["error_pct"], above=HEADROOM * ACCURACY_PCT,
          unit="%", samples=at_1["samples"], context=at_1)
    # As a ratio (model_1 > 0; else it fails).
    check("advise.tdf1.measured_over_predicted",
          at_1["error_pct"] / model_1 if model_1 > 0 else float("nan"),
          low=0.2, high=2.4, context=(at_1["error_pct"], model_1))
