"""`selena lab bench-control`'s channel measurement, run small against the
fake Xen backend (real agents, fake xenstored): the xl backend's controller
(its own two Xenstore connections) driven the way the benchmark drives it,
one thread per guest or one thread for all, beside a guest flooding output. The benchmark itself
runs in the lab. (Its floor needs `selena-agent xs echo` inside a guest,
which the fake backend cannot run.)"""

import pytest

from selena.backends.xl import XlBackend
from selena.experiment import Experiment
from selena.lab.bench_control import channel_round_trips, pipelined_round_trips
from selena.model import Topology

pytestmark = pytest.mark.toolchain


def test_bench_controls_round_trips_run_against_the_fake_xen_backend(fake_xen, tmp_path):
    topo = Topology("benchctl", tdf=1)
    for i in (1, 2, 3):
        topo.add_host(f"h{i}")
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(topo, backend=backend, templates=None, out=tmp_path / "out",
                    command_timeout=None, monitor=False, ready_timeout=20) as exp:
        assert exp.controller is not None
        flooding = exp.start("h3", "yes")
        executions: list[float] = []
        rtt = channel_round_trips(exp.controller, ["h1", "h2"], 40, executions)
        # One thread, one command in flight per guest: 41 does not split evenly.
        one_thread: list[float] = []
        piped = pipelined_round_trips(exp.controller, ["h1", "h2"], 41, one_thread)
        exp.kill(flooding)
        assert exp.wait(flooding).state == "killed"
    assert len(rtt) == len(executions) == 40
    assert all(t > 0 for t in rtt) and all(e >= 0 for e in executions)
    assert len(piped) == len(one_thread) == 41 and all(t > 0 for t in piped)
