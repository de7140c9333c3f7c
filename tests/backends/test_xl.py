"""The xl backend's command sequences, against a fake runner."""

import pytest

from selena.backends.xl import XlBackend
from selena.errors import BackendError, CommandError
from selena.model import Topology
from selena.plan import make_plan, short_id
from selena.runner import FakeRunner

TAG = short_id("demo")


def demo_plan(tdf=10):
    topo = Topology("demo", tdf=tdf)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, delay="5ms")
    return make_plan(topo)


def fake_xen():
    fake = FakeRunner()
    fake.respond(["xl", "domid", "selena-demo-h1"], stdout="5\n")
    fake.respond(["xl", "domid", "selena-demo-h2"], stdout="6\n")
    fake.respond(["xenstore-read", "/local/domain/5/selena/experiment"], stdout="demo\n")
    fake.respond(["xenstore-read", "/local/domain/6/selena/experiment"], stdout="demo\n")
    fake.respond(["ovs-vsctl", "br-get-external-id"], stdout="demo\n")
    return fake


def test_deploy_creates_paused_sets_tdf_wires_shapes_then_unpauses_all(tmp_path):
    fake = fake_xen()
    state = XlBackend(fake, tmp_path).deploy(demo_plan())
    calls = [" ".join(c) for c in fake.calls]
    assert calls[0] == (f"ovs-vsctl add-br sl{TAG}l0 -- set bridge sl{TAG}l0 "
                        "external_ids:selena-experiment=demo")
    create = calls.index(f"xl create -p -q {tmp_path}/demo/h1.cfg")
    keys = fake.calls[create + 2]
    assert keys[0] == "xenstore-write"
    written = dict(zip(keys[1::2], keys[2::2], strict=True))
    assert written["/local/domain/5/selena/experiment"] == "demo"
    assert written["/local/domain/5/selena/net"].splitlines()[0] == \
        "addr 02:2a:97:00:00:00 10.0.0.1/24"
    chmods = calls[create + 3:create + 9]
    assert "xenstore-chmod /local/domain/5/selena/cmd n0 r5" in chmods
    assert "xenstore-chmod /local/domain/5/selena/out n5" in chmods
    # The version key, which starts an agent's session, only once the rest is in place.
    assert calls[create + 9:create + 11] == [
        "xenstore-write /local/domain/5/selena/version 1",
        "xenstore-chmod /local/domain/5/selena/version n0 r5"]
    assert calls[create + 11] == "selena-tdf set 5 10"
    netem = [c for c in calls if "netem" in c]
    assert netem == [f"tc qdisc replace dev sv{TAG}0.0 root handle 1: netem delay 50000us",
                     f"tc qdisc replace dev sv{TAG}1.0 root handle 1: netem delay 50000us"]
    # unpausing comes last, all together
    assert calls[-2:] == ["xl unpause 5", "xl unpause 6"]
    assert state.domains == {"selena-demo-h1": 5, "selena-demo-h2": 6}
    assert (tmp_path / "demo.json").exists()
    assert "vifname=sv" in (tmp_path / "demo" / "h1.cfg").read_text()


def test_failure_mid_deploy_removes_exactly_what_was_created(tmp_path):
    fake = fake_xen()
    fake.respond(["selena-tdf", "set", "6"], returncode=1, stderr="TDF out of range")
    with pytest.raises(CommandError, match="TDF out of range"):
        XlBackend(fake, tmp_path).deploy(demo_plan())
    calls = [" ".join(c) for c in fake.calls]
    assert "xl destroy 5" in calls and "xl destroy 6" in calls
    assert f"ovs-vsctl --if-exists del-br sl{TAG}l0" in calls
    assert not any(c.startswith("xl unpause") for c in calls)
    assert not (tmp_path / "demo.json").exists()


def test_redeploy_is_idempotent(tmp_path):
    fake = fake_xen()
    backend = XlBackend(fake, tmp_path)
    backend.deploy(demo_plan())
    fake.calls.clear()
    backend.deploy(demo_plan())
    calls = [" ".join(c) for c in fake.calls]
    # the old guests go first, then everything is created again
    assert calls.index("xl destroy 5") < calls.index(f"xl create -p -q {tmp_path}/demo/h1.cfg")


