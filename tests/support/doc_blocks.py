"""The command blocks of a documentation page, as a test runs them.

A command block is a fence opened with ```sh whose first line says where the
lab runs it:

    # lab: dom0                      run in the lab's Dom0, in page order
    # lab: skip (REASON)             shown to users, never run: REASON says why

docs/host.md marks every block so; tests/test_host_doc.py checks that, and
tests/lab/test_host_doc_e2e.py runs the dom0 blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE_OPEN = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^#\s*lab:\s*(?P<where>\S+?)(?:\s+\((?P<reason>.*)\))?\s*$")
WHERE = ("dom0", "skip")


@dataclass(frozen=True)
class Block:
    """One ```sh block: where it runs, why not (skip), its lines after the
    marker, and the line of the page its fence opens on (1-based)."""

    line: int
    where: str | None          # None: no marker, or one this module does not know
    reason: str
    body: str
    marker: str                # the first line as written

    @property
    def runs(self) -> bool:
        return self.where == "dom0"


def fences(text: str) -> list[tuple[int, str, str]]:
    """Every fenced block of a page: (line of its opening fence, language,
    body). An unclosed fence is an error: the rest of the page would vanish."""
    out: list[tuple[int, str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = FENCE_OPEN.match(lines[i])
        if not opened:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i >= len(lines):
            raise ValueError(f"line {start + 1}: fence never closed")
        out.append((start + 1, opened.group(1), "\n".join(body) + "\n"))
        i += 1
    return out


def command_blocks(text: str) -> list[Block]:
    """The ```sh blocks of a page, in order, with their markers read."""
    blocks = []
    for line, language, body in fences(text):
        if language != "sh":
            continue
        first, _, rest = body.partition("\n")
        marker = MARKER.match(first.strip())
        where = marker.group("where") if marker else None
        blocks.append(Block(line=line, where=where if where in WHERE else None,
                            reason=((marker.group("reason") or "").strip() if marker else ""),
                            body=rest if marker else body, marker=first))
    return blocks


def page_blocks(path: Path) -> list[Block]:
    return command_blocks(path.read_text())


def problems(blocks: list[Block]) -> list[str]:
    """What makes a page's blocks untestable: a block with no known marker,
    a skip without its reason, a block with no command."""
    found = []
    for b in blocks:
        if b.where is None:
            found.append(f"line {b.line}: no `# lab: dom0` or `# lab: skip (reason)` "
                         f"marker (first line: {b.marker!r})")
        elif b.where == "skip" and not b.reason:
            found.append(f"line {b.line}: `# lab: skip` without a reason in parentheses")
        if not any(ln.strip() and not ln.lstrip().startswith("#")
                   for ln in b.body.splitlines()):
            found.append(f"line {b.line}: no command in the block")
    return found


def dom0_script(blocks: list[Block], workdir: str, prelude: tuple[str, ...] = ()) -> str:
    """One sh script that runs each dom0 block in its own `sh -e`, in order,
    framed by `HOSTDOC-BEGIN N` and `HOSTDOC-END N rc=RC seconds=S` lines
    (N: the block's line in the page). A failing block does not stop the
    next: the test reports every failure. The lab's Dom0 runs as root and
    has no sudo: a `sudo` that runs its arguments stands in (also where one
    exists, whose env_reset would drop the prelude's environment). `prelude`:
    shell lines run first (what a skipped block would have set up)."""
    parts = [f"d={workdir}", "rm -rf $d; mkdir -p $d/bin",
             "printf '#!/bin/sh\\nexec \"$@\"\\n' > $d/bin/sudo; chmod +x $d/bin/sudo",
             "export PATH=$d/bin:$PATH", *prelude]
    for b in blocks:
        if not b.runs:
            continue
        end = f"HOSTDOC_BLOCK_{b.line}"
        if re.search(rf"^{end}$", b.body, re.M):
            raise ValueError(f"line {b.line}: the block contains its own delimiter {end}")
        parts += [f"cat > $d/block-{b.line}.sh <<'{end}'", b.body.rstrip("\n"), end,
                  f"echo HOSTDOC-BEGIN {b.line}",
                  "t0=$(date +%s)",
                  f"sh -e $d/block-{b.line}.sh </dev/null; rc=$?",
                  f"echo HOSTDOC-END {b.line} rc=$rc seconds=$(( $(date +%s) - t0 ))"]
    return "\n".join(parts) + "\n"


END_LINE = re.compile(r"^HOSTDOC-END (\d+) rc=(\d+) seconds=(\d+)$", re.M)


def outputs(output: str) -> dict[int, tuple[int, str]]:
    """Per block line: (exit status, what it printed), from a dom0_script run."""
    found: dict[int, tuple[int, str]] = {}
    output = output.replace("\r\n", "\n")
    for m in END_LINE.finditer(output):
        line = int(m.group(1))
        begin = output.rfind(f"HOSTDOC-BEGIN {line}\n", 0, m.start())
        text = output[begin:m.start()].split("\n", 1)[1] if begin >= 0 else ""
        found[line] = (int(m.group(2)), text)
    return found
