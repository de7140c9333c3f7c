"""`make figures` (selena.analysis.figures): every figure and table drawn
from docs/results, deterministic, byte for byte what is committed.

Beside the lab results in docs/results, the committed fixture (tests/data/figures:
results as collect() leaves them, a page with every table mark, and the
expected PNGs and page) is what proves the pipeline: drawn again it must
give the same bytes."""

from __future__ import annotations

import json
import re
import shutil
import struct
import tomllib
from importlib.metadata import version
from pathlib import Path

import figures_fixture
import pytest

from selena.analysis.figures import INDEX_TABLE, TABLES, generate, index, install, replace_tables
from selena.errors import AnalysisError
from selena.reproduce import ALL_RUN, reproductions

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "figures"
DOCS = ROOT / "docs"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _pinned() -> str:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["figures"]
    (pin,) = [e for e in extras if e.startswith("matplotlib==")]
    return pin.split("==")[1]


def test_matplotlib_is_the_pinned_one():
    """The byte comparisons below hold for one matplotlib: the figures
    extra's. Another one draws other bytes: install the extra."""
    assert version("matplotlib") == _pinned(), "pip install -e '.[figures]'"


def test_the_fixture_draws_the_committed_figures_and_tables(tmp_path):
    generated = generate(FIXTURE / "results", FIXTURE / "docs", tmp_path / "out")
    assert generated.missing == []
    assert sorted(generated.tables) == sorted([INDEX_TABLE, *(t for ts in TABLES.values()
                                                               for t in ts)])
    # Every reproduction's figures, named as the catalogue says.
    assert {p.name for p in generated.figures} == {
        f for r in reproductions().values() for f in r.figures}
    drawn, expected = _files(tmp_path / "out"), _files(FIXTURE / "expected")
    assert drawn.keys() == expected.keys()
    for name in drawn:
        assert drawn[name] == expected[name], f"{name} differs from tests/data/figures/expected"
    page = drawn["page.md"].decode()
    assert "Hand-written text stays as it is." in page and "| an old | table |" not in page
    assert "| `pica8-p3290` | 39 | 1 |" in page


