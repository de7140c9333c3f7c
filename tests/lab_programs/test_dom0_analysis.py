"""LabBuilder.analysis(): the `analysis` extra (scipy, matplotlib) for the
lab's Dom0 (issue 29 item 2), pinned wheels installed by pip into a
directory of their own, once per pinned list; a failed install leaves
nothing the next build would take for finished."""

import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from fake_runner import FakeRunner

from selena.errors import CommandError
from selena.lab.build import DOM0_ANALYSIS, LabBuilder
from selena.runner import CommandResult


class PipRunner(FakeRunner):
    """pip's --target directory gets a module, as pip would leave it."""

    fail: bool = False

    def run(self, argv: Sequence[str], **kwargs: object) -> CommandResult:
        result = super().run(argv, check=False)
        args = list(argv)
        target = Path(args[args.index("--target") + 1])
        target.mkdir(parents=True)
        (target / "scipy").mkdir()
        if self.fail:
            raise CommandError(args, 1, "no matching distribution")
        return result


def test_the_pinned_wheels_go_into_their_own_directory_once(tmp_path):
    runner = PipRunner()
    builder = LabBuilder(runner=runner, root=tmp_path)
    first = builder.analysis()
    assert (first / "scipy").is_dir() and first.name.startswith("dom0-analysis-")
    (call,) = runner.calls
    assert call[:4] == (sys.executable, "-m", "pip", "install")
    # Every wheel pinned and named: nothing resolved at build time.
    assert call[-len(DOM0_ANALYSIS):] == DOM0_ANALYSIS
    assert all("==" in pin for pin in DOM0_ANALYSIS)
    assert "--no-deps" in call and "--only-binary=:all:" in call
    assert call[call.index("--python-version") + 1] == "3.11"
    assert call[call.index("--target") + 1] == str(first) + ".partial"
    assert builder.analysis() == first and len(runner.calls) == 1


def test_a_failed_install_is_not_taken_for_finished(tmp_path):
    runner = PipRunner()
    runner.fail = True
    builder = LabBuilder(runner=runner, root=tmp_path)
    with pytest.raises(CommandError):
        builder.analysis()
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".partial")]
    runner.fail = False
    done = builder.analysis()
    assert (done / "scipy").is_dir() and len(runner.calls) == 2
