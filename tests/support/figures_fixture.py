"""A small, made-up lab output for every reproduction, as `selena reproduce`
finds it in its fresh directory (bundles with their bulk: nodes/, big
outputs), and the docs/results it collects into. tests/data/figures/results
is `collect`'s output of these (regenerate with
`python tests/support/figures_fixture.py`); tests/test_figures.py draws the
figures from it and rebuilds it to check collect()."""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "figures"


def _bundle(path: Path, tdf: float, metrics: dict, real_s: float = 100.0,
            verdict: str | None = "ok", extra_meta: dict | None = None,
            reasons: list[str] | None = None) -> Path:
    path.mkdir(parents=True)
    meta = {"experiment": path.name, "status": "ok", "tdf": tdf, "real_seconds": real_s,
            "commands": [], **(extra_meta or {})}
    if verdict:
        meta["fidelity"] = {"verdict": verdict, "reasons": reasons or []}
    (path / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (path / "metrics.json").write_text(json.dumps(
        {name: {"unit": unit, "expected": expected, "n": len(samples), "samples": samples,
                **({"median": sorted(samples)[len(samples) // 2],
                    "p5": sorted(samples)[len(samples) // 20],
                    "p95": sorted(samples)[len(samples) * 19 // 20]} if samples else {})}
         for name, (samples, expected, unit) in metrics.items()}, indent=1) + "\n")
    # Bulk output a figure does not need: collect() leaves it behind.
    node = path / "nodes" / "h1"
    node.mkdir(parents=True)
    (node / "1.json").write_text(json.dumps({"command": "iperf3 -c x", "seq": 1}))
    (node / "1.stdout").write_text("x" * 5000)
    return path


def _star(fresh: Path, rng: random.Random) -> None:
    sweep = fresh / "sweep"
    for run, tdf, spread in (("tdf1-r1", 1, 3.0), ("tdf10-r1", 10, 0.2),
                             ("mininet-r1", 1, 1.0)):
        centre = 9.56 if spread < 3 else 5.0
        metrics = {"client_mbit": ([round(rng.gauss(centre, spread), 3) for _ in range(60)],
                                   9.56, "Mbit/s")}
        for k in (1, 2, 3):
            metrics[f"aggregate_mbit_{k}flows"] = (
                [round(rng.gauss(k * centre, spread), 3) for _ in range(8)], k * 9.56, "Mbit/s")
        _bundle(sweep / "runs" / run, tdf, metrics, real_s=60 + 20 * tdf,
                verdict=None if run.startswith("mininet") else "ok")
    (sweep / "sweep.json").write_text(json.dumps({"scenario": "scenarios/star_throughput.py",
                                                  "tdfs": [1, 10], "baseline": "mininet"}))
    (sweep / "summary.csv").write_text("scenario,tdf,metric\nstar,1,client_mbit\n")


def _fattree(fresh: Path, rng: random.Random) -> None:
    sweep = fresh / "sweep"
    for run, tdf, mean in (("tdf10-r1", 10, 1.6), ("tdf20-r1", 20, 1.1),
                           ("mininet-r1", 1, 1.05)):
        fcts = [round(abs(rng.gauss(mean, 0.2)) + 0.3, 4) for _ in range(80)]
        path = _bundle(sweep / "runs" / run, tdf,
                       {"fct_s": (fcts, 0.84, "s"), "flows": ([len(fcts)], None, "flows"),
                        "failed_flows": ([0], 0, "flows")}, real_s=300 + 10 * tdf)
        (path / "fct-h1.csv").write_text("flow,start_ns,end_ns,fct_s,bytes,status\n")
    (sweep / "sweep.json").write_text(json.dumps({"scenario": "scenarios/fat_tree_fct.py"}))


def _fct(fresh: Path, rng: random.Random) -> None:
    path = _bundle(fresh / "run", 10, {})
    for profile, slow in (("ideal", 0.0), ("pica8-p3290", 0.15)):
        rows = ["flow,start_ns,end_ns,fct_s,bytes,status"]
        for i in range(40):
            fct = rng.uniform(0.05, 0.3) + (1.0 if rng.random() < slow else 0.0)
            status = "timeout" if profile != "ideal" and i == 39 else "ok"
            start = 10**9 * i
            rows.append(f"{i},{start},{start + int(fct * 1e9)},{fct:.6f},1000000,{status}")
        (path / f"fct-{profile}.csv").write_text("\n".join(rows) + "\n")


def _ptpd(bundle: Path, tdf: float, idle_s: float, bulk_s: float) -> None:
    _bundle(bundle, tdf, {})
    node = bundle / "nodes" / "h1"
    marks = (1795600000.0, 1795600020.0, 1795600040.0)
    commands = [(2, "exec ptpd -M -i eth0", "", "h8"), (3, "exec ptpd -s -i eth0 -V", None, "h1")]
    commands += [(4 + i, "date +%s.%N", f"{t:.6f}\n", "h1") for i, t in enumerate(marks)]
    lines = []
    for i in range(-8, 48 * 4):
        when = marks[0] + i / 4
        offset = (idle_s if when < marks[1] else bulk_s) * (1 + 0.3 * ((i * 7) % 5 - 2) / 2)
        stamp = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"{stamp}, slv, 1, 0.000050, {offset:.9f}, 0, 0")
    for seq, command, out, host in commands:
        where = node.parent / host
        where.mkdir(exist_ok=True)
        (where / f"{seq}.json").write_text(json.dumps({"command": command, "seq": seq}))
        (where / f"{seq}.stdout").write_text("\n".join(lines) if out is None else out)


def _qjump(fresh: Path, rng: random.Random) -> None:
    def rtts(centre: float) -> list[float]:
        return [round(rng.lognormvariate(0, 0.4) * centre, 1) for _ in range(50)]

    _bundle(fresh / "ping", 20, {"ping_idle_rtt_us": (rtts(600), None, "us"),
                                 "ping_bulk_rtt_us": (rtts(9000), None, "us")})
    _bundle(fresh / "ping-prio", 20, {"ping_idle_rtt_us": (rtts(600), None, "us"),
                                      "ping_bulk_rtt_us": (rtts(400), None, "us")})
    for name, mean, shift in (("memcached", 17000.0, 4), ("memcached-c8", 1800.0, 0)):
        metrics = {}
        for phase, factor in (("idle", 1), ("bulk", 3)):
            metrics.update({
                f"memcached_{phase}_mean_us": ([mean * factor], None, "us"),
                f"memcached_{phase}_std_us": ([mean / 2 * factor], None, "us"),
                f"memcached_{phase}_tps": ([7000.0 / factor], None, "requests/s"),
                f"memcached_{phase}_log2_hist": ([0] * (9 + shift)
                                                 + [5, 40 * factor, 90, 30, 4 * factor],
                                                 None, "requests")})
        _bundle(fresh / name, 10, metrics)
    _ptpd(fresh / "ptpd-tdf10", 10, 2.5e-3, 33e-3)
    _ptpd(fresh / "ptpd-tdf20", 20, 1.2e-3, 40e-3)


# Per run: (throughput error %, RTT error %) of each phase (1, 4, 1 flows).
ADAPTIVE_ERRORS = {1: ((-20.0, 12.0), (-45.0, 60.0), (-18.0, 11.0)),
                   2: ((-4.0, 5.5), (-15.0, 20.0), (-3.0, 5.0)),
                   4: ((-1.0, 2.0), (-1.5, 2.5), (-0.8, 2.0)),
                   "auto": ((-1.1, 2.2), (-1.4, 2.4), (-0.9, 2.1))}
ADAPTIVE_TIMELINE = [(1, 0.0, 0.0, "start of auto:1-4 at the scenario's TDF clamped into MIN-MAX"),
                     (2, 4.0, 4.0, "raise: RTT excess +12.0% > 5%"),
                     (4, 44.0, 24.0, "raise: vCPU of h1 busy 95% >= 90%"),
                     (2, 128.0, 45.0, "lower: every busy peak <= 45% (highest 20%)"),
                     (1, 132.0, 47.0, "lower: every busy peak <= 45% (highest 30%)")]


def _phases_metrics(errors) -> dict:
    """adaptive_phases.py's metrics with medians exactly `errors` off."""
    bounds, flows = [3.0, 23.0, 43.0, 63.0], [1, 4, 1]
    metrics: dict[str, tuple[list, float | None, str]] = {
        "phase_bounds_s": (bounds, None, "s"), "phase_flows": (flows, None, "flows")}
    for i, (k, (mbit_err, rtt_err)) in enumerate(zip(flows, errors, strict=True), start=1):
        mbit, rtt = k * 10 * 1448 / 1514, 200.0
        spread = [-0.03, -0.01, 0.0, 0.01, 0.03]
        metrics[f"phase{i}_mbit"] = ([round(mbit * (1 + mbit_err / 100) + d, 6)
                                      for d in spread], mbit, "Mbit/s")
        metrics[f"phase{i}_rtt_ms"] = ([round(rtt * (1 + rtt_err / 100) + 10 * d, 6)
                                        for d in spread], rtt, "ms")
    return metrics


def _adaptive(fresh: Path, rng: random.Random) -> None:
    sweep = fresh / "sweep"
    for tdf in (1, 2, 4):
        reasons = [] if tdf == 4 else [f"round trip probe-srv at least {200 + 24 / tdf:.1f} ms"]
        _bundle(sweep / "runs" / f"tdf{tdf}-r1", tdf, _phases_metrics(ADAPTIVE_ERRORS[tdf]),
                real_s=60 + 63 * tdf, verdict="degraded" if reasons else "ok",
                reasons=reasons,
                extra_meta={"tdf_timeline": [{"tdf": tdf, "real_s": 0.0, "virtual_s": 0.0}]})
    (sweep / "sweep.json").write_text(json.dumps({"scenario": "scenarios/adaptive_phases.py",
                                                  "tdfs": [1, 2, 4]}))
    (sweep / "summary.csv").write_text("scenario,tdf,metric\nphases,1,phase1_mbit\n")
    (sweep / "recommendation.json").write_text(json.dumps(
        {"tdfs": [1.0, 2.0, 4.0], "tolerance_pct": 5.0, "recommended": 4.0,
         "not_recommended": {"1": ["phase1_mbit repeat 1 degraded"],
                             "2": ["phase2_mbit repeat 1 degraded"]}}, indent=1) + "\n")
    timeline = [{"tdf": t, "real_s": r, "virtual_s": v, "reason": why}
                for t, r, v, why in ADAPTIVE_TIMELINE]
    _bundle(fresh / "adaptive", 1, _phases_metrics(ADAPTIVE_ERRORS["auto"]), real_s=210.0,
            extra_meta={"tdf_timeline": timeline,
                        "adaptive": {"policy": {"spec": "auto:1-4"}, "decisions": []}})


def _star_scale_run(path: Path, rng: random.Random, tdf: float, clients: int,
                    client_mbit: float, spread: float) -> None:
    """One run of Figures 7, 8 and 10: per-client samples that spread more as
    the load grows, and the monitor's CPU use in fidelity.json."""
    expected = round(client_mbit * 1448 / 1514, 4)
    samples = [round(min(expected * 1.05, rng.gauss(expected, spread * expected)), 3)
               for _ in range(40 * clients)]
    # Each client's 1 s windows: ten of its 100 ms ones in a row.
    seconds = [round(sum(samples[i:i + 10]) / 10, 3) for i in range(0, len(samples), 10)]
    _bundle(path, tdf, {"client_mbit": (samples, expected, "Mbit/s"),
                        "client_mbit_1s": (seconds, expected, "Mbit/s"),
                        f"aggregate_mbit_{clients}flows": ([clients * expected] * 4,
                                                           clients * expected, "Mbit/s")},
            extra_meta={"params": {"clients": clients, "client_mbit": client_mbit,
                                   "stagger_s": 0, "last_s": 5}})
    load = min(1.0, clients * client_mbit / tdf / 40)
    (path / "fidelity.json").write_text(json.dumps({
        "verdict": "ok", "dom0_busy": [round(load * f, 3) for f in (0.8, 1.0, 0.9)],
        "guest_busy": {f"h{k}": [round(load / 2, 3)] * 3 for k in range(1, clients + 1)}},
        indent=1) + "\n")


def _starscale(fresh: Path, rng: random.Random) -> None:
    for rate, spread in ((5, 0.005), (10, 0.01), (20, 0.04), (40, 0.2)):
        _star_scale_run(fresh / f"fig7-{rate}mbit", rng, 20, 4, rate, spread)
    for clients in (2, 4, 8):
        sweep = fresh / f"clients{clients}"
        for tdf in (5, 10, 20):
            spread = 0.005 if clients * 10 <= tdf * 2 else 0.1
            _star_scale_run(sweep / "runs" / f"tdf{tdf}-r1", rng, tdf, clients, 10, spread)
        (sweep / "sweep.json").write_text(json.dumps({"scenario": "scenarios/star_throughput.py",
                                                      "tdfs": [5, 10, 20]}))


def _deploy(fresh: Path, rng: random.Random) -> None:
    for hosts in (13, 26, 52):
        _bundle(fresh / f"hosts{hosts}", 1,
                {"guests_up": ([hosts], float(hosts), "guests"),
                 "guest_uptime_s": ([round(rng.uniform(2, 40), 2) for _ in range(hosts)],
                                    None, "s"),
                 "dom0_total_mb": ([1536.0], None, "MB"),
                 "dom0_used_mb": ([round(300 + 2.5 * hosts, 1)], None, "MB")},
                extra_meta={"params": {"hosts": hosts},
                            "timings": {"deploy_s": round(0.9 * hosts, 2),
                                        "boot_to_agents_s": round(20 + 1.1 * hosts, 2)}})


def _mflops(fresh: Path, rng: random.Random) -> None:
    one = 12000.0
    for fig, cpu in ((2, "dilated"), (3, "real")):
        metrics = {}
        for tdf in (1, 10, 20):
            for vms in (1, 2, 4):
                if cpu == "real":
                    total = vms * one * rng.uniform(0.95, 1.0)
                else:
                    total = tdf * one * min(vms, 2) * rng.uniform(0.8, 1.0)
                metrics[f"work_per_s_tdf{tdf}_vms{vms}"] = ([round(total, 1)] * 2, None,
                                                            "iterations/s")
        _bundle(fresh / f"fig{fig}-{cpu}", 1, metrics, extra_meta={"params": {"cpu": cpu}})


def _bandwidth(fresh: Path, rng: random.Random) -> None:
    """bench_bandwidth's own bundle (write_bundle), from a fake host whose
    capacity is about 1.6 x the TDF x Mininet's."""
    from selena.lab.bench_bandwidth import Trial, run_bench, write_bundle

    capacity = {"mininet": 100.0, "selena TDF 5": 800.0, "selena TDF 10": 1700.0,
                "selena TDF 20": 3300.0}

    def measure(config, rate):
        cap = capacity[config.name] * rng.uniform(0.97, 1.0)
        reasons = ["Dom0 CPU saturated in 40% of the run"] if rate > cap else []
        if config.backend == "xl" and rate > 0.8 * cap:
            reasons.append("link h2 eth0 -> h1 eth0: 8% of 300 departures late")
        return Trial(rate, min(rate, cap) * 1448 / 1514, "degraded" if reasons else "ok",
                     reasons, real_s=60.0)

    trials: dict = {}
    results = run_bench([5, 10, 20], measure, lambda _: None, 20, 2, trials)
    write_bundle(fresh / "bench", [5, 10, 20], results, trials, 2, 1800.0)


def _spacing(fresh: Path, rng: random.Random) -> None:
    """Spacing errors that grow with the rate at TDF 1, and stay tight at
    TDF 10, binned as LinkSpacing.add bins them."""
    import bisect

    from selena.fidelity import SPACING_ERROR_EDGES, LinkSpacing

    for rate in (10, 40, 160):
        sweep = fresh / f"rate{rate}"
        for tdf in (1, 10):
            load = rate / 40 / tdf
            link = LinkSpacing("h1 eth0 -> h2 eth0", rate * 1e6 / tdf, windows=3)
            for _ in range(400):
                error = rng.expovariate(1 / (0.05 + load)) * (8 if rng.random() < 0.05 else 1)
                link.error_hist[bisect.bisect_right(SPACING_ERROR_EDGES, error)] += 1
                link.spaced += 1
                link.late += error > 1
            link.departures = link.spaced + 20
            path = _bundle(sweep / "runs" / f"tdf{tdf}-r1", tdf,
                           {"tcp_mbit": ([round(rate * 0.956 * (1 - min(0.5, load / 20)), 2)]
                                         * 5, round(rate * 0.956, 3), "Mbit/s")},
                           extra_meta={"params": {"rate_mbit": rate}})
            (path / "fidelity.json").write_text(json.dumps({
                "verdict": "ok", "spacing": {"vif2.0": {
                    "label": link.label, "spaced": link.spaced, "late": link.late,
                    "late_share": round(link.late_share, 4), "worst_late_ms": 1.5 * load,
                    "error_hist": link.error_hist}}}, indent=1) + "\n")
        (sweep / "sweep.json").write_text(json.dumps({"scenario": "scenarios/spacing_ccdf.py"}))


RAW = {"star": _star, "fattree": _fattree, "fct": _fct, "qjump": _qjump, "adaptive": _adaptive,
       "starscale": _starscale, "deploy": _deploy, "mflops": _mflops,
       "bandwidth": _bandwidth, "spacing": _spacing}


def raw(root: Path) -> dict[str, Path]:
    """Each reproduction's fresh directory, as the lab leaves it, under root."""
    rng = random.Random(34)
    out = {}
    for name, make in RAW.items():
        out[name] = root / name / "20260101T000000Z"
        make(out[name], rng)
    return out


def provenance(name: str) -> dict:
    step = ("env SELENA_FCT_RATE=50 selena run scenarios/switch_model_fct.py"
            if name == "fct" else f"selena ... ({name})")
    return {"reproduction": name, "paper": "fixture", "date": "2026-01-01T00:00:00Z",
            "commit": "0123456789abcdef", "command": f"selena reproduce {name}",
            "steps": [{"name": "run", "command": step, "real_s": 60.0}], "real_s": 600.0,
            "source": f"build/results/{name}/20260101T000000Z"}


def results(root: Path, scratch: Path) -> Path:
    """docs/results as `selena reproduce` would leave it, under root."""
    from selena.reproduce import collect, reproductions

    catalogue = reproductions()
    for name, fresh in raw(scratch).items():
        collect(fresh, root / name, provenance(name),
                keep_outputs=catalogue[name].keep_outputs)
    return root


if __name__ == "__main__":
    import shutil
    import tempfile

    sys.path.insert(0, str(ROOT))
    target = FIXTURE / "results"
    shutil.rmtree(target, ignore_errors=True)
    with tempfile.TemporaryDirectory() as scratch:
        results(target, Path(scratch))
    print(f"wrote {target}")
