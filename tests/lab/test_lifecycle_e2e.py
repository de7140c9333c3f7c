"""End to end in the lab, through the experiment lifecycle: a plain Python
script driving an experiment (as a sudo user's, whose bundle it becomes),
IPv6 between guests, SELENA's own Listings 1 and 2 as printed, and the
front door's demo at TDF 1 and TDF 10."""

import csv
import json
import re
from pathlib import Path

import lab_results
import pytest
from lab_stats import check

from selena.lab import demo
from selena.paths import project_root
from selena.sweep import analyze

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-lifecycle")


def _bundle(name: str) -> Path:
    return project_root() / f"{OUT}-{name}"


def _outputs(bundle: Path, node: str) -> list[tuple[dict, str]]:
    base = bundle / "nodes" / node
    return [(json.loads(p.read_text()), (base / f"{p.stem}.stdout").read_text(errors="replace"))
            for p in sorted(base.glob("*.json"), key=lambda p: int(p.stem))]


def test_a_plain_python_script_runs_an_experiment(lab):
    out = f"{OUT}-script"
    # As `sudo python3 ...` by user 4242 would: the bundle becomes theirs.
    result = lab.run(f"rm -rf {out}; SUDO_UID=4242 SUDO_GID=4343 python3 "
                     f"scenarios/script_experiment.py --tdf 5 --out {out}; "
                     "echo script-status=$?; xl list | grep -c selena- ; "
                     f"echo leftovers-counted; stat -c 'owner %u:%g %a %n' {out} "
                     f"{out}/meta.json {out}/nodes/h1", timeout=600)
    assert "script-status=0" in result.output, result.output
    assert "0\nleftovers-counted" in result.output           # torn down on leaving `with`
    owners = re.findall(r"^owner (\S+) (\d+) (\S+)$", result.output, re.M)
    assert [(o[0], o[2]) for o in owners] == [("4242:4343", out), ("4242:4343", f"{out}/meta.json"),
                                              ("4242:4343", f"{out}/nodes/h1")], result.output
    assert owners[0][1] != "700", owners                     # readable, as the umask says
    assert "5 packets transmitted, 5 packets received" in result.output
    meta = json.loads((_bundle("script") / "meta.json").read_text())
    assert meta["status"] == "ok" and meta["tdf"] == 5
    assert meta["timings"]["boot_to_agents_s"] > 0
    rtt = json.loads((_bundle("script") / "metrics.json").read_text())["rtt_ms"]
    assert rtt["n"] == 4, rtt
    check("lifecycle.script.rtt_median_ms", rtt["median"], low=20.0, high=30.0, unit=" ms",
          samples=rtt.get("samples"), context=rtt)


def test_hosts_ping_each_other_over_ipv6(lab):
    out = f"{OUT}-ipv6"
    result = lab.run(f"rm -rf {out}; selena run scenarios/ipv6_pair.py --test pingall "
                     f"--out {out}", timeout=600)
    assert result.returncode == 0, result.output
    assert "*** Results: 0% dropped (2/2 received)" in result.output
    h1 = [o for o in _outputs(_bundle("ipv6"), "h1") if "-6" in o[0]["command"]]
    assert h1[0][0]["exit_code"] == 0 and "3 packets received" in h1[0][1]
    h2 = [o for o in _outputs(_bundle("ipv6"), "h2") if "-6" in o[0]["command"]]
    assert "3 packets received" in h2[0][1]
    h1 = _outputs(_bundle("ipv6"), "h1")
    shown = h1[-1][1]
    assert "inet6 fd00:6::1/64" in shown and "default via fd00:6::fe" in shown
    assert re.search(r"fd00:6::2 .*lladdr \S+ .*PERMANENT", shown), shown


def test_the_paper_listings_run_as_printed(lab):
    out = f"{OUT}-listing"
    result = lab.run(f"rm -rf {out}; selena run scenarios/paper_listing1.py --out {out}",
                     timeout=900)
    assert result.returncode == 0, result.output
    # Listing 1 pins to CPUs 4-7; the lab has 2: folded with a warning, never a libxl error.
    assert "cpu mask 4,5,6,7 names CPUs this host lacks" in result.output
    bundle = _bundle("listing")
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["status"] == "ok"
    assert all(c["state"] == "exited" and c["exit_code"] == 0 for c in meta["commands"]), \
        meta["commands"]
    netperf = _outputs(bundle, "H1")[-1][1]
    # netperf's TCP_STREAM result line: sizes, time, then throughput (10^6 bit/s).
    line = next(ln for ln in netperf.splitlines()
                if re.match(r"\s*\d+\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s*$", ln))
    check("lifecycle.listing.netperf_mbit", float(line.split()[-1]), above=1.0,
          unit=" Mbit/s", context=netperf)
    assert "Throughput" in netperf


