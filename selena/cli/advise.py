"""`selena calibrate` (this host's emulation floor, measured once) and
`selena advise` (the TDF a scenario needs for an accuracy, predicted from the
calibration and the topology; selena/advise.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from selena.advise import (
    DEFAULT_INTERVAL_S,
    HIGH_TDF,
    Calibration,
    advise,
    calibration_topology,
    default_calibration_path,
    measure,
)
from selena.backends import BACKENDS, DEFAULT_BACKEND
from selena.cli.args import (
    TOPO_LIMIT,
    custom_arg,
    deploy_only_args,
    events_of,
    param_option,
    run_only_args,
    say,
    scenario_of,
    tdf_arg,
)
from selena.errors import ScenarioError
from selena.experiment import Experiment
from selena.loader import checking_only


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("calibrate", help="measure this host's emulation floor (extra "
                                                "round trip, vif throughput) for advise")
    p.add_argument("--out", type=Path, default=None,
                   help=f"calibration file (default {default_calibration_path()})")
    p.add_argument("--bundle", type=Path, default=None,
                   help="also keep the calibration run's results bundle here")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    p.set_defaults(func=cmd_calibrate)

    p = subparsers.add_parser("advise", help="predict the TDF a scenario needs on this host "
                                             "(from `selena calibrate`)")
    p.add_argument("scenario", nargs="?", help="a scenario .py file, or a Mininet-style "
                                               "topology spec (same as --topo)")
    p.add_argument("--topo", metavar="NAME[,ARGS]", help="a built-in topology, as in mn, "
                   f"or one a --custom file names. {TOPO_LIMIT}")
    custom_arg(p)
    p.add_argument("--tdf", type=tdf_arg, default=None,
                   help="accepted as run takes it (advise finds the TDF to use)")
    p.add_argument("--link", default=None, metavar="tc,bw=..,delay=..",
                   help="Mininet-style parameters for every link, as run takes them")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    p.add_argument("--events", type=Path, default=None, metavar="FILE",
                   help="accepted as run takes it and checked (the advice is for the links "
                        "as deployed, before any change)")
    p.add_argument("--backend", choices=sorted(BACKENDS), default=DEFAULT_BACKEND)
    deploy_only_args(p)
    run_only_args(p)
    p.add_argument("--accuracy", type=float, default=5.0, metavar="PERCENT",
                   help="largest error allowed on the smallest round trip (default 5)")
    p.add_argument("--calibration", type=Path, default=None,
                   help="calibration file (default: this host's, from selena calibrate)")
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                   help="virtual seconds between the packets whose round trip matters, as "
                        f"ping's -i (default {DEFAULT_INTERVAL_S:g}): the emulation's cost "
                        "grows with the idle time between them")
    p.add_argument("--duration", type=float, default=None, metavar="SECONDS",
                   help="the scenario's length in virtual seconds: also print the real "
                        "time a run at the advised TDF takes")
    param_option(p, "passed to the scenario's build(**params) (repeatable)")
    p.set_defaults(func=cmd_advise)


def cmd_calibrate(args: argparse.Namespace) -> int:
    out = args.out or default_calibration_path()
    exp = Experiment(calibration_topology(), tdf=1, backend=args.backend, out=args.bundle,
                     progress=say)
    with exp:
        say(f"calibrating: round trips at TDF 1 (several idle gaps) and {HIGH_TDF:g}, "
            "TCP at TDF 1")
        calibration = measure(exp)
    calibration.save(out)
    print(calibration.describe())
    print(f"calibration: {out}")
    return 0


def cmd_advise(args: argparse.Namespace) -> int:
    if args.scenario and not args.topo and args.scenario.endswith(".py") \
            and not Path(args.scenario).is_file():
        raise ScenarioError(f"{args.scenario}: no such scenario file")
    calibration = Calibration.load(args.calibration or default_calibration_path())
    with checking_only():   # a file that runs itself is checked, not refused
        exp = Experiment(scenario_of(args), templates=None, strict=args.strict)
    exp.check()
    events_of(args, exp)
    advice = advise(exp.topology, calibration, args.accuracy,
                    interval_s=args.interval, duration_s=args.duration)
    print(advice.report())
    return 0 if advice.tdf is not None else 1