def test_clean_leaves_foreign_domains_and_bridges_alone(tmp_path):
    fake = fake_xen()
    fake.respond(["xl", "list"], stdout=(
        "Name  ID Mem VCPUs State Time(s)\nDomain-0 0 1536 2 r----- 1.0\n"
        "selena-other-x 7 128 1 -b---- 1.0\nselena-lookalike 8 128 1 -b---- 1.0\n"
        "webserver 9 512 1 -b---- 1.0\n"))
    fake.respond(["xenstore-read", "/local/domain/7/selena/experiment"], stdout="other\n")
    fake.respond(["xenstore-read", "/local/domain/8/selena/experiment"], returncode=1)
    fake.respond(["xl", "domid", "selena-other-x"], stdout="7\n")
    fake.respond(["ovs-vsctl", "list-br"], stdout="br0\nslcrash0\n")
    fake.respond(["ovs-vsctl", "br-get-external-id", "br0"], stdout="")
    fake.respond(["ovs-vsctl", "br-get-external-id", "slcrash0"], stdout="other\n")
    removed = XlBackend(fake, tmp_path).clean()
    calls = [" ".join(c) for c in fake.calls]
    assert "xl destroy 7" in calls                      # tagged, state file lost
    assert "xl destroy 8" not in calls                  # selena- name but no marker
    assert "xl destroy 9" not in calls and "xl destroy 0" not in calls
    assert "ovs-vsctl --if-exists del-br slcrash0" in calls
    assert removed == ["selena-other-x", "slcrash0"]
    assert not any("del-br br0" in c or "ip link del" in c for c in calls)


def test_destroy_keeps_a_recorded_bridge_whose_tag_changed(tmp_path):
    fake = fake_xen()
    backend = XlBackend(fake, tmp_path)
    backend.deploy(demo_plan())
    fake.responses[("ovs-vsctl", "br-get-external-id")] = (0, "someone-else\n", "")
    fake.calls.clear()
    backend.destroy("demo")
    calls = [" ".join(c) for c in fake.calls]
    assert "xl destroy 5" in calls
    assert not any("del-br" in c for c in calls)


def test_freeze_and_thaw_act_on_all_own_guests_in_one_call(tmp_path):
    fake = fake_xen()
    backend = XlBackend(fake, tmp_path)
    backend.deploy(demo_plan())
    fake.calls.clear()
    backend.freeze(backend.load("demo"))
    backend.thaw(backend.load("demo"))
    tdf_calls = [" ".join(c) for c in fake.calls if c[0] == "selena-tdf"]
    assert tdf_calls == ["selena-tdf freeze 5 6", "selena-tdf thaw 5 6"]


def test_freeze_skips_a_guest_that_is_no_longer_ours(tmp_path):
    fake = fake_xen()
    backend = XlBackend(fake, tmp_path)
    backend.deploy(demo_plan())
    fake.respond(["xenstore-read", "/local/domain/6/selena/experiment"], stdout="other\n")
    fake.calls.clear()
    backend.freeze(backend.load("demo"))
    assert [list(c) for c in fake.calls if c[0] == "selena-tdf"] == [["selena-tdf", "freeze", "5"]]
    with pytest.raises(BackendError, match="no experiment named 'nope'"):
        backend.load("nope")


def test_xl_backend_implements_the_backend_interface():
    from selena.backends.base import Backend
    assert isinstance(XlBackend(FakeRunner()), Backend)


def test_host_free_memory_comes_from_xl_info(tmp_path):
    fake = FakeRunner()
    fake.respond(["xl", "info"], stdout="host : lab\nfree_memory            : 1830\n")
    assert XlBackend(fake, tmp_path).host_free_mb() == 1830
    assert XlBackend(FakeRunner(), tmp_path).host_free_mb() is None   # xl says nothing


