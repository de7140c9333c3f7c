"""A switch guest's bridge setup, run for real: the commands bridge_scripts
renders, each in a shell of its own and in order (as the agent runs them),
inside a private network namespace whose veth interfaces carry the switch's
MACs, against a private Open vSwitch (its datapaths replaced by dummies, so
nothing reaches the host's kernel datapath)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from ovs_sandbox import OvsSandbox

from selena.control.protocol import SPEC_MAX_BYTES, CommandSpec
from selena.openflow import SwitchSetup, bridge_scripts, switch_setups
from selena.topologies import star

pytestmark = pytest.mark.toolchain


@pytest.fixture
def ovs():
    if shutil.which("unshare") is None or shutil.which("ovs-vswitchd") is None:
        pytest.fail("needs unshare and Open vSwitch (.ci/host-deps installs them)")
    sandbox = OvsSandbox(Path(tempfile.mkdtemp(prefix="selena-ovs-ports-")))
    try:
        # override: the guest's system datapath and its ports become dummies.
        yield sandbox.start_daemons(dummy="--enable-dummy=override")
    finally:
        sandbox.stop()
        shutil.rmtree(sandbox.dir, ignore_errors=True)


def run_in_guest(ovs: OvsSandbox, setup: SwitchSetup, scripts: list[str],
                 macs: list[str] | None = None) -> subprocess.CompletedProcess:
    """Each script as its own `sh`, in order, stopping at the first failure, in
    a network namespace with one veth per port (eth<i>, the port's MAC) and a
    br0 standing in for the device OVS's kernel datapath would make."""
    for i, script in enumerate(scripts):
        (ovs.dir / f"cmd{i}.sh").write_text(script)
    macs = [mac for _number, mac in setup.ports] if macs is None else macs
    driver = ["set -e", "mount -t sysfs sysfs /sys", "ip link add br0 type bridge"]
    driver += [f"ip link add eth{i} address {mac} type veth peer name peer{i}"
               for i, mac in enumerate(macs)]
    driver += [f"sh {ovs.dir}/cmd{i}.sh || {{ echo \"command {i + 1} failed\"; exit 3; }}"
               for i in range(len(scripts))]
    return subprocess.run(["unshare", "--net", "--mount", "sh", "-c", "\n".join(driver)],
                          capture_output=True, text=True, env=ovs.env, timeout=300)


# 40 ports: the most a switch guest takes; 90: the ports in three commands
# (40, 46 and 4), beyond what validation lets a guest have, for the batches.
@pytest.mark.parametrize("hosts, commands", [(40, 2), (90, 3)])
def test_a_split_bridge_setup_adds_every_port_with_its_number(ovs, hosts, commands):
    (setup,) = switch_setups(star(hosts))
    scripts = bridge_scripts(setup)
    assert len(scripts) == commands
    for script in scripts:
        assert len(CommandSpec(shell=script).encode()) <= SPEC_MAX_BYTES
    done = run_in_guest(ovs, setup, scripts)
    assert done.returncode == 0, done.stdout + done.stderr
    ports = ovs.vsctl("list-ports", "br0").split()
    assert sorted(ports) == sorted(f"eth{i}" for i in range(hosts))
    # OpenFlow port = interface index + 1, as flows and the baseline expect
    for i in (0, hosts // 2, hosts - 1):
        assert ovs.vsctl("get", "interface", f"eth{i}", "ofport").strip() == str(i + 1)
    assert ovs.vsctl("get", "bridge", "br0", "fail_mode").strip() == "standalone"
    assert ovs.vsctl("get", "bridge", "br0",
                     "other-config:datapath-id").strip().strip('"') == setup.datapath_id


def test_a_missing_port_stops_the_setup_at_its_command(ovs):
    (setup,) = switch_setups(star(90))
    scripts = bridge_scripts(setup)
    # the guest lacks the interface of port 45, which the second command adds
    macs = [mac for number, mac in setup.ports if number != 45]
    done = run_in_guest(ovs, setup, scripts, macs)
    assert done.returncode == 3
    assert "command 2 failed" in done.stdout
    missing = dict(setup.ports)[45]
    assert f"no interface with MAC {missing}" in done.stderr
    ports = ovs.vsctl("list-ports", "br0").split()
    assert len(ports) == 44                     # ports 1 to 44; the third command never ran
    assert shlex.quote(missing) in scripts[1]
