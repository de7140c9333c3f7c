"""The xl backend against a fake Dom0 (tests/support/fake_xen.py): the
commands it runs, the Xenstore keys it writes, rollback, the warm pool,
teardown that removes exactly what selena created, and the plan printer."""

from __future__ import annotations

import json
import threading
import time

import pytest
from fake_xen import Domain, virtual_ns

from selena.backends.base import Backend
from selena.backends.xl import DeployState, XlBackend
from selena.errors import BackendError, CleanupError, CommandError, StateFileError
from selena.model import Topology
from selena.plan import make_plan, short_id

TAG = short_id("demo")


def demo_plan(tdf=10, name="demo", hosts=2, **link):
    topo = Topology(name, tdf=tdf)
    nodes = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, hosts + 1)]
    if hosts == 2:
        topo.add_link(nodes[0], nodes[1], delay="5ms", **link)
    else:
        topo.add_hub("lan", *nodes)
    return make_plan(topo)


def backend(fake_xen, tmp_path, **kw) -> XlBackend:
    return XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0, **kw)


def calls(fake) -> list[str]:
    return [" ".join(c) for c in fake.calls]


def test_deploy_creates_paused_sets_tdf_wires_shapes_then_unpauses_all(fake_xen, tmp_path):
    dep = backend(fake_xen, tmp_path, parallel=1).deploy(demo_plan())
    made = calls(fake_xen)
    assert made[0] == (f"ovs-vsctl add-br sl{TAG}l0 -- set bridge sl{TAG}l0 "
                       "external_ids:selena-experiment=demo")
    create = made.index(f"xl create -p -q {tmp_path}/state/demo/h1.cfg")
    # The domid comes from Xenstore (libxl's /local/domain/<id>/name), not xl.
    assert not any(c.startswith("xl domid") for c in made)
    # The TDF set once all are created, between a freeze and a thaw of them all.
    freeze = made.index("selena-tdf freeze 1 2")
    assert made[freeze + 1:freeze + 3] == ["selena-tdf set 1 2 10", "selena-tdf thaw 1 2"]
    assert create < made.index(f"xl create -p -q {tmp_path}/state/demo/h2.cfg") < freeze
    assert not any(c.startswith("selena-tdf set") for c in made[:freeze])
    netem = [c for c in made if "netem" in c]
    assert netem == [f"tc qdisc replace dev sv{TAG}0.0 root handle 1: netem delay 50000us",
                     f"tc qdisc replace dev sv{TAG}1.0 root handle 1: netem delay 50000us"]
    assert made[-1] == "selena-tdf unpause 1 2"      # last, all together, one process
    # The vif tap holds both vifs before the guests run (selena/backends/vif_tap.py).
    tap = next(c for c in fake_xen.calls if "selena.backends.vif_tap" in c)
    assert tap[3:] == ("demo", str(tmp_path / "state"), f"sv{TAG}0.0", f"sv{TAG}1.0")
    assert made.index(" ".join(tap)) < made.index("selena-tdf unpause 1 2")
    xs = fake_xen.dom0
    assert xs.read("/local/domain/1/selena/experiment") == b"demo"
    assert fake_xen.domains["selena-demo-h1"].net.splitlines()[:2] == [
        "name 02:2a:97:00:00:00 eth0", "addr 02:2a:97:00:00:00 10.0.0.1/24"]
    assert xs.get_perms("/local/domain/1/selena/cmd") == ["n0", "r1"]
    assert xs.get_perms("/local/domain/1/selena/out") == ["n1"]
    assert xs.read("/local/domain/1/selena/version") == b"1"
    assert dep.domids == {"h1": 1, "h2": 2}
    state = DeployState.load(tmp_path / "state/demo.json")
    assert state.nodes == {"h1": "selena-demo-h1", "h2": "selena-demo-h2"}
    assert "vifname=sv" in (tmp_path / "state/demo/h1.cfg").read_text()