def test_wait_up_reports_n_of_n_and_the_late_ones(tmp_path):
    fake = fake_xen()
    state = XlBackend(fake, tmp_path).deploy(demo_plan())
    fake.respond(["xenstore-read", "/local/domain/5/device/vif/0/state"], stdout="4\n")
    fake.respond(["xenstore-read", "/local/domain/6/device/vif/0/state"], stdout="1\n")
    now = [0.0]
    said: list[str] = []

    def sleep(s):
        now[0] += s

    late = XlBackend(fake, tmp_path).wait_up(state, 3.0, said.append, poll=1.0,
                                             clock=lambda: now[0], sleep=sleep)
    assert late == ["selena-demo-h2"]
    assert said == ["selena-demo-h1 up (1 of 2 up)"]
    assert now[0] == 3.0
    fake.respond(["xenstore-read", "/local/domain/6/device/vif/0/state"], stdout="4\n")
    said.clear()
    assert XlBackend(fake, tmp_path).wait_up(state, 3.0, said.append, sleep=sleep) == []
    assert said[-1] == "selena-demo-h2 up (2 of 2 up)"


def test_a_failed_teardown_keeps_only_the_leftovers_on_record(tmp_path):
    from selena.backends.xl import DeployState
    from selena.errors import BackendError
    fake = fake_xen()
    backend = XlBackend(fake, tmp_path)
    backend.deploy(demo_plan())
    fake.respond(["xl", "destroy", "6"], returncode=1, stderr="domain busy")
    with pytest.raises(BackendError, match="domain busy"):
        backend.destroy("demo")
    left = DeployState.load(tmp_path / "demo.json")
    assert left.domains == {"selena-demo-h2": 6} and left.bridges == {}
    del fake.responses[("xl", "destroy", "6")]
    backend.destroy("demo")
    assert not (tmp_path / "demo.json").exists()


def test_destroy_into_the_pool_unwires_untags_pauses_and_renames(tmp_path):
    fake = fake_xen()
    backend = XlBackend(fake, tmp_path)
    backend.deploy(demo_plan())
    fake.respond(["xl", "network-list", "5"], stdout=(
        "Idx BE Mac Addr.         handle state evt-ch   tx-/rx-ring-ref BE-path\n"
        "0   0  02:2a:97:00:00:00 0      4     -1        768/769  /local/domain/0/...\n"))
    fake.calls.clear()
    backend.destroy("demo", pool=True)
    calls = [" ".join(c) for c in fake.calls]
    actions = [c for c in calls if not c.startswith(("xl list", "xenstore-read", "xl domid"))]
    detach = actions.index("xl network-detach 5 0")
    assert actions[detach + 1:detach + 5] == [
        "xenstore-rm /local/domain/5/selena",
        "xenstore-write /local/domain/5/selena/experiment pool",
        "xl pause 5",
        "xl rename selena-demo-h1 selena-pool-tiny-host-m32-c1-0"]
    assert not any(c.startswith("xl destroy") for c in calls)
    assert f"ovs-vsctl --if-exists del-br sl{TAG}l0" in calls    # bridges always go


def test_warm_deploy_reuses_a_pooled_guest_and_creates_the_rest(tmp_path):
    fake = fake_xen()
    fake.respond(["xl", "list"], stdout=(
        "Name  ID Mem VCPUs State Time(s)\nDomain-0 0 1536 2 r----- 1.0\n"
        "selena-pool-tiny-host-m32-c1-0 9 32 1 --p--- 1.0\n"
        "selena-pool-tools-host-m64-c1-0 11 64 1 --p--- 1.0\n"))
    fake.respond(["xenstore-read", "/local/domain/9/selena/experiment"], stdout="pool\n")
    fake.respond(["xenstore-read", "/local/domain/11/selena/experiment"], stdout="pool\n")
    state = XlBackend(fake, tmp_path).deploy(demo_plan(), warm=True)
    calls = [" ".join(c) for c in fake.calls]
    assert "xl rename selena-pool-tiny-host-m32-c1-0 selena-demo-h1" in calls
    assert any(c.startswith("xl network-attach 9 mac=02:2a:97:00:00:00 bridge=") and
               f"vifname=sv{TAG}0.0" in c for c in calls)
    assert f"xl create -p -q {tmp_path}/demo/h2.cfg" in calls      # the pool had one only
    assert "xl rename selena-pool-tools-host-m64-c1-0" not in " ".join(calls)
    assert "selena-tdf set 9 10" in calls
    assert state.domains == {"selena-demo-h1": 9, "selena-demo-h2": 6}
    assert calls[-2:] == ["xl unpause 9", "xl unpause 6"]
