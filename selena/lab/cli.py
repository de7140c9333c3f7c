"""`selena lab ...`: build and use the QEMU lab."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from selena import units
from selena.cli.args import tdf_arg, tdf_list_arg
from selena.errors import LabError
from selena.lab.bench_bandwidth import DEFAULT_REFINE, DEFAULT_TDFS
from selena.lab.build import LabBuilder
from selena.lab.dom0 import HVM_CLOCKSOURCES
from selena.lab.qemu import DOM0_MEMORY_MB, QEMU_MEMORY_MB, Lab
from selena.model.topology import GUEST_TYPES
from selena.paths import project_root
from selena.templates.images import scenario_variants, scenarios_need_debian


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# Dom0 plus room for at least a few guests; above this QEMU's own allocation
# is the limit, not selena's.
LAB_MEMORY_MIN_MB = DOM0_MEMORY_MB + 512
LAB_MEMORY_MAX_MB = 65536


def lab_memory_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--memory: not a whole number of MB: {text!r}") from None
    if not LAB_MEMORY_MIN_MB <= value <= LAB_MEMORY_MAX_MB:
        raise argparse.ArgumentTypeError(
            f"--memory: {value} MB is outside {LAB_MEMORY_MIN_MB}..{LAB_MEMORY_MAX_MB} "
            f"(Dom0 alone keeps {DOM0_MEMORY_MB} MB)")
    return value


def tdf_text_arg(text: str) -> str:
    """TDFs separated by commas ("1,10"), checked here, before the lab boots
    (the program in Dom0 would say so minutes later); passed on as text."""
    tdfs = tdf_list_arg(text.replace(" ", ","))
    if not tdfs:
        raise argparse.ArgumentTypeError(f"{text!r}: want TDFs separated by commas, e.g. 1,10")
    return ",".join(units.tdf_text(t) for t in tdfs)


def count_arg(text: str) -> int:
    """A whole number from 1 (commands, guests, vCPUs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: want 1 or more")
    return value


def count_list_arg(text: str) -> str:
    """Whole numbers from 1 separated by commas ("1,4,8"); passed on as given."""
    items = [t for t in text.replace(" ", ",").split(",") if t]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r}: want numbers separated by commas, "
                                         "e.g. 1,4,8")
    for item in items:
        count_arg(item)
    return ",".join(items)


def _positive(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what}") from None
    if not 0 < value < float("inf"):                    # and not NaN
        raise argparse.ArgumentTypeError(f"{text}: want a number of {what} above 0")
    return value


def positive_seconds_arg(text: str) -> float:
    return _positive(text, "seconds")