def test_the_demo_sweep_is_faithful_at_tdf_10_and_degraded_at_tdf_1(lab, monkeypatch):
    """The front door's demo is a two-point sweep: the table side by side,
    and the sweep's verdicts the right way round (the lab cannot carry the
    link's 80 ms round trip in real time at TDF 1; at TDF 10 it can)."""
    # The demo's own commands, with its results in the session's temporary
    # directory rather than where `make demo` keeps them.
    monkeypatch.setattr(demo, "RESULTS", lab_results.out("demo"))
    result = lab.run(["sh", "-c", demo.commands(10)], timeout=1200)
    assert "demo-sweep=0" in result.output, result.output
    assert "run 2 of 2: TDF 10" in result.output
    rows = demo.read_rows(project_root(), 10)
    text, ok = demo.report(rows, 10)
    print(text)
    for name, (_, _, error) in rows[-1].values.items():     # what report's verdict is of
        check(f"demo.tdf10.{name}.error_pct", error, low=-demo.TOLERANCE_PCT,
              high=demo.TOLERANCE_PCT, unit="%", context=text)
    assert ok, text
    assert [r.tdf for r in rows] == [1.0, 10.0]
    tdf1, tdf10 = rows
    assert set(tdf1.values) == {"rtt_ms", "tcp_mbit"} and tdf1.real_s > 0
    # The dilated run costs real time: every virtual second is ten real ones.
    assert tdf10.real_s > tdf1.real_s
    analysis = analyze(project_root() / demo.RESULTS)
    verdicts = {(r["tdf"], r["metric"]): r["verdict"] for r in analysis.rows}
    assert verdicts[("10", "rtt_ms")] == "ok" and verdicts[("10", "tcp_mbit")] == "ok"
    assert verdicts[("1", "rtt_ms")].startswith("degraded"), analysis.report()
    # The monitor's latency signal (the held-out star's own sweep is the
    # `long` test_verdict_e2e): the probe pings h1-h2 over the demo's 80 ms
    # round trip; at TDF 10 its low echo is within 5%. At TDF 1 the run is
    # degraded, but not always for the round trip: in one run its low echo
    # was 4% over (median 24%) and Dom0's CPU and the throughput said why.
    latency = {tdf: json.loads((project_root() / demo.RESULTS / "runs" / f"tdf{tdf}-r1"
                                / "fidelity.json").read_text())["latency"] for tdf in (1, 10)}
    print("latency probe at TDF 1:", latency[1], "\nat TDF 10:", latency[10])
    assert latency[1]["path"] == "h1-h2" and latency[1]["echoes"] >= 5, latency[1]
    check("demo.tdf10.rtt_excess_share", latency[10]["excess_share"], below=0.05,
          context=latency[10])
    with (project_root() / demo.RESULTS / "summary.csv").open() as f:
        summary = list(csv.DictReader(f))
    assert all(r["verdict"] == "ok" for r in summary if r["tdf"] == "10"), summary
    assert all(r["verdict"].startswith("degraded (") for r in summary if r["tdf"] == "1"), \
        summary
    check("demo.ks_p_rtt_ms_tdf1", analysis.ks["rtt_ms"][1.0], below=0.05,
          context=analysis.report())
    assert analysis.recommended == 10.0, analysis.report()
    assert "run 2 of 2" in result.output
    # The packet-spacing invariant on the data direction (h2 sends, iperf3 -R):
    # at TDF 1 it is checked on a busy queue and Dom0 releases some frames
    # late (3% of 1524 in one run, 0.3% of 883 at TDF 10: not enough to decide
    # the verdict, which the CPU and the metrics decide); at TDF 10 the capture
    # ran in every window and found nothing to hold against the run.
    spacing = {tdf: json.loads((project_root() / demo.RESULTS / "runs" / f"tdf{tdf}-r1"
                                / "fidelity.json").read_text()) for tdf in (1, 10)}
    data1, data10 = (next(s for s in spacing[tdf]["spacing"].values()
                          if s["label"] == "h2 eth0 -> h1 eth0") for tdf in (1, 10))
    print("spacing at TDF 1:", data1, "\nspacing at TDF 10:", data10)
    check("demo.tdf1.spacing_spaced_frames", data1["spaced"], low=200, context=spacing[1])
    check("demo.tdf1.spacing_late_frames", data1["late"], above=0, trials=data1["spaced"],
          context=spacing[1])
    check("demo.tdf10.spacing_windows", data10["windows"], low=5, context=spacing[10])
    check("demo.tdf10.spacing_departures", data10["departures"], above=0, context=spacing[10])
    assert not any(r.startswith("link ") for r in spacing[10]["reasons"])
    # The lab's Dom0 analyses a sweep as a host with the `analysis` extra
    # does (issue 29 item 2): scipy's KS p-values, and the plots.
    assert "KS p-values: asymptotic" not in result.output, result.output
    kept = json.loads((project_root() / demo.RESULTS / "recommendation.json").read_text())
    assert kept["ks_method"] == "scipy", kept
    report = lab.run(["selena", "sweep-report", demo.RESULTS], timeout=600)
    drawn = sorted(p.name for p in (project_root() / demo.RESULTS).glob("*.png"))
    assert drawn == ["real_time.png", "rtt_ms.png", "tcp_mbit.png"], report.output
    assert "KS p-values: asymptotic" not in report.output, report.output
