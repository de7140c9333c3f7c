"""The `selena` command line: parses, calls the experiment lifecycle (or a
plugin's commands: the lab's), prints. Nothing here creates guests or runs xl
itself.

Each verb group is a module exposing `register(subparsers)`, which adds
parsers whose `func` attribute takes the parsed arguments and returns an exit
status: the product's own, listed in SUBCOMMAND_MODULES, and those other
packages declare as entry points in the PLUGIN_GROUP group (the lab,
selena.lab.cli, through pyproject.toml), so the product never imports them.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from importlib.metadata import entry_points
from types import ModuleType

from selena import __version__
from selena.cli.args import mn_only_option
from selena.errors import ScenarioFileError, SelenaError

SUBCOMMAND_MODULES: list[str] = ["selena.cli.experiment", "selena.cli.sweep", "selena.cli.advise",
                                   "selena.cli.host", "selena.cli.reproduce"]
# Entry points (name = "module") whose modules add verb groups.
PLUGIN_GROUP = "selena.commands"
# Commands a plugin of this source tree adds, for a clear error when the
# install predates its entry point (the metadata is written by pip install).
KNOWN_PLUGINS = {"lab": "selena.lab.cli"}


def plugin_modules() -> dict[str, ModuleType]:
    """The installed plugins' modules by entry-point name (the first of a
    name wins: an install and a source tree may both declare it)."""
    found: dict[str, ModuleType] = {}
    for point in entry_points(group=PLUGIN_GROUP):
        if point.name not in found:
            found[point.name] = point.load()
    return found


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
    for module in plugin_modules().values():
        module.register(subparsers)
    return parser


def missing_plugin(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """The one-line error for a known plugin command this install did not
    register (its entry point is missing), else None."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] not in KNOWN_PLUGINS:
        return None
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if words[0] in commands.choices:
        return None
    return (f"`selena {words[0]}` is not registered: this install has no {PLUGIN_GROUP} "
            f"entry point {words[0]} = {KNOWN_PLUGINS[words[0]]}; reinstall selena from its "
            f"source tree (pip install -e .)")


def report(exc: SelenaError) -> None:
    """An error as a user should see it: one message naming the item; for a
    mistake in their scenario file, its file:line and their own frames."""
    print(f"selena: error: {exc}", file=sys.stderr)
    if isinstance(exc, ScenarioFileError) and exc.user_traceback:
        print("in your scenario (most recent call last):\n" + exc.user_traceback.rstrip(),
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    given = sys.argv[1:] if argv is None else argv
    missing = missing_plugin(parser, given) or mn_only_option(given)
    if missing:
        print(f"selena: error: {missing}", file=sys.stderr)
        return 2
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
