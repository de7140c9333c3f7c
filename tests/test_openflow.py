"""OpenFlow switch setup: validation of controllers and switch models, the
bridge scripts and model commands rendered for switch guests, and the
sequence the Switches helper drives through the control channel."""

from __future__ import annotations

import dataclasses
import re

import pytest

from selena.control.channel import CommandHandle, CommandResult
from selena.errors import BackendError, TopologyError, ValidationError
from selena.model import Topology
from selena.openflow import (
    MODEL_LISTEN,
    Switches,
    bridge_script,
    bridge_scripts,
    flow_scripts,
    model_command,
    switch_setups,
)
from selena.validate import validate

PROFILES = {"ideal", "pica8-p3290"}


def fig11(model: str | None = "pica8-p3290") -> Topology:
    topo = Topology("fig11", tdf=10)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    c0 = topo.add_controller("c0", ip="10.9.0.2/24")
    s1 = topo.add_switch("s1", controller=c0, switch_model=model)
    s1.add_interface(0, "10.9.0.1/24")
    topo.add_link(s1, c0)          # eth0: management
    topo.add_link(h1, s1)          # s1 eth1
    topo.add_link(h2, s1)          # s1 eth2
    return topo


def test_switch_setup_names_ports_controller_and_profile():
    topo = fig11()
    validate(topo, switch_profiles=PROFILES)
    (setup,) = switch_setups(topo)
    s1 = topo.nodes["s1"]
    assert setup.node == "s1"
    assert setup.controller == "tcp:10.9.0.2:6653"
    assert setup.profile == "pica8-p3290"
    # Datapath ports only (not the management interface), numbered index + 1.
    assert setup.ports == ((2, topo.mac_of(s1, s1.interface(1))),
                           (3, topo.mac_of(s1, s1.interface(2))))
    assert setup.datapath_id == f"{s1.id + 1:016x}"


def test_bridge_script_points_ovs_at_the_model_or_the_controller():
    with_model = bridge_script(switch_setups(fig11())[0])
    assert "fail-mode=secure" in with_model
    assert f"set-controller br0 tcp:{MODEL_LISTEN}" in with_model
    # each port: found by MAC, brought up, added with its OpenFlow number
    assert re.findall(r"^port \S+ (\d+)$", with_model, re.M) == ["2", "3"]
    assert 'ovs-vsctl --may-exist add-port br0 "$DEV" -- set interface "$DEV" ' \
        'ofport_request=$2' in with_model
    direct = bridge_script(switch_setups(fig11(model=None))[0])
    assert "set-controller br0 tcp:10.9.0.2:6653" in direct
    # The setup waits until OVS holds its controller connection.
    assert "is_connected" in direct and "is not connected to tcp:10.9.0.2:6653" in direct


def test_a_switch_without_controller_is_a_standalone_learning_switch():
    topo = Topology("plain")
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    s1 = topo.add_switch("s1")
    topo.add_link(h1, s1)
    topo.add_link(h2, s1)
    validate(topo)
    script = bridge_script(switch_setups(topo)[0])
    assert "fail-mode=standalone" in script
    assert "set-controller" not in script
    with pytest.raises(BackendError, match="no controller"):
        model_command(switch_setups(topo)[0], "ideal")


def test_model_command_runs_the_proxy_toward_the_controller():
    spec = model_command(switch_setups(fig11())[0])
    assert spec.argv[:4] == ("python3", "-m", "ofmodel", "proxy")
    argv = list(spec.argv)
    assert argv[argv.index("--listen") + 1] == MODEL_LISTEN
    assert argv[argv.index("--controller") + 1] == "10.9.0.2:6653"
    assert argv[argv.index("--profile") + 1].endswith("/profiles/pica8-p3290.yaml")
    other = model_command(switch_setups(fig11())[0], "ideal")
    assert other.argv[-1].endswith("/profiles/ideal.yaml")


def _bad(mutate) -> str:
    topo = fig11()
    mutate(topo)
    with pytest.raises(TopologyError) as info:
        validate(topo, switch_profiles=PROFILES)
    return str(info.value)


