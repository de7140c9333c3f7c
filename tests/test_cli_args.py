"""The CLI's shared argument helpers live in selena/cli/args.py: the verb
modules import them from there, never from a sibling verb module."""

import argparse
import ast
from pathlib import Path

import pytest

import selena.cli.experiment
from selena.cli import args

ROOT = Path(__file__).resolve().parents[1]
VERB_MODULES = ["selena/cli/experiment.py", "selena/cli/sweep.py", "selena/cli/advise.py",
                "selena/cli/host.py", "selena/lab/cli.py"]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module}


@pytest.mark.parametrize("module", VERB_MODULES)
def test_no_verb_module_imports_helpers_from_a_sibling_verb_module(module):
    siblings = {m.removesuffix(".py").replace("/", ".") for m in VERB_MODULES} - {
        module.removesuffix(".py").replace("/", ".")}
    assert not imported_modules(ROOT / module) & siblings


def test_the_helpers_refuse_bad_values_in_one_line_and_keep_their_old_import_path():
    with pytest.raises(argparse.ArgumentTypeError, match="want NAME=VALUE"):
        args.param_arg("novalue")
    assert args.param_arg("n=3") == ("n", 3) and args.size_arg("1K") == 1024
    for bad in ("-1", "nan", "inf"):
        # inf passed the parser, then the API refused it naming ready_timeout,
        # not the option the user typed
        with pytest.raises(argparse.ArgumentTypeError, match=r"must be a finite number of "
                                                             r"seconds, 0 or more"):
            args.seconds_arg(bad)
    # Scripts written against the old home still work (re-exported).
    assert selena.cli.experiment.tdf_arg is args.tdf_arg
    assert selena.cli.experiment.scenario_of is args.scenario_of


@pytest.mark.parametrize("verb", [["validate"], ["sweep", "--tdf", "1,2", "--out", "unused"],
                                  ["advise"]])
def test_a_param_given_twice_is_refused_at_parse_time(verb, capsys):
    """A dict of the pairs kept the last one without a word."""
    from selena.cli import main
    with pytest.raises(SystemExit) as info:
        main([*verb, "scenarios/star_throughput.py", "--param", "clients=2",
              "--param", "last_s=3", "--param", "clients=3"])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "error: --param clients given twice (clients=2, clients=3): give each name once")
