"""`selena reproduce NAME...`: the paper reproductions, each one command
(selena.reproduce): run in the lab into a fresh directory, then
docs/results/<name>/ refreshed from it."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from selena.cli.args import say
from selena.errors import ScenarioError
from selena.reproduce import DEFAULTS, Params, lab_script, reproductions, run_all
from selena.runner import Runner
from selena.signals import TerminateAsInterrupt


def register(subparsers: argparse._SubParsersAction) -> None:
    # The help names no plugin (tests/test_lab_apart.py): the runs go through
    # `selena lab run`, which says itself when it is missing.
    p = subparsers.add_parser("reproduce", help="run paper reproductions into fresh "
                                                "directories, refresh docs/results")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"reproductions to run, in order ({', '.join(reproductions())})")
    p.add_argument("--list", action="store_true",
                   help="print each reproduction's commands and run nothing")
    # Defaults are the reproductions' own (selena.reproduce.Params).
    p.add_argument("--star-tdfs", default=DEFAULTS.star_tdfs, metavar="T1,T2,...",
                   help="Figures 4 and 5's sweep (default %(default)s)")
    p.add_argument("--fattree-tdfs", default=DEFAULTS.fattree_tdfs, metavar="T1,T2,...",
                   help="the fat tree's sweep (default %(default)s)")
    p.add_argument("--fattree-memory", type=int, default=DEFAULTS.fattree_memory, metavar="MB",
                   help="the lab's RAM for the fat tree (default %(default)s)")
    p.add_argument("--qjump-ptpd-tdfs", default=",".join(DEFAULTS.qjump_ptpd_tdfs),
                   metavar="T1,T2,...",
                   help="PTPd's TDFs, above 20 with 10 s windows (default %(default)s)")
    p.add_argument("--fct-rate", type=float, default=DEFAULTS.fct_rate, metavar="FLOWS_PER_S",
                   help="Figure 11's load (default and the paper's: %(default)g flows/s)")
    p.add_argument("--fct-scale", type=float, default=DEFAULTS.fct_scale, metavar="K",
                   help="Figure 11's link rate and flow size divided by K (the scaling "
                        "rule: the same transfer time and load share; 1 = the paper's "
                        "1 Gbit/s and 1 MB; default %(default)g)")
    p.add_argument("--adaptive-tdfs", default=DEFAULTS.adaptive_tdfs, metavar="1,T2,...",
                   help="the adaptive comparison's sweep grid, from 1; its adaptive run "
                        "is auto:1-<the last> (default %(default)s)")
    p.add_argument("--starscale-rates", default=DEFAULTS.starscale_rates, metavar="M1,M2,...",
                   help="Figure 7's client link rates, Mbit/s, x100: the paper's "
                        "(default %(default)s)")
    p.add_argument("--starscale-clients", default=DEFAULTS.starscale_clients, metavar="N1,N2,...",
                   help="Figures 8 and 10's client counts, the paper's up to 60 "
                        "(default %(default)s)")
    p.add_argument("--starscale-tdfs", default=DEFAULTS.starscale_tdfs, metavar="T1,T2,...",
                   help="Figure 10's TDFs (default %(default)s)")
    p.add_argument("--deploy-hosts", default=DEFAULTS.deploy_hosts, metavar="N1,N2,...",
                   help="guests cold-booted per run, the paper's 52 (default %(default)s)")
    p.add_argument("--deploy-memory", type=int, default=DEFAULTS.deploy_memory, metavar="MB",
                   help="the lab's RAM for the deploy runs (default %(default)s)")
    p.add_argument("--mflops-vms", default=DEFAULTS.mflops_vms, metavar="N1,N2,...",
                   help="QJump Figures 2-3's VMs at once, the paper's 1,2,5,10 "
                        "(default %(default)s)")
    p.add_argument("--bandwidth-tdfs", default=DEFAULTS.bandwidth_tdfs, metavar="T1,T2,...",
                   help="Figure 9's TDFs, bench-bandwidth (default %(default)s)")
    p.add_argument("--bandwidth-refine", type=int, default=DEFAULTS.bandwidth_refine,
                   choices=range(0, 5), metavar="N",
                   help="bisections of each figure's doubling, 2: 19%% steps "
                        "(default %(default)s)")
    p.add_argument("--spacing-rates", default=DEFAULTS.spacing_rates, metavar="M1,M2,...",
                   help="the packet-spacing CCDF's link rates, Mbit/s (default %(default)s)")
    p.add_argument("--spacing-tdfs", default=DEFAULTS.spacing_tdfs, metavar="T1,T2,...",
                   help="the packet-spacing CCDF's TDFs (default %(default)s)")
    p.set_defaults(func=cmd_reproduce)


def cmd_reproduce(args: argparse.Namespace) -> int:
    # Every option is a Params field of the same name.
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(Params)}
    values["qjump_ptpd_tdfs"] = tuple(t for t in values["qjump_ptpd_tdfs"].replace(" ", ",")
                                      .split(",") if t)
    catalogue = reproductions(Params(**values))
    names = args.names or ([] if not args.list else list(catalogue))
    if not names:
        raise ScenarioError(f"reproduce: name one or more of {', '.join(catalogue)} "
                            "(or --list)")
    unknown = [n for n in names if n not in catalogue]
    if unknown:
        raise ScenarioError(f"reproduce: no reproduction {', '.join(unknown)} (have "
                            f"{', '.join(catalogue)})")
    if args.list:
        for name in names:
            r = catalogue[name]
            print(f"# {name}: {r.paper}; about {r.minutes} min; selena lab run "
                  f"{' '.join([*r.lab_args, '--timeout', str(r.lab_timeout_s)])} -- sh -c:")
            print(lab_script(r, Path("build/results") / name / "DATE"))
        return 0
    root = Path.cwd()
    if not (root / "scenarios").is_dir() or not (root / "docs").is_dir():
        raise ScenarioError(f"reproduce: {root} is not selena's source tree (no scenarios/ "
                            "and docs/); run it from the checkout")
    # A `kill` of this process stops the lab run as Ctrl-C does: the child
    # `selena lab run` gets a SIGTERM and time to power its lab off (it
    # holds the machine-wide lab lock), then a SIGKILL.
    with TerminateAsInterrupt():
        run_all(names, catalogue, root=root, runner=Runner(), say=say,
                selena=(sys.executable, "-m", "selena"))
    return 0
