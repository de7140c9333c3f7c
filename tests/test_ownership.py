"""What selena writes for a researcher who ran it with sudo is theirs
(selena.ownership): a run's bundle with the directories made for it, a
sweep with its runs, summary, recommendation and plots; nothing above
them, nothing when not under sudo, and bundles readable as the umask says
(they were 0700 directories)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from fake_sudo import GID, UID, fake_sudo
from memory_backend import MemoryBackend
from scenario_module import PAIR_RECORDING

from selena.cli import main
from selena.experiment import Experiment
from selena.model import Topology
from selena.ownership import hand_over, invoking_user, missing_dirs
from selena.results import BundleWriter


def pair() -> Topology:
    topo = Topology("pair", tdf=2)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"))
    return topo


def run_pair(out: Path) -> None:
    with Experiment(pair(), backend=MemoryBackend(), templates=None, monitor=False,
                    progress=lambda _msg: None, out=out) as exp:
        exp.cmd("h1", "echo hello")
        exp.record("x", [1.0], expected=1.0)


@pytest.mark.parametrize(("euid", "env", "user"), [
    (1000, {"SUDO_UID": "1000", "SUDO_GID": "1000"}, None),   # not root
    (0, {}, None),                                             # root, not through sudo
    (0, {"SUDO_UID": "0", "SUDO_GID": "0"}, None),             # sudo by root
    (0, {"SUDO_UID": "x", "SUDO_GID": "1"}, None),
    (0, {"SUDO_UID": "1000"}, None),
    (0, {"SUDO_UID": "1000", "SUDO_GID": "1001"}, (1000, 1001)),
])
def test_the_invoking_user_is_the_one_who_ran_sudo_as_someone_else(monkeypatch, euid, env,
                                                                      user):
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    monkeypatch.delenv("SUDO_UID", raising=False)
    monkeypatch.delenv("SUDO_GID", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert invoking_user() == user


def test_missing_dirs_are_what_mkdir_parents_would_create(tmp_path):
    (tmp_path / "a").mkdir()
    assert missing_dirs(tmp_path / "a" / "b" / "c") == [tmp_path / "a" / "b",
                                                        tmp_path / "a" / "b" / "c"]
    assert missing_dirs(tmp_path / "a") == []


def test_a_tree_is_handed_over_without_following_links(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "f").write_text("x")
    (tree / "link").symlink_to(outside)
    sudo = fake_sudo(monkeypatch)
    hand_over(tree)
    assert sudo.not_handed(tree) == []
    assert sudo.owner(outside) is None and sudo.followed == []


def test_a_tree_that_cannot_be_handed_over_is_said_with_the_fix(tmp_path, monkeypatch, caplog):
    fake_sudo(monkeypatch)

    def refuse(path, uid, gid, *, follow_symlinks=True):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "chown", refuse)
    with caplog.at_level(logging.WARNING, logger="selena.ownership"):
        hand_over(tmp_path)
    assert f"sudo chown -R {UID}:{GID} {tmp_path}" in caplog.text
    assert "Operation not permitted" in caplog.text


def test_a_bundle_and_the_directories_made_for_it_go_to_the_sudo_user(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    sudo = fake_sudo(monkeypatch)
    out = tmp_path / "mine" / "results" / "day1" / "pair"
    run_pair(out)
    assert (out / "meta.json").is_file() and (out / "nodes" / "h1").is_dir()
    assert sudo.not_handed(tmp_path / "mine" / "results") == []
    # what was there before is left as it was
    assert sudo.owner(tmp_path / "mine") is None and sudo.owner(tmp_path) is None
    # a second run replaces the bundle; the new one is handed over too
    sudo.owners.clear()
    run_pair(out)
    assert sudo.not_handed(out) == [] and sudo.owner(tmp_path / "mine" / "results") is None


def test_the_staging_directory_stays_roots_until_the_bundle_is_whole(tmp_path, monkeypatch):
    sudo = fake_sudo(monkeypatch)
    writer = BundleWriter.prepare(tmp_path / "made" / "out")
    assert sudo.owner(tmp_path / "made") == (UID, GID)
    assert sudo.owner(writer.staging) is None
    writer.discard()


def test_without_sudo_nothing_changes_owner(tmp_path, monkeypatch):
    sudo = fake_sudo(monkeypatch)
    monkeypatch.delenv("SUDO_UID")
    run_pair(tmp_path / "out")
    assert (tmp_path / "out" / "meta.json").is_file() and sudo.owners == {}


def test_a_bundle_is_readable_as_the_umask_says(tmp_path):
    old = os.umask(0o022)
    try:
        run_pair(tmp_path / "out")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755


def test_a_sweep_with_its_report_and_plots_goes_to_the_sudo_user(tmp_path, monkeypatch,
                                                                 capsys):
    monkeypatch.setattr("selena.experiment.get_backend", lambda name, **kw: MemoryBackend())
    monkeypatch.setattr("selena.experiment.installed_templates", lambda: None)
    scenario = tmp_path / "pair.py"
    scenario.write_text(PAIR_RECORDING)
    sudo = fake_sudo(monkeypatch)
    out = tmp_path / "sweeps" / "pair"
    assert main(["sweep", str(scenario), "--tdf", "1,2", "--out", str(out),
                 "--no-monitor"]) == 0, capsys.readouterr().err
    written = {p.name for p in out.iterdir()}
    assert {"sweep.json", "runs", "summary.csv", "recommendation.json", "x.png",
            "real_time.png"} <= written
    assert sudo.not_handed(tmp_path / "sweeps") == []
    assert sudo.owner(tmp_path) is None and sudo.owner(scenario) is None