def mbit_arg(text: str) -> str:
    """A rate in Mbit/s above 0, passed on as given."""
    _positive(text, "Mbit/s")
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    lab = subparsers.add_parser("lab", help="the QEMU lab: patched Xen + Debian Dom0")
    sub = lab.add_subparsers(dest="lab_command", metavar="LAB_COMMAND")

    build = sub.add_parser("build", help="build (or find cached) every lab artefact")
    build.add_argument("--scenario", action="append", default=[], type=Path, metavar="FILE",
                       help="also build the Debian package variants FILE's nodes ask for "
                            "(packages=[...]) and, when its nodes use them, the debian "
                            "templates; repeatable")
    build.add_argument("--with", dest="with_", action="append", default=[], choices=("debian",),
                       help="also build the debian template and those based on it "
                            "(qjump-host); otherwise built only when a --scenario needs them")
    build.set_defaults(func=cmd_build)

    run = sub.add_parser("run", help="boot the lab and run COMMAND in Dom0")
    run.add_argument("--tdf", type=tdf_arg, default=None,
                     help="exported to COMMAND as SELENA_TDF")
    run.add_argument("--timeout", type=positive_seconds_arg, default=3600.0,
                     help="real seconds before the lab is stopped (default 3600)")
    run.add_argument("--memory", type=lab_memory_arg, default=QEMU_MEMORY_MB, metavar="MB",
                     help=f"the emulated machine's RAM in MB (default {QEMU_MEMORY_MB}; "
                          f"Dom0 keeps {DOM0_MEMORY_MB}, guests share the rest)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    run.add_argument("--scenario", action="append", default=[], type=Path, metavar="FILE",
                     help="build the Debian package variants FILE's nodes ask for first "
                          "(and the debian templates, when its nodes use them)")
    run.add_argument("--with", dest="with_", action="append", default=[], choices=("debian",),
                     help="boot with the debian template and those based on it")
    run.set_defaults(func=cmd_run)

    shell = sub.add_parser("shell", help="an interactive Dom0 shell")
    shell.set_defaults(func=cmd_shell)

    clock = sub.add_parser("check-clock",
                           help="prove in a lab guest that clocks and timers follow the TDF")
    clock.add_argument("--tdf", type=tdf_arg, action="append", required=True,
                       help="TDF to check, decimals allowed (repeatable)")
    clock.add_argument("--no-change", action="store_true",
                       help="skip changing the TDF of the running guest")
    clock.add_argument("--change-to", type=tdf_text_arg,
                       help="TDFs to change the running guest to, e.g. 2,10,1")
    clock.add_argument("--vcpus", type=count_arg, default=1, help="guest vCPUs (default 1)")
    clock.add_argument("--tsc", choices=("native", "emulate"),
                       help="guest TSC mode (default: Xen's default mode)")
    clock.add_argument("--guest", choices=GUEST_TYPES, default="pv",
                       help="guest type: pv (default), pvh (the same checks in a PVH guest) "
                            "or hvm (on Dom0's device model; the RTC and PIT are checked too)")
    clock.add_argument("--clocksource", choices=HVM_CLOCKSOURCES,
                       help="with --guest hvm: the counter the guest's clocks read "
                            f"(default {HVM_CLOCKSOURCES[0]})")
    clock.add_argument("--save-restore", action="store_true",
                       help="save and restore the guest mid-run (xl save/restore, Dom0's "
                            "wall clock moved in between) and check its clocks across")
    clock.add_argument("--migrate", action="store_true",
                       help="migrate the guest to the same host mid-run (xl migrate; after "
                            "the save/restore with both) and check its clocks across")
    clock.set_defaults(func=cmd_check_clock)

    bclock = sub.add_parser("bench-clock",
                            help="ns per clock_gettime and per RDTSC in a guest, "
                                 "dilated or not, native or emulated TSC")
    bclock.set_defaults(func=cmd_bench_clock)

    demo = sub.add_parser("demo", help="the shipped demo scenario in the lab at TDF 1 and at "
                                       "TDF N, side by side")
    demo.add_argument("--tdf", type=tdf_arg, default=10.0,
                      help="the dilated run's TDF (default 10)")
    demo.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help="print lab build, boot and guest figures")
    bench.set_defaults(func=cmd_bench)

    ctl = sub.add_parser("bench-control",
                         help="control-channel round trips vs. subprocess xenstore tools")
    ctl.add_argument("--commands", type=count_arg, default=1000)
    ctl.add_argument("--baseline-commands", type=count_arg, default=200,
                     help="commands for the (much slower) subprocess approach")
    ctl.add_argument("--guests", type=count_arg, default=8)
    ctl.add_argument("--split-cpus", action="store_true",
                     help="Dom0 on one vCPU pinned to CPU 0, the guests on the other CPUs")
    ctl.add_argument("--beside-xenstored", action="store_true",
                     help="run each case again with selena's and xenstored's threads on "
                          "one Dom0 vCPU, then with selena's alone there")
    ctl.add_argument("--baseline", metavar="REV",
                     help="also run it with REV's control channel (selena/control), in the "
                          "same boot, interleaved, and compare selena's Dom0 CPU per command")
    ctl.add_argument("--repeat", type=int, metavar="N",
                     help="with --baseline: runs of each (default 2)")
    ctl.set_defaults(func=cmd_bench_control)

    dep = sub.add_parser("bench-deploy", help="selena deploy of N guests vs. raw xl create")
    dep.add_argument("--sizes", type=count_list_arg, default="1,4,8",
                     help="guest counts (default 1,4,8)")
    dep.add_argument("--parallel", type=count_list_arg, default="4",
                     help="guests created at a time; several (1,2,4) to compare")
    dep.set_defaults(func=cmd_bench_deploy)

    guests = sub.add_parser("bench-guests",
                            help="PV against PVH guests: boot, memory, RTT floor, clock error")
    guests.add_argument("--tdfs", type=tdf_text_arg, default="1,10", help="TDFs (default 1,10)")
    guests.set_defaults(func=cmd_bench_guests)

    bw = sub.add_parser("bench-bandwidth",
                        help="faithful bandwidth of Mininet and of selena at several TDFs")
    bw.add_argument("--tdfs", type=tdf_text_arg, default=DEFAULT_TDFS,
                    help="selena's TDFs (default %(default)s)")
    bw.add_argument("--mininet-start", type=mbit_arg, default="20",
                    help="first rate tried for Mininet, Mbit/s (default 20)")
    bw.add_argument("--refine", default=str(DEFAULT_REFINE),
                    choices=[str(n) for n in range(5)], metavar="N",
                    help="bisect each figure's doubling N times, 2: steps of 19%% "
                         "(default %(default)s)")
    bw.set_defaults(func=cmd_bench_bandwidth)

    def lab_help(args: argparse.Namespace) -> int:
        lab.print_help()
        return 2

    lab.set_defaults(func=lab_help)


def _with_debian(args: argparse.Namespace) -> bool:
    return "debian" in args.with_ or scenarios_need_debian(args.scenario)


