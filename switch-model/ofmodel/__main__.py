"""python3 -m ofmodel proxy|calibrate|bench ..."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ofmodel.profile import ProfileError, load_profile


def _hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"want HOST:PORT, got {text!r}")
    return host, int(port)


async def _serve(args: argparse.Namespace) -> int:
    from ofmodel.proxy import Proxy

    profile = load_profile(args.profile)
    proxy = Proxy(profile, args.controller)
    port = await proxy.start(*args.listen)
    print(f"ofmodel: profile {profile.name}; listening on {args.listen[0]}:{port}; "
          f"controller {args.controller[0]}:{args.controller[1]}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await proxy.close()
    c = proxy.counters
    print(f"ofmodel: {c.sessions} sessions; {c.to_switch} messages to the switch, "
          f"{c.to_controller} to the controller; {c.packet_in_dropped} packet_in dropped; "
          f"{c.table_full} flow_mods refused (table full); {c.malformed} malformed; "
          f"{c.failed_sessions} sessions closed on a failure",
          file=sys.stderr, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m ofmodel")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("proxy", help="run the model between a switch and its controller")
    p.add_argument("--listen", type=_hostport, default=("127.0.0.1", 6653),
                   help="where the switch connects (default 127.0.0.1:6653)")
    p.add_argument("--controller", type=_hostport, required=True, help="HOST:PORT")
    p.add_argument("--profile", required=True, help="a name in profiles/ or a YAML path")
    p = sub.add_parser("calibrate", help="measure a switch and write a profile (OFLOPS-like)")
    p.add_argument("--listen", type=_hostport, default=("0.0.0.0", 6653),
                   help="where the switch (or a model in front of it) connects")
    p.add_argument("--out", required=True, help="profile YAML to write")
    p.add_argument("--name", default="calibrated")
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--max-table", type=int, default=4096)
    p.add_argument("--rate-seconds", type=float, default=4.0)
    p = sub.add_parser("bench", help="forwarding throughput, proxy against a direct connection")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--profile", default="ideal")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="ofmodel: %(levelname)s %(message)s")
    try:
        if args.command == "proxy":
            return asyncio.run(_serve(args))
        if args.command == "calibrate":
            from ofmodel.calibrate import calibrate_main
            return asyncio.run(calibrate_main(args))
        from ofmodel.bench import bench_main
        return asyncio.run(bench_main(args))
    except ProfileError as exc:
        print(f"ofmodel: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
