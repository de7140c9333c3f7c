"""Running `selena ...` in-process, as the tests of the command line do."""

from __future__ import annotations

import pytest

from selena.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`selena ARGV`: its exit status (argparse's SystemExit included), stdout, stderr."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err