def cmd_build(args: argparse.Namespace) -> int:
    start = time.monotonic()
    art = LabBuilder(progress=_progress).build(scenario_variants(args.scenario),
                                               with_debian=_with_debian(args))
    print(f"lab ready in {time.monotonic() - start:.1f} s")
    print(f"  xen:         {art.xen}")
    print(f"  kernel:      {art.kernel}")
    print(f"  dom0 initrd: {art.dom0_initrd}")
    print(f"  tiny-host:   {art.tiny_host_initrd}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("selena lab run: give a command after --", file=sys.stderr)
        return 2
    lab = Lab(progress=_progress, memory_mb=args.memory,
              variants=scenario_variants(args.scenario), with_debian=_with_debian(args))
    result = lab.run(command, tdf=args.tdf, timeout=args.timeout,
                     on_output=lambda line: print(line, end="", flush=True))
    _progress(f"lab: command exited {result.returncode} (boot {result.boot_seconds:.1f} s, "
              f"total {result.total_seconds:.1f} s)")
    return result.returncode


def cmd_check_clock(args: argparse.Namespace) -> int:
    if args.clocksource is not None and args.guest != "hvm":
        # Said before the lab boots: PV and PVH guests read Xen's pvclock.
        print("selena: error: --clocksource is for --guest hvm (PV and PVH guests' clocks "
              "read Xen's pvclock)", file=sys.stderr)
        return 2
    command = ["python3", "-m", "selena.lab.check_clock"]
    for tdf in args.tdf:
        command += ["--tdf", f"{tdf:g}"]
    if args.no_change:
        command.append("--no-change")
    if args.change_to:
        command += ["--change-to", args.change_to]
    if args.vcpus != 1:
        command += ["--vcpus", str(args.vcpus)]
    if args.tsc:
        command += ["--tsc", args.tsc]
    if args.guest != "pv":
        command += ["--guest", args.guest]
    if args.clocksource is not None:
        command += ["--clocksource", args.clocksource]
    if args.save_restore:
        command.append("--save-restore")
    if args.migrate:
        command.append("--migrate")
    result = Lab(progress=_progress).run(
        command, on_output=lambda line: print(line, end="", flush=True))
    return result.returncode


def cmd_bench_clock(args: argparse.Namespace) -> int:
    result = Lab(progress=_progress).run(
        ["python3", "-m", "selena.lab.bench_clock"],
        on_output=lambda line: print(line, end="", flush=True))
    return result.returncode


def cmd_demo(args: argparse.Namespace) -> int:
    from selena.lab import demo

    Lab(progress=_progress).run(["sh", "-c", demo.commands(args.tdf)], timeout=3600,
                                on_output=lambda line: print(line, end="", flush=True))
    text, ok = demo.report(demo.read_rows(project_root(), args.tdf), args.tdf)
    print(text)
    print(demo.sweep_report(project_root()))
    return 0 if ok else 1


def cmd_shell(args: argparse.Namespace) -> int:
    return Lab(progress=_progress).shell()


def cmd_bench(args: argparse.Namespace) -> int:
    from selena.lab.bench import run_bench

    return run_bench(_progress)


def cmd_bench_control(args: argparse.Namespace) -> int:
    bench_args = ["--commands", str(args.commands),
                  "--baseline-commands", str(args.baseline_commands), "--guests", str(args.guests),
                  *(["--split-cpus"] if args.split_cpus else []),
                  *(["--beside-xenstored"] if args.beside_xenstored else [])]
    if args.baseline is None and args.repeat is not None:
        raise LabError(f"--repeat {args.repeat}: it counts the runs of each tree beside "
                       f"a baseline; give --baseline REV too")
    if args.baseline is not None:
        from selena.lab.bench_control_ab import run_ab
        from selena.runner import Runner

        repeat = 2 if args.repeat is None else args.repeat
        if repeat < 1:
            raise LabError(f"--repeat {repeat}: give 1 or more runs of each")
        lines = run_ab(Lab(progress=_progress), Runner(), args.baseline, bench_args,
                       repeat, lambda text: print(text, end="", flush=True))
        print("\n".join(lines))
        return 0
    result = Lab(progress=_progress).run(
        ["python3", "-m", "selena.lab.bench_control", *bench_args],
        timeout=3600, on_output=lambda line: print(line, end="", flush=True))
    return result.returncode


def cmd_bench_bandwidth(args: argparse.Namespace) -> int:
    result = Lab(progress=_progress).run(
        ["python3", "-m", "selena.lab.bench_bandwidth", "--tdfs", args.tdfs,
         "--mininet-start", args.mininet_start, "--refine", args.refine],
        timeout=3 * 3600, on_output=lambda line: print(line, end="", flush=True))
    return result.returncode


def cmd_bench_guests(args: argparse.Namespace) -> int:
    result = Lab(progress=_progress).run(
        ["python3", "-m", "selena.lab.bench_guests", "--tdfs", args.tdfs],
        timeout=3600, on_output=lambda line: print(line, end="", flush=True))
    return result.returncode


def cmd_bench_deploy(args: argparse.Namespace) -> int:
    result = Lab(progress=_progress).run(
        ["python3", "-m", "selena.lab.bench_deploy", "--sizes", args.sizes,
         "--parallel", args.parallel],
        timeout=3600, on_output=lambda line: print(line, end="", flush=True))
    return result.returncode