def test_a_rerun_gives_the_same_bytes(tmp_path):
    first = generate(FIXTURE / "results", FIXTURE / "docs", tmp_path / "a")
    generate(FIXTURE / "results", FIXTURE / "docs", tmp_path / "b")
    assert first.figures
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def _png_chunks(data: bytes) -> list[bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        chunks.append(data[at + 4:at + 8 + (length if data[at + 4:at + 8] == b"tEXt" else 0)])
        at += 12 + length
    return chunks


def test_pngs_carry_no_version_or_date():
    for png in sorted((FIXTURE / "expected" / "figures").glob("*.png")):
        chunks = _png_chunks(png.read_bytes())
        assert b"tIME" not in chunks, png.name
        texts = [c for c in chunks if c.startswith(b"tEXt")]
        assert not any(b"Software" in c or b"matplotlib" in c for c in texts), (png.name, texts)


def test_collect_rebuilds_the_committed_fixture_without_the_bulk(tmp_path):
    """The fixture's results are collect()'s output of the made-up lab runs:
    rebuilt, the same files; the bulk outputs are left behind."""
    built = figures_fixture.results(tmp_path / "results", tmp_path / "scratch")
    assert _files(built) == _files(FIXTURE / "results")
    kept = set(_files(built))
    assert not [k for k in kept if k.endswith("1.stdout")]          # iperf3's output
    # PTPd's slave output and the three `date` marks are what Table I needs.
    assert {k for k in kept if k.startswith("qjump/ptpd-tdf10/nodes/")} == {
        f"qjump/ptpd-tdf10/nodes/h1/{n}.{ext}" for n in (3, 4, 5, 6) for ext in ("json", "stdout")}
    assert "star/sweep/sweep-summary.csv" in kept and "star/sweep/tdf10-r1/summary.csv" in kept


def test_the_committed_docs_are_what_make_figures_makes(tmp_path):
    generated = generate(DOCS / "results", DOCS, tmp_path / "out")
    for figure in generated.figures:
        assert figure.read_bytes() == (DOCS / "figures" / figure.name).read_bytes(), \
            f"docs/figures/{figure.name} is not what `make figures` draws: run it"
    for page in generated.pages:
        assert page.read_text() == (DOCS / page.name).read_text(), \
            f"docs/{page.name}'s tables are not what `make figures` makes: run it"
    # The tables of reproductions.md are all marked, drawn or not yet.
    marked = re.findall(r"<!-- figures:([a-z0-9-]+) -->", (DOCS / "reproductions.md").read_text())
    assert sorted(marked) == sorted([INDEX_TABLE, *(t for ts in TABLES.values() for t in ts)])


def test_every_committed_png_is_drawn_or_listed_as_not_yet():
    generated_names = {f for name, r in reproductions().items()
                       if (DOCS / "results" / name / "provenance.json").exists()
                       for f in r.figures}
    text = (DOCS / "reproductions.md").read_text()
    # Once every reproduction has data the section is gone: nothing is listed.
    section = text.split("## Not regenerated from committed data yet", 1)
    listed = (set(re.findall(r"`figures/([\w.-]+\.png)`", section[1].split("\n## ", 1)[0]))
              if len(section) == 2 else set())
    for png in sorted((DOCS / "figures").glob("*.png")):
        assert png.name in generated_names | listed, png.name
        assert not (png.name in generated_names and png.name in listed), png.name


def test_install_in_place_adds_nothing_but_the_figures_and_pages(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(FIXTURE / "docs", docs)
    (docs / "figures").mkdir()
    (docs / "figures" / "old.png").write_bytes(b"kept")
    generated = generate(FIXTURE / "results", docs, tmp_path / "out")
    install(generated, docs)
    assert set(_files(docs)) == {"page.md", "figures/old.png",
                                 *(f"figures/{p.name}" for p in generated.figures)}
    assert _files(docs)["page.md"] == (FIXTURE / "expected" / "page.md").read_bytes()
    # In place, again: nothing changes.
    again = generate(FIXTURE / "results", docs, tmp_path / "out2")
    before = _files(docs)
    install(again, docs)
    assert _files(docs) == before


def test_a_missing_reproduction_leaves_its_tables_and_figures(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(FIXTURE / "results" / "fct", results / "fct")
    generated = generate(results, FIXTURE / "docs", tmp_path / "out")
    assert generated.missing == ["star", "qjump", "fattree", "adaptive", "starscale", "deploy",
                                 "mflops", "bandwidth", "spacing"]
    assert [p.name for p in generated.figures] == ["fct_cdf.png"]
    page = (tmp_path / "out" / "page.md").read_text()
    assert "(the star table goes here)" in page and "| an old | table |" not in page


def test_an_unknown_table_mark_and_a_full_out_directory_are_refused(tmp_path):
    with pytest.raises(AnalysisError, match="figures:stra names no generated table"):
        replace_tables("<!-- figures:stra -->\nx\n<!-- /figures:stra -->\n", {}, "p.md")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("")
    with pytest.raises(AnalysisError, match="not empty"):
        generate(FIXTURE / "results", FIXTURE / "docs", tmp_path / "out")


def test_the_index_sums_the_lab_time_and_says_whether_all_ran_in_one_go(tmp_path):
    """docs/reproductions.md's index: each reproduction's lab time from its
    provenance.json (or "not run yet" with the estimate), the sum, and the
    run in one go only when reproduce-all.json records one."""
    results = tmp_path / "results"
    shutil.copytree(FIXTURE / "results" / "fct", results / "fct")
    text = index(results)
    fct = [row for row in text.splitlines() if "`make reproduce-fct`" in row]
    assert fct and fct[0].endswith("| 10 min (2026-01-01) |")
    star = [row for row in text.splitlines() if "`make reproduce-star`" in row]
    assert star[0].endswith(f"| not run yet (about {reproductions()['star'].minutes} min) |")
    assert "The 1 of 10 reproductions with committed data took 10 min" in text
    assert "`make reproduce-all` has not been run in one go." in text
    (results / ALL_RUN).write_text(json.dumps({
        "date": "2026-02-03T04:05:06Z", "commit": "0123456789abcdef", "default_scale": True,
        "real_s": 23_460.0, "reproductions": [{"name": "star", "real_s": 540.0},
                                              {"name": "qjump", "real_s": 8_100.0}]}))
    text = index(results)
    assert ("`make reproduce-all` last ran them in one go on 2026-02-03 (commit "
            "0123456789ab): 6 h 31 min (star 9 min, qjump 2 h 15 min).") in text
    assert "has not been run" not in text