def test_guests_are_created_several_at_a_time(fake_xen, tmp_path):
    inside = [0]
    most = [0]
    lock = threading.Lock()
    create = fake_xen._create

    def slow_create(cfg):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.2)
        with lock:
            inside[0] -= 1
        return create(cfg)

    fake_xen._create = slow_create
    dep = backend(fake_xen, tmp_path, parallel=4).deploy(demo_plan(hosts=8))
    assert len(dep.domids) == 8 and most[0] == 4


def _virtual_apart_s(fake_xen) -> float:
    """How far apart the domains' virtual clocks (so their guests' wall
    clocks) are, read at one real instant."""
    now = time.monotonic_ns()
    clocks = [virtual_ns(dom, now) for dom in fake_xen.domains.values()]
    return (max(clocks) - min(clocks)) / 1e9


@pytest.mark.parametrize("tdf", [10, 1])
def test_guests_created_apart_start_with_one_virtual_clock(fake_xen, tmp_path, tdf):
    """Created 0.15 s apart, each domain's clock reads real time until its
    TDF is set; set as each is created, four guests at TDF 10 would be
    about 0.4 s apart for the whole run."""
    create = fake_xen._create

    def slow_create(cfg):
        time.sleep(0.15)
        return create(cfg)

    fake_xen._create = slow_create
    backend(fake_xen, tmp_path, parallel=1).deploy(demo_plan(tdf=tdf, hosts=4))
    assert {dom.tdf for dom in fake_xen.domains.values()} == {str(tdf)}
    assert not any(dom.frozen for dom in fake_xen.domains.values())
    assert _virtual_apart_s(fake_xen) < 1e-6
    made = calls(fake_xen)
    # TDF 1: real time is every guest's clock already; nothing is frozen.
    assert any(c.startswith("selena-tdf freeze") for c in made) == (tdf != 1)


def test_a_tdf_change_keeps_the_guests_clocks_together(fake_xen, tmp_path):
    """A running domain's clock changes rate at its set: guests set one tool
    start-up (here 50 ms) apart would drift apart by that x (1/10 - 1/5)."""
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan(tdf=10, hosts=4))
    answer = fake_xen._answer_tdf

    def slow_start(args):
        time.sleep(0.05)
        return answer(args)

    fake_xen._answer_tdf = slow_start
    fake_xen.calls.clear()
    be.set_tdf("demo", 5)
    assert {dom.tdf for dom in fake_xen.domains.values()} == {"5"}
    # One call for every guest; their order is the order parallel creates got domids.
    sets = [c.split() for c in calls(fake_xen) if c.startswith("selena-tdf set")]
    assert len(sets) == 1
    assert sorted(sets[0][2:-1]) == sorted(str(d.domid) for d in fake_xen.domains.values())
    assert sets[0][-1] == "5"
    assert _virtual_apart_s(fake_xen) < 1e-6


def test_a_selena_tdf_that_sets_one_domain_at_a_time_is_named_with_the_fix(fake_xen,
                                                                         tmp_path):
    fake_xen.fail[("selena-tdf", "set")] = (2, "usage: selena-tdf get DOMID")
    with pytest.raises(BackendError, match=r"older than this selena; install the selena-xen "
                                           r"package built from this tree"):
        backend(fake_xen, tmp_path).deploy(demo_plan())
    assert fake_xen.domains == {}


def test_failure_mid_deploy_removes_exactly_what_was_created(fake_xen, tmp_path):
    fake_xen.refuse_tdf[(2, "10")] = "TDF out of range"
    with pytest.raises(CommandError, match="TDF out of range"):
        backend(fake_xen, tmp_path).deploy(demo_plan())
    made = calls(fake_xen)
    assert "xl destroy 1" in made and "xl destroy 2" in made
    assert f"ovs-vsctl --if-exists del-br sl{TAG}l0" in made
    assert not any(c.startswith("selena-tdf unpause") for c in made)
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert not (tmp_path / "state/demo.json").exists()


