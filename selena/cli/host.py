"""`selena host doctor|setup|export`: is this host ready for a run
(selena/host/doctor.py), and make it so (selena/host/setup.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from selena.host.doctor import HostProbe, as_json, passed, report_lines, run_checks
from selena.host.setup import TEMPLATES_UNDER, HostSetup, export
from selena.runner import Runner


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("host", help="this host: set up (setup, export), check (doctor)")
    verbs = p.add_subparsers(dest="host_command", metavar="VERB")
    p.set_defaults(func=lambda args: _help(p))
    d = verbs.add_parser("doctor", help="every check a run depends on, each with its verdict "
                                        "and the command that fixes a failure")
    d.add_argument("--json", action="store_true", help="the checks as JSON, for scripts")
    d.add_argument("--bridge", choices=("ovs", "linux"), default="ovs",
                   help="the bridges runs will use (default ovs)")
    d.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                   help="where results bundles go, for the free-space check (default results)")
    d.add_argument("--root", type=Path, default=None, metavar="DIR",
                   help="judge the templates `selena host setup --root DIR` installed")
    d.set_defaults(func=cmd_doctor)

    s = verbs.add_parser("setup", help="make this Dom0 ready: scipy and matplotlib, kernel "
                                       "modules, Open vSwitch, the guest templates")
    s.add_argument("--from", dest="bundle", type=Path, default=None, metavar="FILE",
                   help="install the templates from a `selena host export` bundle instead "
                        "of building them from this source tree")
    s.add_argument("--with", dest="with_", action="append", default=[], choices=("debian",),
                   help="also the debian template and those based on it (qjump-host)")
    s.add_argument("--root", type=Path, default=Path("/"), metavar="DIR",
                   help="install files under DIR instead of / (templates, images, "
                        "modules-load.d)")
    s.add_argument("--dry-run", action="store_true",
                   help="print every step and command; run and change nothing")
    s.add_argument("--without", action="append", default=[], choices=("analysis",),
                   help="leave a step out: analysis (scipy and matplotlib; sweeps then "
                        "print asymptotic KS p-values and no plots)")
    s.set_defaults(func=cmd_setup)

    e = verbs.add_parser("export", help="the guest templates as one file for `selena host "
                                        "setup --from FILE` on another machine")
    e.add_argument("file", type=Path, metavar="FILE", help="the bundle to write (a tar)")
    e.add_argument("--with", dest="with_", action="append", default=[], choices=("debian",),
                   help="also the debian template and those based on it")
    e.add_argument("--installed", action="store_true",
                   help="the templates installed on this host (under --root), not built "
                        "from this source tree")
    e.add_argument("--root", type=Path, default=Path("/"), metavar="DIR",
                   help="with --installed: where they were installed (default /)")
    e.set_defaults(func=cmd_export)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _progress(msg: str) -> None:
    print(msg, flush=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    probe = HostProbe(runner=Runner(), results_dir=args.results, bridge=args.bridge)
    if args.root is not None:
        probe.template_root = args.root.resolve() / TEMPLATES_UNDER
    checks = run_checks(probe)
    if args.json:
        print(json.dumps(as_json(checks), indent=1))
    else:
        print("\n".join(report_lines(checks)))
    return 0 if passed(checks) else 1


def cmd_setup(args: argparse.Namespace) -> int:
    setup = HostSetup(runner=Runner(), root=args.root.resolve(), progress=_progress,
                      bundle=args.bundle, with_debian="debian" in args.with_,
                      without=frozenset(args.without))
    setup.run(dry_run=args.dry_run)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    export(args.file, installed=args.installed, root=args.root.resolve(),
           with_debian="debian" in args.with_, progress=_progress)
    return 0