@pytest.mark.parametrize("mutate, message", [
    (lambda t: setattr(t.nodes["s1"], "switch_model", "hp-5406"),
     "node s1: unknown switch_model profile 'hp-5406' (have: ideal, pica8-p3290)"),
    (lambda t: setattr(t.nodes["s1"], "controller", "c9"),
     "node s1: controller 'c9' is not a node of this topology"),
    (lambda t: setattr(t.nodes["s1"], "controller", "h1"),
     "node s1: controller 'h1' is a host, not a controller node"),
    (lambda t: setattr(t.nodes["h1"], "controller", "c0"),
     "node h1: only switches have a controller"),
    (lambda t: setattr(t.nodes["s1"].interface(0), "ip", None),
     "node s1: an OpenFlow switch needs exactly one interface with an IP address"),
    (lambda t: setattr(t.nodes["s1"].interface(1), "ip", "10.0.0.9/24"),
     "node s1: an OpenFlow switch needs exactly one interface with an IP address"),
    (lambda t: setattr(t.nodes["c0"].interface(0), "ip", "10.8.0.2/24"),
     "node s1: its management address 10.9.0.1/24 shares no subnet with controller c0"),
])
def test_bad_openflow_settings_are_rejected_naming_the_node(mutate, message):
    assert message in _bad(mutate)


def test_a_switch_model_needs_a_controller():
    topo = Topology("t")
    topo.add_host("h1", ip="10.0.0.1/24")
    topo.add_switch("s1", switch_model="ideal")
    topo.add_link("h1", "s1")
    with pytest.raises(TopologyError, match="node s1: switch_model 'ideal' needs a controller"):
        validate(topo)


class FakeController:
    """Records what Switches submits; every command exits with `exit_code`
    except the model, which runs until killed."""

    def __init__(self, exit_code: int = 0):
        self.tdf = 10.0
        self.exit_code = exit_code
        self.submitted: list[tuple[str, object]] = []
        self.killed: list[str] = []

    def submit(self, node, spec):
        self.submitted.append((node, spec))
        handle = CommandHandle(node, f"c{len(self.submitted)}", spec, 0.0)
        if spec.argv[:3] != ("python3", "-m", "ofmodel"):
            handle.complete(CommandResult(node, handle.id, spec.describe(), "exited",
                                          exit_code=self.exit_code, stderr=b"ovs-vsctl: boom"))
        return handle

    def wait(self, handle, timeout=None):
        assert handle.wait_done(1), "waited for a command that never ends"
        return handle.result

    def kill(self, handle, signal=15):
        self.killed.append(handle.id)
        handle.complete(CommandResult(handle.guest, handle.id, "model", "killed", signal=15))


def test_switches_start_the_model_before_the_bridge_and_swap_profiles():
    ctl = FakeController()
    switches = Switches(ctl, switch_setups(fig11()))
    lines: list[str] = []
    switches.configure(progress=lines.append)
    (node, model), (_, bridge) = ctl.submitted
    assert node == "s1" and model.argv[-1].endswith("pica8-p3290.yaml")
    assert "add-br br0" in bridge.shell
    assert lines == ["switch s1: 2 ports, switch model pica8-p3290"]

    switches.set_profile("s1", "ideal")
    assert ctl.killed == ["c1"]
    # Old model gone, then the table emptied with no controller attached,
    # then the new model, then OVS pointed at it.
    _, flush = ctl.submitted[2]
    assert "del-controller br0" in flush.shell and "del-flows br0" in flush.shell
    _, new_model = ctl.submitted[3]
    assert new_model.argv[-1].endswith("ideal.yaml")
    _, attach = ctl.submitted[4]
    assert f"set-controller br0 tcp:{MODEL_LISTEN}" in attach.shell

    switches.set_profile("s1", None)
    _, direct = ctl.submitted[-1]
    assert "tcp:10.9.0.2:6653" in direct.shell
    with pytest.raises(BackendError, match="h1 is not an OpenFlow switch"):
        switches.set_profile("h1", "ideal")


