"""Where a run came from, as its bundle records it (meta.json's
`provenance`): the scenario file and its sha256, the script that ran it,
the command line, and selena's own code (its files' sha256 and the
checkout's commit, read without git)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

from selena.backends.xl import XlBackend
from selena.experiment import Experiment
from selena.model import Topology
from selena.paths import project_root
from selena.provenance import git_commit, run_provenance, selena_source_sha256

PAIR = ("from selena.model import Topology\n"
        "topology = Topology('prov')\n"
        "topology.add_link(topology.add_host('h1', ip='10.0.0.1/24'),\n"
        "                  topology.add_host('h2', ip='10.0.0.2/24'))\n")


def test_a_scenario_files_run_records_its_file_the_command_line_and_selenas_code(
        fake_xen, tmp_path, monkeypatch):
    scenario = tmp_path / "prov.py"
    scenario.write_text(PAIR)
    monkeypatch.setattr(sys, "argv", ["selena", "run", str(scenario), "--tdf", "3"])
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    exp = Experiment(str(scenario), tdf=3, backend=backend, templates=None,
                     out=tmp_path / "out", ready_timeout=20)
    scenario.write_text(PAIR + "# edited while it ran\n")
    with exp:
        pass
    kept = json.loads((tmp_path / "out/meta.json").read_text())["provenance"]
    assert kept["source"] == str(scenario)
    # The file as it was loaded, not as it was at the end.
    assert kept["source_sha256"] == hashlib.sha256(PAIR.encode()).hexdigest()
    assert kept["argv"] == ["selena", "run", str(scenario), "--tdf", "3"]
    assert "script" not in kept
    assert kept["selena_source_sha256"] == selena_source_sha256()
    if (project_root() / ".git").exists():     # a checkout, as in CI
        assert kept["selena_commit"] == subprocess.run(
            ["git", "-C", str(project_root()), "rev-parse", "HEAD"], capture_output=True,
            text=True, check=True).stdout.strip()
    else:
        assert kept["selena_commit"] is None


def test_a_plain_scripts_topology_records_the_script(tmp_path, monkeypatch):
    script = tmp_path / "my_experiment.py"
    script.write_text("print('runs an experiment')\n")
    monkeypatch.setattr(sys, "argv", [str(script), "--out", "x"])
    kept = run_provenance(Topology("pair").name)
    assert kept["source"] == "pair" and "source_sha256" not in kept
    assert kept["script"] == str(script)
    assert kept["script_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    # `python3 -m selena ...`: selena's own __main__ is no script of the user's.
    monkeypatch.setattr(sys, "argv", [str(project_root() / "selena" / "__main__.py"), "run"])
    assert "script" not in run_provenance("single,2")


def test_selenas_code_hash_names_its_files_contents():
    package = project_root() / "selena"
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" +
                      path.read_bytes() + b"\0")
    assert selena_source_sha256() == digest.hexdigest()


def test_the_commit_is_read_from_a_checkout_a_worktree_and_packed_refs(tmp_path):
    """Without git: Dom0 may have none."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "f").write_text("x")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert git_commit(repo) == head
    subprocess.run([*git, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt")],
                   check=True)
    assert git_commit(tmp_path / "wt") == head
    subprocess.run([*git, "pack-refs", "--all"], check=True)
    assert not (repo / ".git/refs/heads/main").exists()
    assert git_commit(repo) == head and git_commit(tmp_path / "wt") == head
    subprocess.run([*git, "checkout", "-q", "--detach"], check=True)
    assert git_commit(repo) == head
    assert git_commit(tmp_path) is None                       # no checkout
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".git").write_text("not a pointer")
    assert git_commit(tmp_path / "bad") is None
