"""Load a file of scenarios/ as a module, for unit tests of its logic."""

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
