"""`selena sweep` (one scenario at several TDFs) and `selena sweep-report`
(summary, KS tests, recommendation and plots from a sweep's bundles)."""

from __future__ import annotations

import argparse
from pathlib import Path

from selena.backends import BACKENDS, DEFAULT_BACKEND
from selena.cli.args import param_option, say, tdf_arg, tdf_list_arg
from selena.errors import AnalysisError, ScenarioError, SelenaError
from selena.experiment import Experiment
from selena.sweep import (
    RunOne,
    SweepPlan,
    SweepRun,
    analyze,
    auto_sweep,
    check_resumable,
    check_sweep_dir,
    check_tolerance,
    plot,
    run_sweep,
    scenario_digest,
    write_recommendation,
    write_summary,
)
from selena.user_errors import user_error


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="run a scenario at several TDFs; summary, "
                                            "KS tests and the smallest faithful TDF")
    p.add_argument("scenario", help="a scenario .py file")
    p.add_argument("--tdf", type=tdf_list_arg, metavar="T1,T2,...",
                   help="the TDFs to run (e.g. 1,2,5,10)")
    p.add_argument("--auto", action="store_true",
                   help="start at TDF 1 (or the first --tdf) and double it until two "
                        "successive TDFs are faithful and alike; print the choice")
    p.add_argument("--max-tdf", type=tdf_arg, default=64.0, metavar="TDF",
                   help="where --auto gives up (default 64)")
    p.add_argument("--repeat", type=int, default=1, help="runs per TDF (default 1)")
    param_option(p, "passed to the scenario's build(**params) and exp.params (repeatable)")
    p.add_argument("--out", type=Path, required=True, help="sweep directory")
    p.add_argument("--resume", action="store_true",
                   help="continue the sweep this same command began in --out (interrupted, "
                        "or with failed runs): its runs that finished ok are kept, the others "
                        "run; the scenario file and the options must be as they were, but "
                        "more --tdf values or a higher --repeat extend it")
    p.add_argument("--shaping", choices=("dom0", "guest"), default="dom0")
    p.add_argument("--tolerance", type=tolerance_arg, default=5.0, metavar="PERCENT",
                   help="a metric's median within this of its expected value is ok "
                        "(default 5)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-monitor", action="store_true",
                   help="no fidelity monitor (verdicts from the metrics alone)")
    p.add_argument("--no-latency-probe", action="store_true",
                   help="no pings between two hosts for the monitor's latency signal")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.add_argument("--baseline", choices=("mininet",), default=None,
                   help="also run the scenario in real time with this backend (each "
                        "repeat), as its own column beside the TDFs")
    p.set_defaults(func=cmd_sweep)

    p = subparsers.add_parser("sweep-report", help="summary.csv, KS tests, recommendation "
                                                   "and plots of a sweep directory")
    p.add_argument("out", type=Path)
    p.add_argument("--tolerance", type=tolerance_arg, default=5.0, metavar="PERCENT")
    p.add_argument("--no-plots", action="store_true")
    p.set_defaults(func=cmd_sweep_report)


def tolerance_arg(text: str) -> float:
    """--tolerance in percent, in the range the analysis takes."""
    try:
        value = float(text)
        check_tolerance(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of percent") from None
    except AnalysisError:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0 and at most 100 "
                                         "(percent, e.g. 5)") from None
    return value


def cmd_sweep(args: argparse.Namespace) -> int:
    if args.auto:
        if args.resume:
            raise ScenarioError("sweep: --resume continues a sweep of --tdf; an --auto search "
                                "starts anew: drop --resume")
        return cmd_auto(args)
    if not args.tdf:
        raise ScenarioError("sweep: give --tdf T1,T2,... or --auto")
    plan = SweepPlan(args.scenario, args.tdf, args.repeat, dict(args.param), args.baseline,
                     options=_run_options(args))
    plan.scenario_sha256 = scenario_digest(_scenario_file(args))
    if args.resume:
        check_resumable(args.out, plan)     # what differs, before the slower checks
    # Validate at every TDF first: a mistake is reported before any guest exists.
    checked = [_experiment(args, tdf, None) for tdf in plan.tdfs]
    for exp in checked:
        exp.check()
    baseline = None
    if plan.baseline:
        baseline = _experiment(args, 1.0, None, plan.baseline)
        baseline.check()
        baseline.render()       # refuses what the baseline cannot translate
    _before_the_first_run(args, checked[0], baseline)
    if not args.resume and (args.out / "sweep.json").is_file():
        say(f"{args.out}: a new sweep; the earlier one's runs there are not its (--resume "
            "continues that one instead)")

    outcomes = run_sweep(plan, args.out, _run_one(args), resume=args.resume, progress=say)
    failed = [o for o in outcomes if o.status != "ok"]
    for o in failed:
        say(f"run {o.run.name} {o.status}: {o.error or 'see its meta.json'}")
    if args.resume:
        kept = sum(o.kept for o in outcomes)
        say(f"resumed: {kept} run(s) kept from before, {len(outcomes) - kept} run now")
    _report(args.out, args.tolerance, not args.no_plots)
    return 1 if failed else 0


