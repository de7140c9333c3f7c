"""`selena validate | deploy | status | destroy | pause | resume | clean`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from selena import loader
from selena.backends.xl import DEFAULT_STATE_DIR, XlBackend
from selena.paths import switch_profiles
from selena.plan import TEMPLATE_ROOT, make_plan
from selena.runner import Runner
from selena.shaping import Placement
from selena.validate import validate


def register(subparsers: argparse._SubParsersAction) -> None:
    def scenario_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", help="a scenario .py file, or a --topo spec like linear,3")
        p.add_argument("--tdf", type=float, default=None, help="override the experiment's TDF")
        p.add_argument("--link", default=None,
                       help="Mininet-style link spec for every link: tc,bw=10,delay=5ms "
                            "(bw in Mbit/s, loss in %%)")

    p = subparsers.add_parser("validate", help="check a scenario; create nothing")
    scenario_args(p)
    p.set_defaults(func=cmd_validate)

    p = subparsers.add_parser("deploy", help="create, wire, shape and start a topology")
    scenario_args(p)
    p.add_argument("--bridge", choices=("ovs", "linux"), default="ovs")
    p.add_argument("--shaping", choices=("dom0", "guest"), default="dom0")
    p.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                   help="wait this long for the guests to boot, showing n of N up "
                        "(0: do not wait; default 120)")
    p.add_argument("--offload", action="store_true",
                   help="keep TSO/GSO/GRO/checksum offloads on (off by default)")
    p.add_argument("--warm", action="store_true",
                   help="reuse idle guests of the same template from the warm pool")
    p.set_defaults(func=cmd_deploy)

    p = subparsers.add_parser("status", help="deployed experiments")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = subparsers.add_parser("destroy", help="remove one experiment")
    p.add_argument("experiment")
    p.add_argument("--pool", action="store_true",
                   help="keep its guests, paused and unwired, for a later --warm deploy")
    p.set_defaults(func=cmd_destroy)

    p = subparsers.add_parser("pause", help="freeze an experiment's virtual time: every guest "
                              "stops at the same virtual instant")
    p.add_argument("experiment")
    p.set_defaults(func=cmd_pause)

    p = subparsers.add_parser("resume", help="restart a paused experiment's virtual time, "
                              "losing none")
    p.add_argument("experiment")
    p.set_defaults(func=cmd_resume)

    p = subparsers.add_parser("clean", help="remove everything selena created on this host")
    p.set_defaults(func=cmd_clean)


def _templates() -> set[str] | None:
    if not TEMPLATE_ROOT.is_dir():
        return None
    return {p.name for p in TEMPLATE_ROOT.iterdir() if (p / "template.yaml").exists()}


def _load_checked(args: argparse.Namespace, runner: Runner):
    topo, actions = loader.load(args.scenario, tdf=args.tdf, link_spec=args.link)
    templates = _templates()
    validate(topo, templates=templates, host_free_mb=XlBackend(runner).host_free_mb(),
             switch_profiles=switch_profiles())
    return topo, actions, templates


def cmd_validate(args: argparse.Namespace) -> int:
    topo, actions, templates = _load_checked(args, Runner())
    hosts = sum(1 for n in topo.nodes.values() if n.kind.value == "host")
    print(f"{args.scenario}: valid: experiment {topo.name}, TDF {topo.tdf:g}, {hosts} hosts, "
          f"{len(topo.nodes) - hosts} other nodes, {len(topo.links)} links, "
          f"{len(topo.hubs)} hubs, {len(actions)} scenario actions")
    if templates is None:
        print("  (guest templates not checked: none installed on this host)")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    runner = Runner()
    topo, _, _ = _load_checked(args, runner)
    plan = make_plan(topo, bridge_kind=args.bridge, placement=Placement(args.shaping))
    backend = XlBackend(runner, DEFAULT_STATE_DIR, offloads=args.offload)
    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    state = backend.deploy(plan, progress=say, warm=args.warm)
    if args.wait > 0:
        late = backend.wait_up(state, args.wait, progress=say)
        if late:
            # The guests keep running: slow boots (high TDF under emulation) are not failures.
            say(f"not up after {args.wait:g} s (still booting?): {', '.join(late)}")
    has_switches = any(n.kind.value == "switch" for n in topo.nodes.values())
    if args.shaping == "guest" or has_switches:
        _configure_guests(topo, plan, state, max(args.wait, 600.0), say)
    for name, domid in state.domains.items():
        print(f"{name}\t{domid}")
    return 0


def _configure_guests(topo, plan, state, timeout: float, say) -> None:
    """Through the agents: guest-side shaping, then the switches' bridges
    (and switch models). On failure the deploy is undone."""
    from selena.control.channel import Controller
    from selena.control.xenstore import XenstoreConnection
    from selena.openflow import Switches
    from selena.shaping.guest import apply_guest_shaping

    try:
        with XenstoreConnection() as xs:
            ctl = Controller(xs, tdf=plan.tdf)
            try:
                for guest in plan.guests:
                    ctl.add_guest(guest.node, state.domains[guest.domain_name])
                ctl.wait_ready(timeout)
                apply_guest_shaping(ctl, plan, progress=say)
                Switches(ctl, topo).configure(progress=say)
            finally:
                ctl.close()
    except BaseException:
        say(f"configuring the guests failed: removing {plan.experiment}")
        XlBackend(Runner(), DEFAULT_STATE_DIR).destroy(plan.experiment)
        raise


def cmd_status(args: argparse.Namespace) -> int:
    states = XlBackend(state_dir=DEFAULT_STATE_DIR).status()
    if args.json:
        print(json.dumps(states, indent=1))
        return 0
    if not states:
        print("no experiments deployed")
    for s in states:
        print(f"{s['experiment']}: TDF {s['tdf']:g}, {len(s['domains'])} guests, "
              f"{len(s['bridges'])} bridges")
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    XlBackend(state_dir=DEFAULT_STATE_DIR).destroy(args.experiment, pool=args.pool)
    print(f"{'pooled the guests of' if args.pool else 'destroyed'} {args.experiment}")
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    backend = XlBackend(state_dir=DEFAULT_STATE_DIR)
    backend.freeze(backend.load(args.experiment))
    print(f"paused {args.experiment}: its virtual time stands still")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    backend = XlBackend(state_dir=DEFAULT_STATE_DIR)
    backend.thaw(backend.load(args.experiment))
    print(f"resumed {args.experiment}")
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    removed = XlBackend(state_dir=Path(DEFAULT_STATE_DIR)).clean()
    print("removed: " + (", ".join(removed) if removed else "nothing"))
    return 0
