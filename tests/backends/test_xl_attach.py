"""A guest with more vifs than a create takes (issue 30 item 5): its config
holds the first VIFS_AT_CREATE, the rest are attached one at a time while it
is still paused, each failure named, a failure or Ctrl-C rolled back, and the
plan shows the attaches. Against the fake Dom0 of tests/support/fake_xen.py.

Why: libxl runs a create's vif hotplug scripts side by side under a fixed
timeout, and in the lab a 40-vif switch's create outlived it."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from selena.backends import xl as xl_module
from selena.backends.xl import VIFS_AT_CREATE, XlBackend, xl_config
from selena.errors import BackendError, CommandError
from selena.model import Topology
from selena.plan import make_plan
from selena.topologies import single


def backend(fake_xen, tmp_path, **kw) -> XlBackend:
    return XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0, **kw)


def calls(fake) -> list[str]:
    return [" ".join(c) for c in fake.calls]


def hosts_then_switch(ports: int):
    """The hosts first, the switch last in the plan (single() puts it first)."""
    topo = Topology("late", tdf=1)
    hosts = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, ports + 1)]
    s1 = topo.add_switch("s1")
    for h in hosts:
        topo.add_link(h, s1)
    return topo


def test_a_config_holds_at_most_the_first_vifs_a_create_takes():
    plan = make_plan(single(40))
    s1 = plan.guest("s1")
    config = xl_config(plan, s1)
    vif_line = next(line for line in config.splitlines() if line.startswith("vif = ["))
    assert VIFS_AT_CREATE == 8
    assert vif_line.count("vifname=") == VIFS_AT_CREATE
    assert [f"vifname={v.name}" in vif_line for v in s1.vifs] == \
        [True] * VIFS_AT_CREATE + [False] * (40 - VIFS_AT_CREATE)
    assert len(s1.vifs) == 40           # the plan itself keeps every vif


def test_the_rest_are_attached_one_by_one_in_order_while_paused(fake_xen, tmp_path):
    plan = make_plan(single(12))
    backend(fake_xen, tmp_path, parallel=1).deploy(plan)
    s1 = plan.guest("s1")
    domid = fake_xen.domains["selena-single-s1"].domid
    made = calls(fake_xen)
    attaches = [c for c in made if c.startswith("xl network-attach")]
    assert attaches == [f"xl network-attach {domid} mac={v.mac} bridge={v.bridge} "
                        f"script=vif-openvswitch vifname={v.name} devid={n}"
                        for n, v in enumerate(s1.vifs) if n >= VIFS_AT_CREATE]
    # After the create (and the marker), before the guest's TDF is set and
    # long before it runs.
    create = made.index(f"xl create -p -q {tmp_path}/state/single/s1.cfg")
    assert create < made.index(attaches[0])
    assert made.index(attaches[-1]) < made.index(f"selena-tdf set {domid} 1")
    assert made.index(attaches[-1]) < next(i for i, c in enumerate(made)
                                           if c.startswith("selena-tdf unpause"))
    # The domain has every port, devid n = the plan's n-th vif (the guest's eth<n>).
    assert fake_xen.domains["selena-single-s1"].vifs == dict(enumerate(v.name for v in s1.vifs))
    # Hosts (one vif each) are created as before.
    assert all(len(d.vifs) == 1 for n, d in fake_xen.domains.items() if "-h" in n)


def test_a_guest_with_vifs_to_attach_is_created_first(fake_xen, tmp_path):
    plan = make_plan(hosts_then_switch(10))
    assert plan.guests[-1].node == "s1"
    backend(fake_xen, tmp_path, parallel=1).deploy(plan)
    creates = [c for c in calls(fake_xen) if c.startswith("xl create")]
    assert creates[0].endswith("/s1.cfg")
    assert len(fake_xen.domains["selena-late-s1"].vifs) == 10


def test_a_failed_attach_is_named_stops_the_rest_and_is_rolled_back(fake_xen, tmp_path):
    plan = make_plan(single(40))
    tenth = plan.guest("s1").vifs[9]
    fake_xen.fail[("xl", "network-attach", "1", f"mac={tenth.mac}")] = (
        3, "libxl: error: libxl_aoutils.c:539:async_exec_timeout: killing execution of "
           "/etc/xen/scripts/vif-openvswitch online because of timeout")
    with pytest.raises(BackendError) as caught:
        backend(fake_xen, tmp_path, parallel=1).deploy(plan)
    msg = str(caught.value)
    assert "\n" not in msg
    assert f"attaching s1's interface 9 (vif {tenth.name} on bridge {tenth.bridge}) failed" \
        in msg
    assert "because of timeout" in msg and "xen-hotplug.log" in msg
    made = calls(fake_xen)
    attaches = [c for c in made if c.startswith("xl network-attach")]
    assert len(attaches) == 2 and "devid=9" in attaches[-1]     # 8, then 9 failed
    assert "xl destroy 1" in made
    assert not any(c.startswith("xl create") and "/h" in c for c in made)
    assert not any(c.startswith("selena-tdf unpause") for c in made)
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert not (tmp_path / "state/single.json").exists()


def test_another_guests_failure_stops_the_attaches_in_flight(fake_xen, tmp_path):
    attached = [0]
    attaching = threading.Event()
    answer, create = fake_xen._answer_xl, fake_xen._create

    def slow_attach(args):
        if args[:2] == ("xl", "network-attach"):
            attached[0] += 1
            attaching.set()
            time.sleep(0.05)
        return answer(args)

    def failing_create(cfg):
        if cfg.name == "h3.cfg":    # created beside s1's attaches, once they run
            assert attaching.wait(5)
            return 1, "", "out of memory"
        return create(cfg)

    fake_xen._answer_xl, fake_xen._create = slow_attach, failing_create
    with pytest.raises(CommandError, match="out of memory"):
        backend(fake_xen, tmp_path, parallel=2).deploy(make_plan(single(40)))
    assert 1 <= attached[0] < 40 - VIFS_AT_CREATE
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert not (tmp_path / "state/single.json").exists()


def test_ctrl_c_during_the_attaches_stops_them_and_rolls_back(fake_xen, tmp_path):
    attached = [0]
    answer = fake_xen._answer_xl
    main = threading.main_thread().ident
    assert main is not None
    said: list[str] = []

    def slow_attach(args):
        if args[:2] == ("xl", "network-attach"):
            attached[0] += 1
            if attached[0] == 3:
                signal.pthread_kill(main, signal.SIGINT)
            time.sleep(0.05)
        return answer(args)

    fake_xen._answer_xl = slow_attach
    with pytest.raises(KeyboardInterrupt):
        backend(fake_xen, tmp_path, parallel=2).deploy(make_plan(single(40)), said.append)
    assert 3 <= attached[0] <= 5        # not the other 27-29
    assert any("deploy of single interrupted" in s for s in said)
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert not (tmp_path / "state/single.json").exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_plan_shows_the_attaches_after_the_create(fake_xen, tmp_path):
    plan = make_plan(single(40))
    text = backend(fake_xen, tmp_path).render(plan)
    assert fake_xen.calls == []
    lines = text.splitlines()
    s1 = plan.guest("s1")
    create = lines.index(f"xl create -p -q {tmp_path}/state/single/s1.cfg")
    assert lines[create + 1] == "D1=$(xl domid selena-single-s1)   # s1"
    attach = [f'xl network-attach "$D1" mac={v.mac} bridge={v.bridge} '
              f"script=vif-openvswitch vifname={v.name} devid={n}"
              for n, v in enumerate(s1.vifs) if n >= VIFS_AT_CREATE]
    first = lines.index(attach[0])
    assert create < first and lines[first:first + len(attach)] == attach
    # After the marker (so a rollback knows the domain), before the TDF is set.
    assert lines.index('xenstore-write "/local/domain/$D1/selena/experiment" single') < first
    assert first + len(attach) <= lines.index('selena-tdf set "$D1" 1')
    assert any(line.startswith("#    a guest's vifs past its first 8 are attached")
               for line in lines)
    # A small topology's plan says nothing of it (shipped plans stay as they were).
    assert "network-attach" not in backend(fake_xen, tmp_path).render(make_plan(single(5)))
    assert "attached after" not in backend(fake_xen, tmp_path).render(make_plan(single(5)))


def test_the_raw_create_baseline_attaches_the_rest_too(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.raw_create_seconds(make_plan(single(10)))
    made = calls(fake_xen)
    attaches = [c for c in made if c.startswith("xl network-attach raw-s1 ")]
    assert [a.rsplit(" ", 1)[-1] for a in attaches] == ["devid=8", "devid=9"]
    assert made.index(attaches[-1]) < made.index("xl destroy raw-s1")


def test_an_attach_has_its_own_time_limit(fake_xen, tmp_path, monkeypatch):
    seen: list[object] = []
    run = fake_xen.run

    def recording(argv, **kw):
        if tuple(argv[:2]) == ("xl", "network-attach"):
            seen.append(kw.get("timeout"))
        return run(argv, **kw)

    monkeypatch.setattr(fake_xen, "run", recording)
    backend(fake_xen, tmp_path, parallel=1).deploy(make_plan(single(9)))
    assert seen == [xl_module.XL_ATTACH_TIMEOUT_S]
