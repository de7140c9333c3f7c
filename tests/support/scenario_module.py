"""Load a file of scenarios/ as a module, for unit tests of its logic; write
a small scenario file for tests of the command line."""

import importlib.util
from pathlib import Path
from types import ModuleType

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def load_scenario(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCENARIOS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Two hosts on one link; the run records one metric that meets its expectation.
PAIR_RECORDING = ("from selena.model import Topology\n"
                  "topology = Topology('pair')\n"
                  "a = topology.add_host('a', ip='10.0.0.1/24')\n"
                  "b = topology.add_host('b', ip='10.0.0.2/24')\n"
                  "topology.add_link(a, b)\n\n"
                  "def run(exp):\n"
                  "    exp.record('x', [1.0, 1.0], expected=1.0)\n")
