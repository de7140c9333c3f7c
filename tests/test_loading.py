"""Loading a scenario never runs an experiment (issue 30, item 1): validate,
plan, advise and sweep of a file that drives its own `Experiment` check its
topology (captured where it constructs the Experiment) and call no Dom0 tool;
run refuses it; a file that describes nothing says what it likely forgot."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import pytest

from selena.advise import Calibration
from selena.cli import main
from selena.errors import ScenarioError
from selena.experiment import Experiment
from selena.loader import checking_only, load_scenario

SCENARIOS = Path(__file__).parents[1] / "scenarios"

# Every tool a deploy runs in Dom0; `selena-tdf host` (what this host has)
# is the one read-only query a check may make.
DOM0_TOOLS = ("xl", "ovs-vsctl", "ovs-ofctl", "ip", "tc", "brctl", "ethtool", "selena-tdf",
              "xenstore-write", "xenstore-read", "xenstore-rm", "xenstore-chmod", "mn")


def _readme_script() -> str:
    """The README's "A first experiment" block as a newcomer saves it (not a
    copy that could drift from it), and a last line that shows whether the
    script's body ran past its `with Experiment(...)`."""
    text = (SCENARIOS.parent / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "the README has one Python block: its first experiment"
    assert "with Experiment(" in blocks[0]
    return blocks[0] + 'open(__file__ + ".ran", "w").write("the body ran")\n'


README_SCRIPT = _readme_script()


@pytest.fixture
def dom0_log(tmp_path, monkeypatch) -> Path:
    """A PATH of stand-ins for every Dom0 tool, each logging its call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "dom0.log"
    for tool in DOM0_TOOLS:
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\necho "{tool} $*" >> {log}\nexit 0\n')
        stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def dom0_calls(log: Path) -> list[str]:
    calls = log.read_text().splitlines() if log.exists() else []
    return [c for c in calls if c != "selena-tdf host"]


@pytest.fixture
def readme_script(tmp_path) -> Path:
    path = tmp_path / "pair.py"
    path.write_text(README_SCRIPT)
    return path


@pytest.fixture
def calibration_file(tmp_path) -> Path:
    return Calibration(9.0, 0.0, 1.0, 40.0, {}, [], [], host="lab").save(tmp_path / "cal.json")


@pytest.mark.parametrize("which", ["readme", "script_experiment"])
def test_validate_plan_and_advise_of_a_script_run_nothing(which, readme_script, dom0_log,
                                                          calibration_file, capsys):
    path = readme_script if which == "readme" else SCENARIOS / "script_experiment.py"
    assert main(["validate", str(path)]) == 0
    assert "valid: experiment" in capsys.readouterr().out
    assert main(["plan", str(path)]) == 0
    assert "xl create" in capsys.readouterr().out     # printed, not run
    assert main(["advise", str(path), "--calibration", str(calibration_file)]) in (0, 1)
    assert "TDF" in capsys.readouterr().out
    assert dom0_calls(dom0_log) == []
    assert not Path(f"{readme_script}.ran").exists()


def test_a_script_s_topology_is_the_one_its_experiment_was_given(readme_script):
    scenario = load_scenario(str(readme_script))
    assert sorted(scenario.topology.nodes) == ["h1", "h2"]
    assert scenario.topology.tdf == 10 and scenario.runs_itself
    shipped = load_scenario(str(SCENARIOS / "script_experiment.py"))
    assert sorted(shipped.topology.nodes) == ["h1", "h2"]
    assert shipped.topology.tdf == 5         # its --tdf default, given to Experiment(tdf=)


def test_run_and_sweep_refuse_a_script_and_run_nothing(readme_script, dom0_log, tmp_path,
                                                      capsys):
    assert main(["run", str(readme_script)]) == 1
    err = capsys.readouterr().err
    assert "this file runs its own experiment: run it with python3 in Dom0" in err
    assert main(["sweep", str(readme_script), "--tdf", "1,2", "--out",
                 str(tmp_path / "sweep")]) == 1
    assert "runs its own experiment" in capsys.readouterr().err
    assert dom0_calls(dom0_log) == []
    with pytest.raises(ScenarioError, match="runs its own experiment"):
        Experiment(str(readme_script))
    with checking_only():
        assert Experiment(str(readme_script), templates=None).topology.name == "pair"


def test_a_script_whose_experiment_is_in_a_try_block_is_still_stopped(tmp_path, dom0_log):
    path = tmp_path / "s.py"
    path.write_text("from selena import Experiment\nfrom selena.model import Topology\n"
                    "t = Topology('x')\nt.add_host('h1')\n"
                    "try:\n    Experiment(t).deploy()\nexcept Exception:\n    pass\n"
                    "raise SystemExit('went on')\n")
    assert sorted(load_scenario(str(path)).topology.nodes) == ["h1"]
    assert dom0_calls(dom0_log) == []


def test_build_without_return_is_named(tmp_path):
    path = tmp_path / "b.py"
    path.write_text("from selena.model import Topology\n\n"
                    "def build():\n    topo = Topology('b')\n    topo.add_host('h1')\n")
    with pytest.raises(ScenarioError, match=r"b.py:3: build\(\) returned None: did build\(\) "
                                            r"forget `return topo`\?"):
        load_scenario(str(path))


def test_a_param_build_does_not_take_is_named_with_the_ones_it_does(tmp_path):
    """--param against build()'s signature before build() runs: a misspelt
    name, a missing required one, a build() that takes none; build() taking
    **kwargs takes any."""
    path = tmp_path / "p.py"
    path.write_text("from selena.model import Topology\n\n"
                    "def build(n, rate_mbit=10):\n    raise SystemExit('build ran')\n")
    with pytest.raises(ScenarioError, match=r"^.*p.py:3: --param: build\(\) got an unexpected "
                                            r"keyword argument 'rate' \(its parameters: n, "
                                            r"rate_mbit; --param NAME=VALUE sets one\)$"):
        load_scenario(str(path), params={"n": 2, "rate": 5})
    with pytest.raises(ScenarioError, match=r"build\(\) missing a required argument: 'n'"):
        load_scenario(str(path), params={"rate_mbit": 5})
    path.write_text("from selena.model import Topology\n\n"
                    "def build():\n    raise SystemExit('build ran')\n")
    with pytest.raises(ScenarioError, match=r"unexpected keyword argument 'a' \(it takes "
                                            r"none: drop --param\)$"):
        load_scenario(str(path), params={"a": 1})
    path.write_text("from selena.model import Topology\n\n"
                    "def build(**params):\n    topo = Topology('k')\n"
                    "    topo.add_host('h1')\n    return topo\n")
    assert load_scenario(str(path), params={"anything": 1}).params == {"anything": 1}


def test_a_topology_under_another_name_is_named(tmp_path):
    path = tmp_path / "t.py"
    path.write_text("from selena.model import Topology\n"
                    "topo = Topology('t')\ntopo.add_host('h1')\n")
    with pytest.raises(ScenarioError, match="a Topology named `topo`: name it `topology`"):
        load_scenario(str(path))


def test_a_file_that_declares_nothing_says_what_a_scenario_declares(tmp_path):
    """Was validation's "experiment x: the topology has no nodes", of a
    topology the file never declared (a benchmark script, an empty file)."""
    for text in ("", "import sys\nx = 1\n"):
        path = tmp_path / "x.py"
        path.write_text(text)
        with pytest.raises(ScenarioError, match=r"^\S*x\.py: no topology found: declare "
                                                r"`topology = Topology\(\.\.\.\)`, a build\(\) "
                                                r"that returns one, or construct an Experiment"):
            load_scenario(str(path))
    # A declared topology without nodes is validation's to name, as before.
    path = tmp_path / "y.py"
    path.write_text("from selena.model import Topology\ntopology = Topology('y')\n")
    assert not load_scenario(str(path)).topology.nodes


MININET_SCRIPT = """\
from mininet.topo import Topo
from mininet.net import Mininet

class Pair(Topo):
    def build(self):
        self.addLink(self.addHost('h1'), self.addHost('h2'))

def main():
    net = Mininet(topo=Pair())
    net.start()
    net.stop()

if __name__ == '__main__':
    main()
"""


@pytest.mark.parametrize("verb", ["validate", "plan", "run"])
def test_a_file_importing_mininet_itself_is_refused_before_any_of_it_runs(
        verb, tmp_path, monkeypatch, capsys):
    """With Mininet installed, `selena validate` of Mininet's own kind of
    script ran it: an installed Mininet (a stand-in here) was constructed
    and started. Now the import is named, with the fix, and nothing runs."""
    installed = tmp_path / "site" / "mininet"
    installed.mkdir(parents=True)
    ran = tmp_path / "ran"
    (installed / "__init__.py").write_text("")
    (installed / "topo.py").write_text(
        "class Topo:\n    def __init__(self):\n        self.build()\n"
        "    def addHost(self, name):\n        return name\n"
        "    def addLink(self, a, b):\n        pass\n")
    (installed / "net.py").write_text(
        f"class Mininet:\n    def __init__(self, topo):\n        open({str(ran)!r}, 'a')"
        ".write('constructed')\n    def start(self):\n        pass\n"
        "    def stop(self):\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in [n for n in sys.modules if n == "mininet" or n.startswith("mininet.")]:
        monkeypatch.delitem(sys.modules, name)
    script = tmp_path / "simple.py"
    script.write_text(MININET_SCRIPT)
    assert main([verb, str(script)]) != 0
    assert not ran.exists(), "the installed Mininet ran"
    err = capsys.readouterr().err
    assert f"{script}:1: imports mininet.topo, Mininet itself, which loading the file would " \
           "run instead of selena: for selena, import from selena.mininet (from " \
           "selena.mininet.net import Mininet; docs/topologies.md)" in err, err
    # A custom file given as a scenario is pointed at --custom.
    script.write_text("from mininet.topo import Topo\ntopos = {'t': Topo}\n")
    with pytest.raises(ScenarioError, match=rf"simple.py:1: imports mininet.topo, .*: its "
                                            rf"`topos` load with --custom {script} --topo NAME$"):
        load_scenario(str(script))


def test_a_script_that_exits_on_its_arguments_says_so(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("import argparse\nfrom selena import Experiment\n"
                    "p = argparse.ArgumentParser()\np.add_argument('--out', required=True)\n"
                    "p.parse_args()\n")
    with pytest.raises(ScenarioError, match="exited .status 2. while selena loaded it"):
        load_scenario(str(path))


def test_a_path_that_is_not_a_py_file_is_named_as_such(tmp_path):
    """A path (no --topo spec has a '/') was read as an unknown topology."""
    (tmp_path / "notes.txt").write_text("x")
    for source, what in ((tmp_path, "a directory"), (tmp_path / "notes.txt", "not a .py file"),
                         (tmp_path / "gone", "no such file")):
        with pytest.raises(ScenarioError, match=rf"^{source}: {what}: give a scenario file "
                                                r"\(FILE\.py\) or a --topo spec"):
            load_scenario(str(source))
