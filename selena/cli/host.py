"""`selena host doctor`: is this host ready for a run (selena/host/doctor.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selena.host.doctor import HostProbe, as_json, passed, report_lines, run_checks
from selena.runner import Runner


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("host", help="this host: is it ready for a run (host doctor)")
    verbs = p.add_subparsers(dest="host_command", metavar="VERB")
    p.set_defaults(func=lambda args: _help(p))
    d = verbs.add_parser("doctor", help="every check a run depends on, each with its verdict "
                                        "and the command that fixes a failure")
    d.add_argument("--json", action="store_true", help="the checks as JSON, for scripts")
    d.add_argument("--bridge", choices=("ovs", "linux"), default="ovs",
                   help="the bridges runs will use (default ovs)")
    d.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                   help="where results bundles go, for the free-space check (default results)")
    d.set_defaults(func=cmd_doctor)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def cmd_doctor(args: argparse.Namespace) -> int:
    probe = HostProbe(runner=Runner(), results_dir=args.results, bridge=args.bridge)
    checks = run_checks(probe)
    if args.json:
        print(json.dumps(as_json(checks), indent=1))
    else:
        print("\n".join(report_lines(checks)))
    return 0 if passed(checks) else 1
