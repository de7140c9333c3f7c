"""`selena run SCENARIO`: deploy, run the scenario in virtual time, collect a
results bundle, tear down (unless --keep)."""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

from selena import loader
from selena.backends.xl import DEFAULT_STATE_DIR, XlBackend
from selena.compat import SetArp
from selena.control.channel import Controller
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XenstoreConnection
from selena.engine import Experiment, arp_interface_index, run_actions
from selena.errors import SelenaError
from selena.openflow import Switches
from selena.paths import switch_profiles
from selena.plan import TEMPLATE_ROOT, make_plan
from selena.results import write_bundle
from selena.runner import Runner
from selena.shaping import Placement
from selena.shaping.guest import apply_guest_shaping
from selena.validate import validate


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="deploy a scenario, run it, collect results")
    p.add_argument("scenario", help="a scenario .py file (topology + run(exp) or SELENA actions)")
    p.add_argument("--tdf", type=float, default=None, help="override the experiment's TDF")
    p.add_argument("--link", default=None, help="link spec for every link: tc,bw=10,delay=5ms")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default results/<experiment>-<time>)")
    p.add_argument("--keep", action="store_true", help="leave the experiment running")
    p.add_argument("--warm", action="store_true",
                   help="reuse pooled guests and return them to the pool afterwards")
    p.add_argument("--bridge", choices=("ovs", "linux"), default="ovs")
    p.add_argument("--shaping", choices=("dom0", "guest"), default="dom0",
                   help="where links are shaped: Dom0 side of each vif (scaled by the TDF) "
                        "or inside the guests on egress (unscaled)")
    p.add_argument("--ready-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="real seconds to wait for every guest agent (default 600)")
    p.set_defaults(func=cmd_run)


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    runner = Runner()
    scenario = loader.load_scenario(args.scenario, tdf=args.tdf, link_spec=args.link)
    topo = scenario.topology
    templates = ({p.name for p in TEMPLATE_ROOT.iterdir() if (p / "template.yaml").exists()}
                 if TEMPLATE_ROOT.is_dir() else None)
    backend = XlBackend(runner, DEFAULT_STATE_DIR)
    for action in scenario.actions:
        if isinstance(action, SetArp):
            index = arp_interface_index(action.iface, topo.wired_interfaces(action.node))
            topo.add_static_arp(action.node, index, action.ip, action.mac)
    validate(topo, templates=templates, host_free_mb=backend.host_free_mb(),
             switch_profiles=switch_profiles())
    plan = make_plan(topo, bridge_kind=args.bridge, placement=Placement(args.shaping))
    out = args.out or Path("results") / f"{topo.name}-{time.strftime('%Y%m%d-%H%M%S')}"

    started = time.time()
    state = backend.deploy(plan, progress=say, warm=args.warm)
    error: BaseException | None = None
    xs = ctl = None
    try:
        xs = XenstoreConnection()
        ctl = Controller(xs, tdf=topo.tdf)
        domids = {g.node: state.domains[g.domain_name] for g in plan.guests}
        for node, domid in domids.items():
            ctl.add_guest(node, domid)
        say(f"waiting for {len(domids)} guest agents")
        ctl.wait_ready(args.ready_timeout)
        apply_guest_shaping(ctl, plan, progress=say)
        switches = Switches(ctl, topo)
        switches.configure(progress=say)
        environment = _environment(runner, ctl, next(iter(domids)))
        exp = Experiment(ctl, topo.tdf, domids,
                         crash=lambda node: runner.run(["xl", "destroy", str(domids[node])]),
                         out_dir=out, switches=switches)
        say(f"running {args.scenario} at TDF {topo.tdf:g}")
        try:
            run_actions(exp, scenario.actions)
            if scenario.run is not None:
                scenario.run(exp)
            exp.finish()
        except (SelenaError, AssertionError) as exc:
            error = exc
        if error is not None:
            environment["error"] = f"{type(error).__name__}: {error}"
        write_bundle(out, topo=topo, records=exp.records, environment=environment,
                     started=started, finished=time.time())
        for rec in sorted(exp.records, key=lambda r: r.seq):
            r = rec.result
            print(f"{r.guest:>10}  {r.summary():<28} {r.command[:60]}")
        print(f"results: {out}")
    finally:
        if ctl is not None:
            ctl.close()
        if xs is not None:
            xs.close()
        if args.keep:
            say(f"kept experiment {topo.name} (selena destroy {topo.name})")
        else:
            backend.destroy(topo.name, pool=args.warm)
    if error is not None:
        say(f"scenario failed: {error}")
        return 1
    return 0


def _environment(runner: Runner, ctl: Controller, some_node: str) -> dict[str, object]:
    info = runner.run(["xl", "info"], check=False).stdout
    fields = {key.strip(): value.strip() for key, _, value in
              (line.partition(":") for line in info.splitlines())}
    xen = f"{fields.get('xen_major', '?')}.{fields.get('xen_minor', '?')}" \
          f"{fields.get('xen_extra', '')}"
    guest_kernel = ctl.run(some_node, CommandSpec(argv=("uname", "-r")), timeout=120)
    return {"xen_version": xen, "dom0_kernel": platform.release(),
            "guest_kernel": guest_kernel.stdout.decode().strip()}