def test_a_restarted_switch_comes_back_with_the_profile_it_had_last():
    """set_switch_model's profile, not the deployed one (pica8-p3290)."""
    ctl = FakeController()
    switches = Switches(ctl, switch_setups(fig11()))
    switches.configure()
    switches.set_profile("s1", "ideal")
    switches.forget("s1")
    ctl.submitted.clear()
    switches.configure(nodes=["s1"])
    (_, model), (_, bridge) = ctl.submitted
    assert model.argv[-1].endswith("ideal.yaml")
    assert f"tcp:{MODEL_LISTEN}" in bridge.shell
    switches.set_profile("s1", None)
    switches.forget("s1")
    ctl.submitted.clear()
    switches.configure(nodes=["s1"])
    [(_, bridge)] = ctl.submitted
    assert "tcp:10.9.0.2:6653" in bridge.shell and "s1" not in switches.models


def test_a_failed_bridge_setup_or_a_dead_model_is_an_error():
    with pytest.raises(BackendError, match="switch s1: bridge setup failed .*boom"):
        Switches(FakeController(exit_code=1), switch_setups(fig11())).configure()

    ctl = FakeController()
    switches = Switches(ctl, switch_setups(fig11()))
    switches.configure()
    model = switches.models["s1"]
    model.complete(CommandResult("s1", model.id, "model", "exited", exit_code=2,
                                 stderr=b"profile: bad field"))
    with pytest.raises(BackendError, match="the switch model stopped .*bad field"):
        switches.check_models()


def test_bare_and_spanning_tree_switches():
    from selena.compat import load_selena_file
    from selena.paths import project_root
    from selena.topologies import torus

    listing = load_selena_file(project_root() / "scenarios" / "paper_listing1.py").topology
    (setup,) = switch_setups(listing)
    script = bridge_script(setup)
    # SELENA's Listing 2 adds the ports itself: br0 exists, its ports are up, none added.
    assert setup.bare and "add-br br0" in script
    assert len(re.findall(r"^port \S+$", script, re.M)) == 2      # up, no OpenFlow number
    assert not re.findall(r"^port \S+ \d+$", script, re.M)
    loops = switch_setups(torus(3, 3))
    assert len(loops) == 9 and all(s.stp for s in loops)
    assert "rstp_enable=true" in bridge_script(loops[0])
    assert "rstp_enable" not in bridge_script(switch_setups(fig11(None))[0])


def test_static_flows_make_a_secure_bridge_that_forwards_by_them_alone():
    from selena.topologies import fat_tree

    topo = fat_tree(4, pods=2, routing="static")
    validate(topo)
    setup = next(s for s in switch_setups(topo) if s.node == "e0_0")
    script = bridge_script(setup)
    assert len(setup.flows) == 16 and not setup.stp
    assert "fail-mode=secure" in script and "rstp_enable" not in script
    # the flows go in by a command of their own, one per line, through OpenFlow 1.3
    (flows,) = flow_scripts(setup)
    assert flows.startswith("printf '%s\\n' priority=10,ip,nw_dst=10.0.0.1,actions=output:3 ")
    assert flows.endswith(" | ovs-ofctl -O OpenFlow13 add-flows br0 -")


@pytest.mark.parametrize("change,message", [
    (lambda t: setattr(t.nodes["e0_0"], "stp", True), "node e0_0: static flows replace the "
                                                      "spanning tree"),
    (lambda t: t.nodes["e0_0"].flows.append("a\nb"), "node e0_0: flow 'a\\nb' is not one"),
    (lambda t: t.nodes["h1"].flows.append("actions=drop"), "node h1: only switches take "
                                                            "static OpenFlow flows"),
])
def test_bad_static_flows_are_named(change, message):
    from selena.topologies import fat_tree

    topo = fat_tree(4, pods=2, routing="static")
    change(topo)
    with pytest.raises(TopologyError) as info:
        validate(topo)
    assert message in str(info.value)


def test_a_switch_of_32_ports_is_set_up_by_one_command_as_before():
    from selena.control.protocol import CommandSpec
    from selena.topologies import star

    (setup,) = switch_setups(star(32))
    assert bridge_scripts(setup) == [bridge_script(setup)]
    CommandSpec(shell=bridge_script(setup)).encode()       # fits one Xenstore node


def _split(setup):
    """The bridge setup's commands, each checked to fit one Xenstore node."""
    from selena.control.protocol import SPEC_MAX_BYTES, CommandSpec

    scripts = bridge_scripts(setup)
    for script in scripts:
        assert len(CommandSpec(shell=script).encode()) <= SPEC_MAX_BYTES
        assert script.startswith("set -e\n")
    return scripts


