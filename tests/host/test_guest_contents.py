"""A guest initramfs's cache key covers exactly what the build copies into
it (selena.templates.build.GuestContents lists each input once)."""

from __future__ import annotations

from pathlib import Path

from selena.templates.build import GuestContents


def _file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _contents(tmp: Path) -> GuestContents:
    src = tmp / "src"
    shared = src / "shared"
    own = src / "own"
    _file(shared / "init", "init")
    _file(own / "rc", "rc")
    _file(own / "template.yaml", "template")
    data = src / "data"
    _file(data / "a" / "b.txt", "host dir file")
    tree = src / "tree"
    _file(tree / "m.py", "tree module")
    return GuestContents(
        name="probe", shared=shared, own=own, agent=_file(src / "agent", "agent"),
        tools=[_file(src / "tools" / "flowgen", "tool")],
        host_binaries=[_file(src / "usr" / "bin" / "prog", "binary")],
        host_paths=[data, _file(src / "one.conf", "host file")],
        packaged=[(_file(src / "deb" / "netperf", "packaged"), Path("/usr/bin/netperf"))],
        tree_dirs=[(tree, "/opt/selena/tree")], python=False, site=None)


def test_every_installed_file_is_a_key_input(tmp_path: Path) -> None:
    contents = _contents(tmp_path)
    root = tmp_path / "root"
    for sub in ("sbin", "usr/bin", "etc/selena"):
        (root / sub).mkdir(parents=True)
    contents.install(root)
    installed = {p.read_text() for p in root.rglob("*") if p.is_file()}
    hashed = {p.read_text() for p in contents.files()}
    assert installed == hashed - {"template"}
    assert (root / "sbin" / "selena-agent").read_text() == "agent"
    assert (root / "usr" / "bin" / "netperf").read_text() == "packaged"
    assert (root / "opt" / "selena" / "tree" / "m.py").read_text() == "tree module"


def test_a_change_to_any_input_changes_the_key(tmp_path: Path) -> None:
    contents = _contents(tmp_path)
    before = contents.key()
    for path in contents.files():
        original = path.read_text()
        path.write_text(original + " changed")
        assert contents.key() != before, path
        path.write_text(original)
    assert contents.key() == before


def test_an_absent_agent_is_neither_hashed_nor_installed(tmp_path: Path) -> None:
    contents = _contents(tmp_path)
    with_agent = contents.key()
    contents.agent = None
    assert contents.key() != with_agent
    root = tmp_path / "root"
    for sub in ("sbin", "usr/bin", "etc/selena"):
        (root / sub).mkdir(parents=True)
    contents.install(root)
    assert not (root / "sbin" / "selena-agent").exists()
