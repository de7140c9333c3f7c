"""The deploy's preflight: the doctor's checks a run cannot do without, run
through the backend's runner before anything is created, and the one line a
user sees from the CLI and from their own script."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fake_runner import FakeRunner

from selena.backends.xl import XlBackend
from selena.errors import HostNotReady
from selena.experiment import Experiment
from selena.host.doctor import NOT_DOM0_MESSAGE
from selena.model import Topology

ROOT = Path(__file__).resolve().parents[2]
CREATES = ("xl create", "ovs-vsctl add-br", "ip link add")


def pair() -> Topology:
    topo = Topology("pre", tdf=2)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit")
    return topo


def test_not_a_dom0_is_refused_before_anything_is_created(tmp_path):
    runner = FakeRunner()
    backend = XlBackend(runner, tmp_path / "state", host_root=tmp_path / "empty-host")
    exp = Experiment(pair(), backend=backend, templates=None, out=tmp_path / "out")
    with pytest.raises(HostNotReady) as raised:
        exp.deploy()
    assert str(raised.value) == NOT_DOM0_MESSAGE and "\n" not in str(raised.value)
    ran = [" ".join(c) for c in runner.calls]
    assert not [c for c in ran if c.startswith(CREATES)], ran
    assert not (tmp_path / "out").exists() and not list((tmp_path).glob(".out.tmp-*"))
    assert not (tmp_path / "state").exists() or not list((tmp_path / "state").glob("*.json"))


def test_a_stock_hypervisor_is_named(fake_xen, tmp_path):
    fake_xen.fail[("selena-tdf", "get")] = (
        1, "selena-tdf: the hypervisor is not patched for time dilation "
           "(XEN_DOMCTL_selena_tdf unknown)\n")
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    exp = Experiment(pair(), backend=backend, templates=None)
    with pytest.raises(HostNotReady, match="stock hypervisor") as raised:
        exp.deploy()
    assert raised.value.check == "tdf-domctl"
    assert not fake_xen.domains and not fake_xen.bridges


def test_the_fake_dom0_passes_and_the_run_goes_on(fake_xen, tmp_path):
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(pair(), backend=backend, templates=None, ready_timeout=20) as exp:
        assert exp["h1"].cmd("true").ok
    asked = [c[:3] for c in fake_xen.calls]
    assert ("selena-tdf", "get", "0") in asked and ("ovs-vsctl", "show") in asked


def test_a_users_script_on_a_machine_without_xen_ends_in_one_line(tmp_path):
    script = tmp_path / "my_experiment.py"
    script.write_text(textwrap.dedent("""\
        from selena import Experiment
        from selena.model import Topology

        topo = Topology("mine", tdf=2)
        h1 = topo.add_host("h1", ip="10.0.0.1/24")
        h2 = topo.add_host("h2", ip="10.0.0.2/24")
        topo.add_link(h1, h2)
        with Experiment(topo, templates=None, out="results/mine") as exp:
            exp["h1"].cmd("true")
        """))
    if Path("/proc/xen").exists():
        pytest.skip("this machine is a Xen Dom0")   # the case is a machine without Xen
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SELENA_TRACEBACK", None)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0] == f"{script}:8: selena: error: {NOT_DOM0_MESSAGE}"
    assert not (tmp_path / "results").exists()
