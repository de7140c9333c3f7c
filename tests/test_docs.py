"""The README is a short front page, and the documentation's links hold:
every relative link in README.md and docs/*.md names a file that exists
and, with a #fragment, a heading of that file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", _prose(path.read_text()),
                                                   re.M)}


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def test_the_readme_is_a_front_page_of_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= 200


def test_the_readme_gives_exactly_the_two_set_up_commands():
    text = README.read_text()
    section = text.split("## Try it", 1)[1].split("\n## ", 1)[0]
    (block,) = _code_blocks(section, "")
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo TDF=10", "make test"]


def test_the_readmes_python_examples_parse():
    blocks = _code_blocks(README.read_text(), "python")
    assert blocks
    for block in blocks:
        ast.parse(block)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in _anchors(resolved):
            broken.append(f"{target}: no heading #{fragment}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
