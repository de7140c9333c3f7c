"""The lifecycle over the CommandChannel interface alone (issue 35 item 2),
with a backend and channel that live in memory (tests/support/
memory_backend.py): the TDF is applied once, one place decides whether the
agents are needed, and SELENA Listing-2 commands are recorded with their
origin, which is what `selena run` prints them by."""

from __future__ import annotations

import json

import pytest
from memory_backend import MemoryBackend

import selena.units
from selena.cli import main
from selena.compat import PUSH_CMD, PUSH_OF_RULE
from selena.engine import SCENARIO
from selena.errors import ExperimentError, ScenarioError
from selena.experiment import Experiment
from selena.model import Topology

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


def pair(tdf: float = 2) -> Topology:
    topo = Topology("pair", tdf=tdf)
    topo.add_link(topo.add_host("h1", ip="10.0.0.1/24"), topo.add_host("h2", ip="10.0.0.2/24"),
                  rate="10Mbit", delay="1ms")
    return topo


# -- the TDF, applied once --------------------------------------------------------------

def test_a_scenario_files_tdf_is_applied_once_on_the_python_api_path(tmp_path, monkeypatch):
    path = tmp_path / "pair.py"
    path.write_text("from selena.model import Topology\n"
                    "topology = Topology('pair', tdf=10)\n"
                    "topology.add_link(topology.add_host('h1', ip='10.0.0.1/24'),\n"
                    "                  topology.add_host('h2', ip='10.0.0.2/24'))\n")
    applied = []
    real_tdf = selena.units.tdf

    def counting(value):
        applied.append(value)
        return real_tdf(value)
    monkeypatch.setattr(selena.units, "tdf", counting)
    backend = MemoryBackend()
    with experiment(str(path), backend, tdf="4") as exp:
        assert exp.topology.tdf == 4.0 and exp.tdf == 4.0
    # Once: not by the file's loading and again by the Experiment.
    assert applied.count("4") == 1
    assert backend.deployed_tdf == [4.0] and backend.channels[0].tdf == 4.0
    # The error speaks the API's word, not the CLI's --tdf.
    with pytest.raises(ScenarioError, match=r"^tdf: TDF 'x' is not a number"):
        experiment(str(path), tdf="x")


def test_a_tdf_change_reaches_the_backend_and_the_channel_once_each():
    backend = MemoryBackend()
    with experiment(pair(2), backend) as exp:
        assert backend.tdf_calls == []          # deploying set it, nothing re-applied it
        exp.set_tdf(8)
        assert backend.tdf_calls == [("backend", 8.0), ("channel", 8.0)]
        assert exp.tdf == 8.0 and backend.channels[0].tdf == 8.0


# -- whether the agents are needed ----------------------------------------------------

def test_one_rule_decides_whether_the_agents_are_needed():
    assert not experiment(pair()).needs_agents()
    assert experiment(pair(), shaping="guest").needs_agents()        # shaped in the guests
    unshaped = Topology("bare", tdf=2)
    unshaped.add_link(unshaped.add_host("h1", ip="10.0.0.1/24"),
                      unshaped.add_host("h2", ip="10.0.0.2/24"))
    assert not experiment(unshaped, shaping="guest").needs_agents()  # nothing to shape
    switched = pair()
    switched.add_link(switched.add_switch("s1"), switched.nodes["h1"])
    assert experiment(switched).needs_agents()
    # Nodes without agents are configured by their backend.
    assert not experiment(switched, MemoryBackend(guest_agents=False)).needs_agents()


def test_a_deploy_without_waiting_is_refused_when_the_agents_are_needed():
    switched = pair()
    switched.add_link(switched.add_switch("s1"), switched.nodes["h1"])
    backend = MemoryBackend()
    exp = experiment(switched, backend)
    with pytest.raises(ExperimentError, match="need the guest agents"):
        exp.deploy(wait=False)
    assert backend.destroyed == ["pair"]
    backend = MemoryBackend()
    exp = experiment(pair(), backend)
    exp.deploy(wait=False)                  # nothing to configure: not waited for
    assert backend.channels == []
    exp.detach()


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


@pytest.mark.parametrize(("switch", "attached"), [(False, 0), (True, 1)])
def test_selena_deploy_without_waiting_still_waits_when_the_agents_are_needed(
        tmp_path, capsys, monkeypatch, switch, attached):
    body = ("from selena.model import Topology\n"
            "topology = Topology('dep', tdf=2)\n"
            "h1 = topology.add_host('h1', ip='10.0.0.1/24')\n"
            "h2 = topology.add_host('h2', ip='10.0.0.2/24')\n"
            + ("s1 = topology.add_switch('s1')\n"
               "topology.add_link(h1, s1)\ntopology.add_link(h2, s1)\n" if switch
               else "topology.add_link(h1, h2)\n"))
    (tmp_path / "dep.py").write_text(body)
    backend = MemoryBackend()
    monkeypatch.setattr("selena.experiment.get_backend", lambda name, **kw: backend)
    monkeypatch.setattr("selena.experiment.installed_templates", lambda: None)
    assert main(["deploy", str(tmp_path / "dep.py"), "--wait", "0"]) == 0, \
        capsys.readouterr().err
    # The same rule as Experiment.deploy(wait=False): switches need their agents.
    assert len(backend.channels) == attached
    assert "h1\tselena-dep-h1\t" in capsys.readouterr().out
