"""Reading a results bundle's per-command outputs in tests."""

import json
from pathlib import Path


def node_outputs(bundle: Path, node: str) -> list[tuple[dict, str]]:
    """(command info, stdout) of each command a node ran, in order."""
    base = bundle / "nodes" / node
    found = []
    for info in sorted(base.glob("*.json"), key=lambda p: int(p.stem)):
        found.append((json.loads(info.read_text()),
                      (base / f"{info.stem}.stdout").read_text(errors="replace")))
    return found
