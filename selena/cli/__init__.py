"""The `selena` command line: parses, calls the experiment lifecycle (or the
lab), prints. Nothing here creates guests or runs xl itself.

Each verb group is a module listed in SUBCOMMAND_MODULES exposing
`register(subparsers)`, which adds parsers whose `func` attribute takes the
parsed arguments and returns an exit status.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from selena import __version__
from selena.errors import ScenarioFileError, SelenaError

SUBCOMMAND_MODULES: list[str] = ["selena.cli.experiment", "selena.cli.sweep", "selena.cli.advise",
                                   "selena.cli.host",
                                   "selena.lab.cli"]


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


def report(exc: SelenaError) -> None:
    """An error as a user should see it: one message naming the item; for a
    mistake in their scenario file, its file:line and their own frames."""
    print(f"selena: error: {exc}", file=sys.stderr)
    if isinstance(exc, ScenarioFileError) and exc.user_traceback:
        print("in your scenario (most recent call last):\n" + exc.user_traceback.rstrip(),
              file=sys.stderr)


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
        report(exc)
        return 1
    except KeyboardInterrupt as exc:
        # SIGTERM/SIGHUP during an experiment arrive as a KeyboardInterrupt
        # that names its signal (selena.experiment.SignalInterrupt).
        name = getattr(exc, "name", None)
        print(f"selena: interrupted{f' by {name}' if name else ''}", file=sys.stderr)
        return 128 + int(getattr(exc, "signum", 2))


if __name__ == "__main__":
    sys.exit(main())
