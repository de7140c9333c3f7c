"""`python3 -m selena.lab.control_from DIR MODULE [ARG...]`: run MODULE (as
`python3 -m MODULE ARG...` would) with the modules of selena.control taken
from DIR, another revision's (`selena lab bench-control --baseline` exports
it), and every other module from this tree: two revisions of the control
channel measured in one lab boot, where boots differ more than the change.

Only the standard library is imported here: nothing of selena.control may
be loaded before the swap.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = "selena.control"


class ControlFrom(importlib.abc.MetaPathFinder):
    """Finds selena.control's submodules in `directory` (those it holds)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PACKAGE + "."):
            return None
        source = self.directory / (fullname[len(PACKAGE) + 1:].replace(".", "/") + ".py")
        if not source.is_file():
            return None
        return importlib.util.spec_from_file_location(fullname, source)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python3 -m selena.lab.control_from DIR MODULE [ARG...]", file=sys.stderr)
        return 2
    directory, module, *args = argv
    if not (Path(directory) / "channel.py").is_file():
        print(f"control_from: {directory} holds no channel.py: give the directory of "
              f"another revision's selena/control", file=sys.stderr)
        return 2
    loaded = sorted(name for name in sys.modules if name.startswith(PACKAGE + "."))
    if loaded:
        print(f"control_from: {', '.join(loaded)} already imported; nothing may import "
              f"{PACKAGE} before the swap", file=sys.stderr)
        return 2
    sys.meta_path.insert(0, ControlFrom(Path(directory).resolve()))
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
