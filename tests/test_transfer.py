"""Files into and out of guests (selena.transfer; exp.put, exp.get): the
steps against a shell on this host as the guest, then through the
experiment lifecycle against the fake Dom0 with real agents, whose guests'
commands run on this host too. The lab copies into a tiny-host guest
(tests/lab/test_lifecycle_e2e.py)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from selena import transfer
from selena.backends.xl import XlBackend
from selena.control.interface import CommandResult
from selena.engine import Engine
from selena.errors import ScenarioError
from selena.experiment import Experiment
from selena.model import Topology
from selena.transfer import TransferError, get, put


class Shell:
    """RunLines with this host's /bin/sh as the guest, one line after
    another; keeps every line."""

    def __init__(self, corrupt: bool = False, stop_after: int | None = None):
        self.lines: list[str] = []
        self.corrupt = corrupt
        self.stop_after = stop_after

    def __call__(self, lines: Sequence[str]) -> list[CommandResult]:
        return [self.one(line) for line in lines]

    def one(self, line: str) -> CommandResult:
        self.lines.append(line)
        if self.stop_after is not None and len(self.lines) > self.stop_after \
                and not line.startswith("rm -f"):
            raise KeyboardInterrupt
        if self.corrupt and "base64 -d" in line:
            line = line.replace("base64 -d", "base64 -d | tr h i")
        done = subprocess.run(["sh", "-c", line], capture_output=True)
        return CommandResult(guest="h1", id="x", command=line, state="exited",
                             exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.rglob("*.selena-*"))


def test_put_writes_the_file_whole_in_pieces_and_get_reads_it_back(tmp_path):
    data = os.urandom(10_000)       # about eight pieces
    src = tmp_path / "blob.bin"
    src.write_bytes(data)
    src.chmod(0o640)
    shell = Shell()
    guest = tmp_path / "guest"
    done = put(shell, "h1", src, f"{guest}/new/dir/blob.bin")
    assert (guest / "new/dir/blob.bin").read_bytes() == data
    assert (guest / "new/dir/blob.bin").stat().st_mode & 0o7777 == 0o640     # as src
    pieces = [line for line in shell.lines if "base64 -d" in line]
    # Made, its pieces, joined, checked, put in place.
    assert 7 <= len(pieces) <= 9 and len(shell.lines) == len(pieces) + 4, shell.lines
    assert (done.direction, done.size, done.guest_path) == ("put", 10_000,
                                                            f"{guest}/new/dir/blob.bin")
    assert leftovers(guest) == []
    # A directory as the target takes src's name: with a /, or existing.
    put(Shell(), "h1", src, f"{guest}/other/", mode=0o755)
    assert (guest / "other/blob.bin").stat().st_mode & 0o7777 == 0o755
    got = get(Shell(), "h1", f"{guest}/other/blob.bin", tmp_path / "back")
    assert (tmp_path / "back").read_bytes() == data and got.sha256 == done.sha256
    (tmp_path / "dir").mkdir()
    get(Shell(), "h1", f"{guest}/other/blob.bin", tmp_path / "dir")
    assert (tmp_path / "dir/blob.bin").read_bytes() == data
    # An empty file is a file too.
    (tmp_path / "empty").write_bytes(b"")
    put(Shell(), "h1", tmp_path / "empty", f"{guest}/empty")
    assert (guest / "empty").read_bytes() == b""


def test_put_sends_its_pieces_several_at_once_and_joins_them_in_order(tmp_path):
    """Each piece into a part file of its own, PIECES_AT_ONCE in flight (run
    here side by side, finishing in any order); joined in their order."""
    data = os.urandom(60_000)       # about 45 pieces: three batches
    src = tmp_path / "trace.bin"
    src.write_bytes(data)
    shell = Shell()
    batches: list[int] = []

    def run_many(lines):
        batches.append(len(lines))
        with ThreadPoolExecutor(len(lines)) as pool:
            return list(pool.map(shell.one, reversed(lines)))[::-1]

    put(run_many, "h1", src, f"{tmp_path}/guest/trace.bin")
    assert (tmp_path / "guest/trace.bin").read_bytes() == data
    # Made; the pieces in three batches; joined, checked, put in place.
    assert batches[0] == 1 and batches[-3:] == [1, 1, 1], batches
    assert batches[1:-3] == [transfer.PIECES_AT_ONCE] * 2 + [batches[3]] and batches[3] > 1
    assert leftovers(tmp_path / "guest") == []


def test_a_put_that_fails_leaves_nothing_at_the_target_and_names_the_step(tmp_path):
    src = tmp_path / "app.sh"
    src.write_bytes(b"#!/bin/sh\necho hi\n" * 200)
    guest = tmp_path / "guest"
    guest.mkdir()
    (guest / "app.sh").write_text("the old one\n")
    with pytest.raises(TransferError, match=rf"^put {src} -> h1:{guest}/app.sh: the "
                                            r"guest's copy has sha256 \w+, not \w+; nothing "
                                            "was put there$"):
        put(Shell(corrupt=True), "h1", src, f"{guest}/app.sh")
    assert (guest / "app.sh").read_text() == "the old one\n" and leftovers(guest) == []
    # Interrupted between two pieces: the temporary file is removed.
    shell = Shell(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        put(shell, "h1", src, f"{guest}/app.sh")
    assert shell.lines[-1].startswith("rm -f ") and leftovers(guest) == []
    assert (guest / "app.sh").read_text() == "the old one\n"
    # The guest cannot make the directory: its own words.
    (tmp_path / "afile").write_text("x")
    with pytest.raises(TransferError, match=rf"^put {src} -> h1:{tmp_path}/afile/app.sh: "
                                            "creating it exited 1: mkdir: .*afile.*: File exists$"):
        put(Shell(), "h1", src, f"{tmp_path}/afile/app.sh")
    with pytest.raises(TransferError, match=rf"{guest} is a directory in the guest; give the "
                                            rf"file's path \({guest}/app.sh\)"):
        put(Shell(), "h1", src, str(guest))


def test_bad_input_is_one_line_before_any_command(tmp_path, monkeypatch):
    src = tmp_path / "f"
    src.write_text("x")
    shell = Shell()
    for args, kwargs, message in [
        ((src, "relative/path"), {}, r"give an absolute path in the guest \(e.g. /root/app.py\)"),
        ((src, "/tmp/a\nb"), {}, "control characters in a guest path"),
        ((src, "/tmp/x"), {"mode": "755"}, r"mode '755' is not a permission mode \(e.g. 0o755\)"),
        ((src, "/tmp/x"), {"mode": 0o17777}, "is not a permission mode"),
        ((tmp_path / "missing", "/tmp/x"), {}, "missing: no such file$"),
        ((tmp_path, "/tmp/x"), {}, "a directory; put copies one file"),
    ]:
        with pytest.raises(ScenarioError, match=message):
            put(shell, "h1", *args, **kwargs)
    monkeypatch.setattr(transfer, "MAX_PUT_BYTES", 0)
    with pytest.raises(ScenarioError, match=r"1 bytes, more than put carries \(0 MiB\); put "
                                            "a large file in a template"):
        put(shell, "h1", src, "/tmp/x")
    with pytest.raises(ScenarioError, match="give an absolute path"):
        get(shell, "h1", "etc/passwd", tmp_path / "p")
    assert shell.lines == []


def test_get_names_a_file_the_guest_lacks_and_one_past_the_output_cap(tmp_path):
    with pytest.raises(TransferError, match=rf"^get h1:{tmp_path}/nope -> {tmp_path}/here: "
                                            "reading it exited 1: cat: .*No such file"):
        get(Shell(), "h1", f"{tmp_path}/nope", tmp_path / "here")
    assert not (tmp_path / "here").exists()

    def capped(lines: Sequence[str]) -> list[CommandResult]:
        return [CommandResult(guest="h1", id="x", command=line, state="exited", exit_code=0,
                              stdout=b"x" * 10, stdout_dropped=90) for line in lines]
    with pytest.raises(TransferError, match=r"larger than the output cap \(10 bytes kept, 90 "
                                            r"more\); give the experiment a larger output_cap"):
        get(capped, "h1", "/var/log/big", tmp_path / "big")
    assert not (tmp_path / "big").exists()


def test_exp_put_and_get_through_the_fake_dom0_are_in_the_bundle_not_its_commands(
        fake_xen, tmp_path):
    topo = Topology("files", tdf=4)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    script = tmp_path / "app.sh"
    script.write_text("#!/bin/sh\necho \"app ran with $1\"\n" + "# padding\n" * 300)
    guest = tmp_path / "guest"
    with Experiment(topo, backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20) as exp:
        exp.put("h1", script, f"{guest}/opt/app.sh", mode=0o755)
        ran = exp["h1"].cmd(f"{guest}/opt/app.sh 42 > {guest}/opt/out.txt", check=True)
        assert ran.ok
        exp["h2"].get(f"{guest}/opt/out.txt", f"{tmp_path}/results/")
        with pytest.raises(ScenarioError, match="no node named 'h9'|h9"):
            exp.put("h9", script, "/tmp/x")
    assert (tmp_path / "results/out.txt").read_text() == "app ran with 42\n"
    meta = json.loads((tmp_path / "out/meta.json").read_text())
    assert [c["command"] for c in meta["commands"]] == \
        [f"{guest}/opt/app.sh 42 > {guest}/opt/out.txt"]
    files = meta["files"]
    assert [(f["node"], f["direction"], f["guest_path"]) for f in files] == [
        ("h1", "put", f"{guest}/opt/app.sh"), ("h2", "get", f"{guest}/opt/out.txt")]
    assert files[0]["bytes"] == script.stat().st_size and files[1]["bytes"] == 16
    assert files[1]["local_path"] == str(tmp_path / "results/out.txt")
    assert all(len(f["sha256"]) == 64 and f["at_virtual"] >= 0 for f in files)


def test_an_interrupted_put_lets_its_pieces_in_flight_land_before_cleaning_up(
        fake_xen, tmp_path, monkeypatch):
    """Ctrl-C while the pieces are in flight: Engine._steps waits (bounded)
    for the others to end, so put's removal of its part files comes after
    the last write; otherwise a late piece would outlive the cleanup."""
    topo = Topology("steps", tdf=2)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    late = tmp_path / "late-piece"
    with Experiment(topo, backend=backend, templates=None, ready_timeout=20) as exp:
        assert exp.engine is not None
        real_result = Engine._result
        calls = []

        def interrupted(self, handle):
            calls.append(handle)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return real_result(self, handle)
        monkeypatch.setattr(Engine, "_result", interrupted)
        steps = exp.engine._steps("h1")
        with pytest.raises(KeyboardInterrupt):
            steps(["true", f"sleep 1; touch {late}"])
        assert late.exists()
        monkeypatch.setattr(Engine, "_result", real_result)
        assert exp["h1"].cmd("true").ok      # the channel still serves
