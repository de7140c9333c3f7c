"""End to end in the lab, issue 34 item 4: each new reproduction's scenario
at a tiny scale on the shared boot, its bundle as `make figures` reads it
(about 6 minutes of lab time in all):

- the star with every flow at once (Figures 7, 8 and 10): per-client samples
  and the monitor's Dom0 and guest CPU, drawn by star_run/starscale;
- the cold boot (deploy_scale) of 4 guests: deploy and boot timings, every
  guest answering, Dom0's memory;
- QJump Figures 2-3 (qjump_mflops): capped, a VM's work per virtual second
  at TDF 10 is of the order of TDF 1's, two VMs about twice one;
- the packet-spacing CCDF (spacing_ccdf): the link's error histogram holds
  every checked departure."""

import json
import shutil

import lab_results
import pytest
from lab_stats import check

from selena.analysis.figures import deploy, mflops, spacing, star_run, starscale
from selena.paths import project_root

pytestmark = [pytest.mark.lab, pytest.mark.long]


def _run(lab, name: str, command: str, timeout: float = 900):
    out = lab_results.out(name)
    result = lab.run(f"rm -rf {out}; {command} --out {out}", timeout=timeout)
    assert result.returncode == 0, result.output
    return project_root() / out


def test_the_star_with_every_flow_at_once_gives_figure_8s_boxes_and_cpu(lab, tmp_path):
    bundle = _run(lab, "test-starscale", "selena run scenarios/star_throughput.py --tdf 10 "
                  "--param clients=2 --param client_mbit=5 --param stagger_s=0 "
                  "--param last_s=3")
    metrics = json.loads((bundle / "metrics.json").read_text())
    assert sorted(metrics) == ["aggregate_mbit_2flows", "client_mbit", "client_mbit_1s"], \
        metrics
    run = star_run(bundle)
    assert run.clients == 2 and run.client_mbit == 5 and run.tdf == 10
    # 2 clients x 2 s past slow start in 100 ms windows (a window or two lost at the edges).
    check("starscale.client_samples", metrics["client_mbit"]["n"], low=30, context=metrics)
    # The figures count the paper's 1 s windows: a whole second of each client's at least.
    assert run.window == "1 s" and len(run.samples) >= 2, (run.window, run.samples)
    assert run.dom0_pct is not None and run.guests_pct is not None, "no CPU in fidelity.json"
    check("starscale.dom0_pct", run.dom0_pct, low=0.0, high=100.0)
    root = tmp_path / "starscale" / "clients2"
    shutil.copytree(bundle, root / "tdf10-r1")
    drawn = starscale(tmp_path / "starscale", tmp_path / "out")
    assert {p.name for p in drawn.figures} == {"star_fig8_clients.png",
                                               "star_fig10_clients_per_tdf.png"}


def test_a_cold_boot_of_four_guests_records_its_timings_and_dom0_memory(lab, tmp_path):
    bundle = _run(lab, "test-deploy", "selena run scenarios/deploy_scale.py --param hosts=4")
    meta = json.loads((bundle / "meta.json").read_text())
    metrics = json.loads((bundle / "metrics.json").read_text())
    assert metrics["guests_up"]["samples"] == [4], metrics
    assert meta["timings"]["deploy_s"] > 0 and meta["timings"]["boot_to_agents_s"] > 0
    check("deploy.dom0_used_mb", metrics["dom0_used_mb"]["samples"][0], low=50,
          high=metrics["dom0_total_mb"]["samples"][0])
    shutil.copytree(bundle, tmp_path / "deploy" / "hosts4")
    rows = deploy(tmp_path / "deploy", tmp_path / "out").tables["deploy"].splitlines()
    assert rows[2].startswith("| 4 | 4 | ")


def test_capped_vms_do_the_work_of_tdf_1_and_two_do_about_twice_one(lab, tmp_path):
    # 40,000 iterations: about 10 s of real time per loop at TDF 10. With
    # 8,000 (2 s) two VMs did 1.29-2.67 times one VM's work in 12 runs (one
    # under 1.4); a longer loop averages a capped VM's share over more of
    # Dom0's activity, and the shell's start weighs less in it.
    bundle = _run(lab, "test-mflops", "selena run scenarios/qjump_mflops.py --param cpu=real "
                  "--param vms=1,2 --param tdfs=1,10 --param iterations=40000 "
                  "--param repeats=1")
    metrics = json.loads((bundle / "metrics.json").read_text())

    def work(tdf: int, vms: int) -> float:
        return metrics[f"work_per_s_tdf{tdf}_vms{vms}"]["samples"][0]

    # Loose, as tests/lab/test_cpu_time_e2e.py's: credit2's cap under QEMU
    # delivered 53-74% of its share there.
    check("mflops.loop40k.capped_tdf10_over_tdf1", work(10, 1) / work(1, 1), low=0.4,
          high=1.3, context=metrics)
    # Two capped VMs run side by side: no parallelism would give 1. 21 runs
    # of this loop (2026-12-05): 1.557-2.528, median 1.859, proposal for
    # <= 1% false failures >= 1.299 and <= 2.786 (scripts/lab-thresholds).
    check("mflops.loop40k.capped_two_over_one_tdf10", work(10, 2) / work(10, 1), low=1.3,
          high=3.0, context=metrics)
    shutil.copytree(bundle, tmp_path / "mflops" / "fig3-real")
    drawn = mflops(tmp_path / "mflops", tmp_path / "out")
    assert [p.name for p in drawn.figures] == ["qjump_fig3_mflops.png"]


def test_the_spacing_histogram_holds_every_checked_departure(lab, tmp_path):
    bundle = _run(lab, "test-spacing", "selena run scenarios/spacing_ccdf.py --tdf 1 "
                  "--param rate_mbit=20 --param real_s=15")
    fidelity = json.loads((bundle / "fidelity.json").read_text())
    links = fidelity["spacing"]
    assert links, fidelity.get("spacing_note")
    busiest = max(links.values(), key=lambda link: link["spaced"])
    assert busiest["spaced"] > 0 and sum(busiest["error_hist"]) == busiest["spaced"]
    shutil.copytree(bundle, tmp_path / "spacing" / "rate20" / "tdf1-r1")
    row = spacing(tmp_path / "spacing", tmp_path / "out").tables["spacing"].splitlines()[2]
    assert row.startswith(f"| 20 | 1 | {busiest['spaced']} |"), row