def test_redeploy_with_replace_replaces_the_first(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    fake_xen.calls.clear()
    be.deploy(demo_plan(), replace=True)
    made = calls(fake_xen)
    assert made.index("xl destroy 1") < made.index(f"xl create -p -q {tmp_path}/state/demo/h1.cfg")
    assert set(fake_xen.domains) == {"selena-demo-h1", "selena-demo-h2"}


def _foreign(fake_xen):
    """Someone else's domains and bridges, and selena leftovers without state."""
    store = fake_xen.store
    for name, domid, marker in (("selena-other-x", 70, "other"), ("selena-lookalike", 71, None),
                                ("webserver", 72, None)):
        store.add_domain(domid)
        fake_xen.domains[name] = Domain(name, domid, 128, paused=False)
        if marker:
            fake_xen.dom0.write(f"/local/domain/{domid}/selena/experiment", marker)
    fake_xen.bridges.update({"br0": None, "slcrash0": "other"})
    fake_xen.linux_bridges.update({"lxcbr0": None, "slcrashlb": "selena:other",
                                   "notours": "docker:x"})


def test_clean_removes_tagged_leftovers_and_leaves_everything_else(fake_xen, tmp_path):
    _foreign(fake_xen)
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    removed = be.clean()
    assert sorted(removed) == sorted(["selena-demo-h1", "selena-demo-h2", f"sl{TAG}l0",
                                      "selena-other-x", "slcrash0", "slcrashlb"])
    assert set(fake_xen.domains) == {"selena-lookalike", "webserver"}
    assert set(fake_xen.bridges) == {"br0"}
    assert set(fake_xen.linux_bridges) == {"lxcbr0", "notours"}


def test_linux_bridges_are_tagged_and_only_tagged_ones_removed(fake_xen, tmp_path):
    topo = Topology("lb", tdf=2)
    topo.add_link(topo.add_host("a", ip="10.0.0.1/24"), topo.add_host("b", ip="10.0.0.2/24"))
    be = backend(fake_xen, tmp_path)
    be.deploy(make_plan(topo, bridge_kind="linux"))
    (bridge,) = fake_xen.linux_bridges
    assert fake_xen.linux_bridges[bridge] == "selena:lb"
    fake_xen.linux_bridges[bridge] = "someone-else"      # the name now belongs to another
    be.destroy("lb")
    assert bridge in fake_xen.linux_bridges
    assert f"ip link del {bridge}" not in calls(fake_xen)


def test_corrupt_state_files_are_named_and_clean_still_sweeps_by_tags(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    (tmp_path / "state/demo.json").write_text("{not json")
    with pytest.raises(StateFileError, match=r"state file .*demo.json is corrupt"):
        be.destroy("demo")
    assert "corrupt" in be.status()[0]["error"]
    with pytest.raises(CleanupError) as info:
        be.clean()
    assert "demo.json is corrupt" in str(info.value)
    assert sorted(info.value.removed) == ["selena-demo-h1", "selena-demo-h2", f"sl{TAG}l0"]
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert be.clean() == []                 # and the next clean is clean


def test_clean_goes_on_past_a_failing_experiment_and_reports_it(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    first = be.deploy(demo_plan(name="first"))
    be.deploy(demo_plan(name="second"))
    fake_xen.fail[("xl", "destroy", str(first.domids["h1"]))] = (1, "domain busy")
    with pytest.raises(CleanupError) as info:
        be.clean()
    assert "experiment first" in str(info.value) and "domain busy" in str(info.value)
    assert "selena-second-h1" in info.value.removed
    assert set(fake_xen.domains) == {"selena-first-h1"}


def test_experiment_names_cannot_reach_outside_the_state_directory(fake_xen, tmp_path):
    outside = tmp_path / "elsewhere.json"
    outside.write_text('{"experiment": "x", "tdf": 1, "domains": {}, '
                       '"bridges": {"eth0": "linux"}}')
    be = backend(fake_xen, tmp_path)
    for name in ("../elsewhere", "a/b", "x\n", ""):
        with pytest.raises(BackendError, match="not an experiment name"):
            be.destroy(name)
    assert not any(c.startswith("ip link del") for c in calls(fake_xen))


def test_destroy_leaves_no_file_of_the_experiment_in_the_state_dir(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    made = tmp_path / "state" / "demo"
    assert (made / "vif-tap.log").exists() and list(made.glob("*.cfg"))
    be.destroy("demo")
    assert not made.exists()
    assert not [p.name for p in (tmp_path / "state").iterdir() if p.name.startswith("demo")]


def test_destroy_keeps_a_recorded_bridge_whose_tag_changed(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    fake_xen.bridges[f"sl{TAG}l0"] = "someone-else"
    be.destroy("demo")
    assert f"sl{TAG}l0" in fake_xen.bridges
    assert fake_xen.domains == {}


def test_a_failed_teardown_keeps_only_the_leftovers_on_record(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    h2 = be.deploy(demo_plan()).domids["h2"]
    fake_xen.fail[("xl", "destroy", str(h2))] = (1, "domain busy")
    with pytest.raises(BackendError, match="domain busy"):
        be.destroy("demo")
    left = DeployState.load(tmp_path / "state/demo.json")
    assert left.domains == {"selena-demo-h2": h2} and left.bridges == {}
    fake_xen.fail.clear()
    be.destroy("demo")
    assert not (tmp_path / "state/demo.json").exists()


def test_deploys_and_cleans_on_one_host_take_turns(fake_xen, tmp_path):
    first = backend(fake_xen, tmp_path)
    second = backend(fake_xen, tmp_path)
    said: list[str] = []
    done = threading.Event()
    with first._locked():
        thread = threading.Thread(target=lambda: (second.deploy(demo_plan(), said.append),
                                                  done.set()))
        thread.start()
        time.sleep(0.5)
        assert not done.is_set() and not fake_xen.domains
        assert any("waiting for" in s for s in said)
    thread.join(10)
    assert done.is_set() and len(fake_xen.domains) == 2


def test_pool_then_warm_deploy_reuses_the_guests(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    be.destroy("demo", pool=True)
    pooled = {n: d.domid for n, d in fake_xen.domains.items()}
    assert set(pooled) == {"selena-pool-tiny-host-m32-c1-0", "selena-pool-tiny-host-m32-c1-1"}
    assert all(d.paused for d in fake_xen.domains.values())
    assert fake_xen.dom0.read("/local/domain/1/selena/experiment") == b"pool"
    assert fake_xen.dom0.read_or_none("/local/domain/1/selena/version") is None
    assert fake_xen.bridges == {}                                # bridges always go
    fake_xen.calls.clear()
    dep = be.deploy(demo_plan(), warm=True)
    made = calls(fake_xen)
    assert not any(c.startswith("xl create") for c in made)
    assert sorted(dep.domids.values()) == sorted(pooled.values())
    assert any(c.startswith(f"xl network-attach {dep.domids['h1']} mac=02:2a:97:00:00:00")
               for c in made)
    assert f"selena-tdf set {dep.domids['h1']} 10" in made
    # Pooled guests have run: their clocks are dilated, never frozen or moved.
    assert not any(c.startswith("selena-tdf freeze") for c in made)


def test_host_info_and_wait_up(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    assert isinstance(be, Backend)
    info = be.host_info()
    assert (info.cpus, info.free_memory_mb, info.hypervisor) == (2, 4096, "Xen 4.17.5-fake")
    dep = be.deploy(demo_plan())
    h1, h2 = dep.domids["h1"], dep.domids["h2"]
    fake_xen.dom0.write(f"/local/domain/{h1}/device/vif/0/state", "4")
    fake_xen.dom0.write(f"/local/domain/{h2}/device/vif/0/state", "1")
    now = [0.0]
    said: list[str] = []

    def sleep(s):
        now[0] += s

    late = be.wait_up(dep, 3.0, said.append, poll=1.0, clock=lambda: now[0], sleep=sleep)
    assert late == ["h2"] and said == ["h1 up (1 of 2 up)"] and now[0] == 3.0
    fake_xen.dom0.write(f"/local/domain/{h2}/device/vif/0/state", "4")
    said.clear()
    assert be.wait_up(dep, 3.0, said.append, sleep=sleep) == []
    assert said[-1] == "h2 up (2 of 2 up)"


def test_render_prints_every_command_and_config_and_runs_none(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    text = be.render(demo_plan(rate="100Mbit"))
    assert fake_xen.calls == []
    lines = text.splitlines()
    assert lines[0].startswith("# selena plan: experiment demo, TDF 10, 2 guests")
    assert f"ovs-vsctl add-br sl{TAG}l0 -- set bridge sl{TAG}l0 " \
           "external_ids:selena-experiment=demo" in lines
    assert f"cat > {tmp_path}/state/demo/h1.cfg <<'EOF'" in lines
    assert 'name = "selena-demo-h1"' in lines
    assert f"xl create -p -q {tmp_path}/state/demo/h1.cfg" in lines
    assert "D1=$(xl domid selena-demo-h1)   # h1" in lines
    assert 'xenstore-chmod "/local/domain/$D1/selena/cmd" n0 "r$D1"' in lines
    assert 'selena-tdf set "$D1" "$D2" 10' in lines
    assert any(line.startswith(f"tc class replace dev sv{TAG}0.0 parent 1: classid 1:1 htb "
                               "rate 10000000bit") for line in lines)
    assert lines[-1] == 'selena-tdf unpause "$D1" "$D2"'
    assert any(line.endswith(f"selena.backends.vif_tap demo {tmp_path}/state sv{TAG}0.0 "
                             f"sv{TAG}1.0 &") for line in lines)


def test_set_tdf_pauses_sets_reshapes_and_unpauses_every_guest(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    dep = be.deploy(demo_plan(tdf=2, rate="2Mbit"))
    fake_xen.calls.clear()
    be.set_tdf("demo", 20)
    made = calls(fake_xen)
    pauses = [i for i, c in enumerate(made) if c.startswith("selena-tdf pause")]
    sets = [i for i, c in enumerate(made) if c.startswith("selena-tdf set")]
    unpauses = [i for i, c in enumerate(made) if c.startswith("selena-tdf unpause")]
    # one call each for both guests (in the order their domids were recorded)
    assert [sorted(made[i].split()[2:]) for i in pauses + unpauses] == [["1", "2"]] * 2
    assert [sorted(made[i].split()[2:]) for i in sets] == [["1", "2", "20"]]     # one process
    assert max(pauses) < min(sets) and max(sets) < min(unpauses)
    assert {d.tdf for d in fake_xen.domains.values()} == {"20"}
    # 5 ms one-way stays 5 ms of virtual time: 100 ms of real delay at TDF 20
    netem = [c for c in made if "netem" in c]
    assert len(netem) == 2 and all("delay 100000us" in c for c in netem)
    rates = [c.split(" rate ")[1].split()[0] for c in made if " rate " in c]
    assert rates == ["100000bit", "100000bit"]               # 2 Mbit/s / 20
    assert all(i < min(unpauses) for i, c in enumerate(made) if c.startswith("tc "))
    # One tc process for every vif: the guests stay paused while it runs.
    batch = made.index("tc -batch -")
    assert made[batch + 1:batch + 5] == [c for c in made if c.startswith("tc ")][1:]
    assert len(made[batch + 1:batch + 5]) == 4 and max(sets) < batch < min(unpauses)
    assert DeployState.load(tmp_path / "state/demo.json").tdf == 20
    assert sorted(dep.domids.values()) == sorted(d.domid for d in fake_xen.domains.values())


def test_domids_come_from_xenstore_names_even_beside_other_domains(fake_xen, tmp_path):
    # Domains that are not selena's, one of them named like a prefix of ours.
    for name in ("other", "selena-demo-h"):
        fake_xen.store.add_domain(fake_xen.next_domid, name)
        fake_xen.next_domid += 1
    dep = backend(fake_xen, tmp_path).deploy(demo_plan())
    assert sorted(dep.domids.values()) == [3, 4]
    assert dep.domids["h1"] == fake_xen.domains["selena-demo-h1"].domid
    assert fake_xen.domains["selena-demo-h1"].tdf == "10"


def test_a_created_guest_missing_from_xenstore_is_destroyed_and_named(fake_xen, tmp_path):
    create = fake_xen._create

    def create_without_name(cfg):
        result = create(cfg)
        domid = fake_xen.next_domid - 1
        fake_xen.dom0.rm(f"/local/domain/{domid}/name")
        return result

    fake_xen._create = create_without_name
    with pytest.raises(BackendError, match=r"domain selena-demo-h\d is not in Xenstore"):
        backend(fake_xen, tmp_path, parallel=1).deploy(demo_plan())
    assert "xl destroy selena-demo-h1" in calls(fake_xen)
    assert fake_xen.domains == {} and fake_xen.bridges == {}


def test_more_guests_than_one_tool_call_takes_are_unpaused_in_batches(fake_xen, tmp_path):
    topo = Topology("big")
    hosts = [topo.add_host(f"h{i}", ip=f"10.0.{i // 200}.{i % 200 + 1}/16")
             for i in range(1, 261)]
    topo.add_hub("lan", *hosts)
    text = backend(fake_xen, tmp_path).render(make_plan(topo))
    unpauses = [line.split()[2:] for line in text.splitlines()
                if line.startswith("selena-tdf unpause")]
    assert [len(u) for u in unpauses] == [257, 3]
    assert unpauses[1] == ['"$D258"', '"$D259"', '"$D260"']


def test_a_failed_tdf_change_unpauses_the_guests_and_raises_the_first_error(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan(tdf=2))
    fake_xen.refuse_tdf[(2, "20")] = "TDF out of range"
    fake_xen.fail[("selena-tdf", "unpause")] = (1, "selena-tdf: cannot unpause domain 1")
    said = []
    with pytest.raises(BackendError, match=r"guest selena-demo-h\d \(domain 2\) refused"):
        be.set_tdf("demo", 20, progress=said.append)
    assert any("guests left paused: selena-tdf: cannot unpause domain 1" in m for m in said)
    fake_xen.fail.clear()
    fake_xen.fail[("selena-tdf", "pause")] = (1, "selena-tdf: cannot pause domain 2")
    with pytest.raises(CommandError, match="cannot pause domain 2"):
        be.set_tdf("demo", 20)
    assert not any(c.startswith("selena-tdf unpause") for c in calls(fake_xen)[-3:])


def test_a_reshape_that_fails_mid_batch_names_the_vif_and_puts_the_tdf_back(fake_xen,
                                                                             tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan(tdf=2, rate="2Mbit"))
    fake_xen.fail[("tc", "qdisc", "replace", "dev", f"sv{TAG}1.0")] = (2, "RTNETLINK: busy")
    with pytest.raises(BackendError, match=rf"^re-shaping sv{TAG}1.0 at TDF 20 failed: "
                                           r".*RTNETLINK: busy \| Command failed -:4$"):
        be.set_tdf("demo", 20)
    fake_xen.fail.clear()
    assert {d.tdf for d in fake_xen.domains.values()} == {"2"}
    assert all(not d.paused for d in fake_xen.domains.values())


def test_freeze_and_thaw_act_on_every_guest_in_one_command(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    dep = be.deploy(demo_plan())
    fake_xen.calls.clear()
    assert be.freeze("demo") == (5000, 9000)
    assert all(d.frozen for d in fake_xen.domains.values())
    assert be.thaw("demo") == (5000, 9000)
    assert not any(d.frozen for d in fake_xen.domains.values())
    ids = " ".join(str(d) for _, d in sorted(dep.domids.items()))
    tdf_calls = [c for c in calls(fake_xen) if c.startswith("selena-tdf")]
    assert tdf_calls == [f"selena-tdf freeze {ids}", f"selena-tdf thaw {ids}"]


def test_freeze_leaves_a_guest_that_is_no_longer_ours_alone(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    dep = be.deploy(demo_plan())
    h2 = dep.domids["h2"]
    fake_xen.run(["xl", "destroy", str(h2)])
    fake_xen.calls.clear()      # the deploy's own freeze, before the clocks start
    be.freeze("demo")
    assert [c for c in calls(fake_xen) if c.startswith("selena-tdf freeze")] == \
        [f"selena-tdf freeze {dep.domids['h1']}"]
    with pytest.raises(BackendError, match="no experiment named 'nope'"):
        be.freeze("nope")


def test_a_refused_tdf_change_puts_everything_back(fake_xen, tmp_path):
    from selena.errors import UnitError

    be = backend(fake_xen, tmp_path)
    dep = be.deploy(demo_plan(tdf=2))
    fake_xen.calls.clear()
    with pytest.raises(UnitError, match="more than three decimals"):
        be.set_tdf("demo", 2.0005)
    assert fake_xen.calls == []                      # refused before anything changed
    fake_xen.refuse_tdf[(dep.domids["h2"], "5")] = "not privileged"
    with pytest.raises(BackendError, match="guest selena-demo-h2 .* refused: .*not privileged"):
        be.set_tdf("demo", 5)
    assert {d.tdf for d in fake_xen.domains.values()} == {"2"}
    assert all(not d.paused for d in fake_xen.domains.values())
    assert DeployState.load(tmp_path / "state/demo.json").tdf == 2


def cpu_plan(tdf, vcpus=1):
    topo = Topology("demo", tdf=tdf)
    h1 = topo.add_host("h1", ip="10.0.0.1/24", cpu_time="real", vcpus=vcpus)
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit")
    return make_plan(topo)


def test_a_real_cpu_guest_is_capped_to_100_over_tdf_and_follows_tdf_changes(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path, parallel=1)
    dep = be.deploy(cpu_plan(tdf=10, vcpus=2))
    h1, h2 = dep.domids["h1"], dep.domids["h2"]
    made = calls(fake_xen)
    # Capped before the guest first runs; the dilated guest is left alone.
    assert made.index(f"xl sched-credit2 -d {h1} -c 20") < made.index("selena-tdf unpause 1 2")
    assert not any(c.startswith(f"xl sched-credit2 -d {h2}") for c in made)
    be.set_tdf("demo", 4)
    assert (fake_xen.domains["selena-demo-h1"].cap, fake_xen.domains["selena-demo-h2"].cap) \
        == (50, 0)
    be.set_tdf("demo", 1)
    assert fake_xen.domains["selena-demo-h1"].cap == 0          # TDF 1: no cap at all


def test_a_tdf_the_cap_cannot_express_is_refused_before_anything_changes(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(cpu_plan(tdf=10))
    fake_xen.calls.clear()
    with pytest.raises(BackendError, match="needs a cap of 0.50% .* smallest is 1%"):
        be.set_tdf("demo", 200)
    assert fake_xen.calls == []


def test_a_failed_cap_restores_the_old_tdf_and_cap(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    dep = be.deploy(cpu_plan(tdf=10))
    fake_xen.fail[("xl", "sched-credit2", "-d", str(dep.domids["h1"]), "-c", "50")] = \
        (1, "Scheduler is not credit2")
    with pytest.raises(BackendError, match="capping the CPU of selena-demo-h1 at 50%"):
        be.set_tdf("demo", 2)
    assert {d.tdf for d in fake_xen.domains.values()} == {"10"}
    assert fake_xen.domains["selena-demo-h1"].cap == 10
    assert all(not d.paused for d in fake_xen.domains.values())


def share_plan(tdf, share=0.25, host_cpus=2):
    topo = Topology("demo", tdf=tdf)
    h1 = topo.add_host("h1", ip="10.0.0.1/24", cpu_share=share)
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit")
    return make_plan(topo, host_cpus=host_cpus)


def test_a_cpu_share_caps_the_guest_to_its_share_of_the_host_per_virtual_second(fake_xen,
                                                                                 tmp_path):
    """Mininet's CPULimitedHost cpu=0.25 on a host of 8 CPUs: two CPUs' worth
    per virtual second, 200/TDF percent, at every TDF."""
    be = backend(fake_xen, tmp_path, parallel=1)
    dep = be.deploy(share_plan(tdf=10, share=0.25, host_cpus=8))
    h1 = dep.domids["h1"]
    made = calls(fake_xen)
    assert made.index(f"xl sched-credit2 -d {h1} -c 20") < made.index("selena-tdf unpause 1 2")
    assert DeployState.load(tmp_path / "state/demo.json").cpu_worth == {"selena-demo-h1": 2.0}
    be.set_tdf("demo", 4)
    assert fake_xen.domains["selena-demo-h1"].cap == 50
    # At TDF 1 two CPUs' worth is more than its one vCPU can use: no cap.
    be.set_tdf("demo", 1)
    assert fake_xen.domains["selena-demo-h1"].cap == 0
    with pytest.raises(BackendError, match=r"guest selena-demo-h1 at TDF 300 needs a cap of "
                                           r"0.67% of a CPU; Xen's smallest is 1% \(TDF at most "
                                           r"200\)"):
        be.set_tdf("demo", 300)
    assert fake_xen.domains["selena-demo-h1"].cap == 0 and fake_xen.domains[
        "selena-demo-h1"].tdf == "1"


def test_a_cpu_share_on_a_host_that_does_not_say_its_cpus_is_refused_before_any_guest(
        fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    with pytest.raises(BackendError, match=r"node h1: cpu_share=0.25 is a share of the host's "
                                           r"CPUs, and this host did not say how many"):
        be.deploy(share_plan(tdf=10, host_cpus=None))
    assert fake_xen.domains == {} and not (tmp_path / "state/demo.json").exists()
    # The plan still renders, saying why no cap is set.
    assert "#    node h1: no CPU cap: cpu_share=0.25 is a share of the host's CPUs" in \
        be.render(share_plan(tdf=10, host_cpus=None))


def test_a_state_file_of_an_older_selena_keeps_its_real_cpu_caps(fake_xen, tmp_path):
    """State files written before cpu_worth: their capped guests are
    cpu_time='real' ones, capped at 100 x vCPUs / TDF."""
    be = backend(fake_xen, tmp_path)
    be.deploy(cpu_plan(tdf=10, vcpus=2))
    path = tmp_path / "state/demo.json"
    data = json.loads(path.read_text())
    del data["cpu_worth"]
    path.write_text(json.dumps(data))
    be.set_tdf("demo", 5)
    assert fake_xen.domains["selena-demo-h1"].cap == 40


def test_a_switch_of_40_ports_deploys_with_its_network_directives_in_one_value(fake_xen,
                                                                               tmp_path):
    """Dom0's writes meet xenstored's 2048-byte values too: a port's name and
    queue length line each took 2509 bytes for 40 ports (E2BIG)."""
    from selena.topologies import single

    plan = make_plan(single(40))
    backend(fake_xen, tmp_path).deploy(plan)
    net = fake_xen.domains["selena-single-s1"].net          # what Dom0 wrote
    assert net.count("name ") == 40 and len(net) <= 2048
