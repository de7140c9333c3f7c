"""selena: reproducible network experiments on Xen with time dilation.

`selena.Experiment` is the lifecycle every front end drives (see
selena/experiment.py); `selena.model.Topology` describes what to build.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Imported on first use: `import selena` stays cheap for the CLI and tools.
    if name == "Experiment":
        from selena.experiment import Experiment

        return Experiment
    if name == "Topology":
        from selena.model import Topology

        return Topology
    raise AttributeError(f"module 'selena' has no attribute {name!r}")
