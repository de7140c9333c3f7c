"""The lifecycle over the CommandChannel interface alone (issue 35 item 2),
with a backend and channel that live in memory (tests/support/
memory_backend.py): the TDF is applied once, one place decides whether the
agents are needed, and SELENA Listing-2 commands are recorded with their
origin, which is what `selena run` prints them by."""

from __future__ import annotations

import json

from memory_backend import MemoryBackend

from selena.cli import main
from selena.compat import PUSH_CMD, PUSH_OF_RULE
from selena.engine import SCENARIO
from selena.experiment import Experiment

LISTING = ("newNode(0, 'H1', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.2', "
           "'255.255.255.0', '')])\n"
           "newNode(1, 'H2', NodeType.LINUX_HOST, [(1000, 'RANDOM', '10.0.1.3', "
           "'255.255.255.0', '')])\n"
           "newNode(2, 'S1', NodeType.LINUX_OVS, [(1000, 'RANDOM', '', '', ''), "
           "(1000, 'RANDOM', '', '', '')])\n"
           "newLink((0, 0), (2, 0), 100, 1)\n"
           "newLink((1, 0), (2, 1), 100, 1)\n"
           "pushCmd(2, ['ovs-vsctl add-port br0 eth1'])\n"
           "pushOFRule(2, 'br0', 'add-flow', 'actions=flood')\n"
           "pushCmd(1, ['hang &'])\n"
           "pushCmd(0, ['echo one', 'echo two'])\n"
           "\n"
           "def run(exp):\n"
           "    exp.cmd('H2', 'echo two')      # the same text as a pushCmd\n")


def experiment(source, backend=None, **kw) -> Experiment:
    return Experiment(source, backend=backend or MemoryBackend(), templates=None,
                      monitor=False, progress=lambda _msg: None, **kw)


# -- Listing-2 actions and their records' origin ---------------------------------------

def test_listing_actions_run_in_file_order_and_their_records_say_so(tmp_path):
    path = tmp_path / "listing.py"
    path.write_text(LISTING)
    with experiment(str(path)) as exp:
        exp.run_scenario()
        records = sorted(exp.engine.records, key=lambda r: r.seq)
    assert [(r.result.guest, r.result.command, r.origin) for r in records] == [
        ("S1", "ovs-vsctl add-port br0 eth1", PUSH_CMD),
        ("S1", "ovs-ofctl add-flow br0 actions=flood", PUSH_OF_RULE),
        ("H1", "echo one", PUSH_CMD),
        ("H1", "echo two", PUSH_CMD),
        ("H2", "hang ", PUSH_CMD),             # `&`: killed after the rest
        ("H2", "echo two", SCENARIO),
    ]
    assert records[4].result.state == "killed"


def test_selena_run_prints_what_pushcmd_printed_by_origin_not_by_text(tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "listing.py").write_text(LISTING)
    backend = MemoryBackend()
    monkeypatch.setattr("selena.experiment.get_backend", lambda name, **kw: backend)
    monkeypatch.setattr("selena.experiment.installed_templates", lambda: None)
    assert main(["run", "listing.py", "--out", "bundle", "--no-monitor"]) == 0
    out = capsys.readouterr().out
    assert "H1$ echo one\n  one\n" in out and "H1$ echo two\n  two\n" in out
    # The scenario's own `echo two` on H2 printed the same, but is no pushCmd.
    assert "H2$" not in out
    meta = json.loads((tmp_path / "bundle/meta.json").read_text())
    # The bundle is as before: origins are the CLI's to use, not new keys.
    assert all("origin" not in c for c in meta["commands"])