def cmd_auto(args: argparse.Namespace) -> int:
    start = args.tdf[0] if args.tdf else 1.0
    max_tdf = args.max_tdf
    if max_tdf < start:
        raise ScenarioError(f"sweep --auto: --max-tdf {max_tdf:g} is below the start TDF "
                            f"{start:g}")
    first = _experiment(args, start, None)
    first.check()
    _before_the_first_run(args, first, None)
    choice = auto_sweep(args.scenario, args.out, _run_one(args), start=start, max_tdf=max_tdf,
                        params=dict(args.param), tolerance_pct=args.tolerance,
                        options=_run_options(args), progress=say)
    print(choice.report())
    _report(args.out, args.tolerance, not args.no_plots)
    return 0 if choice.chosen is not None else 1


def _before_the_first_run(args: argparse.Namespace, first: Experiment,
                          baseline: Experiment | None) -> None:
    """A bad --out, or a host that cannot run the scenario (not a Dom0, say),
    is one line now, with nothing created, not a failure of every run."""
    check_sweep_dir(args.out)
    first.preflight()
    if baseline is not None:
        baseline.preflight()


def cmd_sweep_report(args: argparse.Namespace) -> int:
    return _report(args.out, args.tolerance, not args.no_plots)


def _report(out: Path, tolerance: float, plots: bool) -> int:
    analysis = analyze(out, tolerance_pct=tolerance)
    summary = write_summary(analysis.rows, out / "summary.csv")
    write_recommendation(analysis, out / "recommendation.json", tolerance)
    print(analysis.report())
    print(f"summary: {summary}")
    if plots:
        try:
            for path in plot(analysis, out):
                print(f"plot: {path}")
        except AnalysisError as exc:
            say(f"selena: {exc} (no plots)")
    return 0


def _run_options(args: argparse.Namespace) -> dict[str, str]:
    """How each run is made, as sweep.json keeps it for --resume to match."""
    return {"--backend": args.backend, "--shaping": args.shaping,
            "monitor": "off (--no-monitor)" if args.no_monitor else "on",
            "latency probe": "off (--no-latency-probe)" if args.no_latency_probe else "on"}


def _run_one(args: argparse.Namespace) -> RunOne:
    def run_one(run: SweepRun, bundle: Path) -> None:
        exp = _experiment(args, run.tdf, bundle, run.baseline, run.sweep_id)
        try:
            with exp:
                exp.run_scenario()
        except SelenaError:
            raise
        except Exception as exc:  # noqa: BLE001 - the scenario's own error, shown as theirs
            raise user_error(exc, args.scenario) from exc

    return run_one


def _scenario_file(args: argparse.Namespace) -> Path:
    if not Path(args.scenario).is_file():
        raise ScenarioError(f"{args.scenario}: no such scenario file")
    return Path(args.scenario)


def _experiment(args: argparse.Namespace, tdf: float, out: Path | None,
                backend: str | None = None, sweep_id: str | None = None) -> Experiment:
    _scenario_file(args)
    # The sweep's id in each bundle's meta.json: analysis trusts only those.
    return Experiment(args.scenario, tdf=tdf, params=dict(args.param), out=out,
                      shaping=args.shaping, backend=backend or args.backend, progress=say,
                      monitor=not args.no_monitor,
                      latency_probe=not args.no_latency_probe,
                      meta={"sweep_id": sweep_id} if sweep_id else None)