@pytest.mark.parametrize("controller", [False, True])
def test_more_ports_than_one_command_holds_go_in_several_in_order(controller):
    from selena.topologies import star

    # 100 ports (past the guest limit validation enforces) to force three
    # commands; with a controller the wait for it comes last.
    setup = dataclasses.replace(switch_setups(star(100))[0],
                                controller="tcp:10.9.0.2:6653" if controller else None)
    scripts = _split(setup)
    assert len(scripts) == 3
    assert "add-br br0" in scripts[0] and all("add-br" not in s for s in scripts[1:])
    # every port exactly once, in order, each in a command that defines port()
    sent = [line for s in scripts for line in s.splitlines() if line.startswith("port ")]
    assert sent == [f"port {mac} {number}" for number, mac in setup.ports]
    for script in scripts:
        if "\nport " in script:
            assert script.index("port() {") < script.index("\nport ")
    # the bridge comes up (and connects) only after its last port
    last = scripts[-1]
    assert last.index(f"port {setup.ports[-1][1]}") < last.index("ip link set br0 up")
    assert sum(s.count("ip link set br0 up") for s in scripts) == 1
    if controller:
        assert last.rstrip().endswith("sleep 0.1; done")
        assert last.index("ip link set br0 up") < last.index("set-controller br0")


def test_forty_ports_pass_validation_and_take_two_commands():
    from selena.topologies import single

    topo = single(40)
    validate(topo)
    (setup,) = switch_setups(topo)
    assert len(setup.ports) == 40
    scripts = _split(setup)
    from selena.control.protocol import SPEC_MAX_BYTES, CommandSpec

    # in one piece it is over the limit, so it is split: two commands
    with pytest.raises(ValidationError, match=f"at most {SPEC_MAX_BYTES}"):
        CommandSpec(shell=bridge_script(setup)).encode()
    assert len(scripts) == 2
    assert "".join(scripts).count("\nport ") == 40


def test_switches_run_a_split_setup_in_rounds_and_name_the_failed_command():
    from selena.topologies import single

    topo = single(40)
    ctl = FakeController()
    lines: list[str] = []
    Switches(ctl, switch_setups(topo)).configure(progress=lines.append)
    sent = [spec.shell for _, spec in ctl.submitted]
    assert sent == bridge_scripts(switch_setups(topo)[0])
    assert lines == ["switch s1: 40 ports, standalone"]

    with pytest.raises(BackendError, match=r"switch s1: bridge setup \(command 1 of 2\) "
                                           r"failed .*boom"):
        Switches(FakeController(exit_code=1), switch_setups(topo)).configure()


def test_switches_wait_for_each_command_before_sending_the_next():
    """A switch's second command is submitted only once its first has ended;
    another switch's first command goes with the first round."""
    from selena.topologies import single

    big = switch_setups(single(40))[0]
    small = dataclasses.replace(switch_setups(fig11(None))[0], node="s2")
    order: list[str] = []

    class Recording(FakeController):
        def submit(self, node, spec):
            order.append(f"submit {node} {len(self.submitted)}")
            return super().submit(node, spec)

        def wait(self, handle, timeout=None):
            order.append(f"wait {handle.guest} {handle.id}")
            return super().wait(handle, timeout)

    Switches(Recording(), [big, small]).configure()
    assert order == ["submit s1 0", "submit s2 1", "wait s1 c1", "wait s2 c2",
                     "submit s1 2", "wait s1 c3"]


def test_long_flow_tables_are_split_into_commands_that_each_fit():
    from selena.control.protocol import CommandSpec
    from selena.topologies import fat_tree

    topo = fat_tree(4, pods=2, routing="static")
    topo.nodes["c0"].flows += [f"priority=5,tcp,tp_dst={p},actions=drop" for p in range(200)]
    (setup,) = [s for s in switch_setups(topo) if s.node == "c0"]
    scripts = flow_scripts(setup)
    assert len(scripts) > 1
    for script in scripts:
        CommandSpec(shell=script).encode()
    # every flow exactly once, in order
    sent = [f for script in scripts for f in script.split("' ", 1)[1].split(" | ")[0].split()]
    assert sent == list(setup.flows)
