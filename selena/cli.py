"""The `selena` command line.

Each subsystem owns its subcommands: a module listed in SUBCOMMAND_MODULES
exposes `register(subparsers)`, which adds parsers whose `func` attribute
takes the parsed arguments and returns an exit status.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from selena import __version__
from selena.errors import SelenaError

SUBCOMMAND_MODULES: list[str] = ["selena.core_cli", "selena.run_cli", "selena.lab.cli"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="selena",
        description="Reproducible network experiments on Xen with time dilation.",
    )
    parser.add_argument("--version", action="version", version=f"selena {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more logging (-vv for every command run)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except SelenaError as exc:
        print(f"selena: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("selena: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
