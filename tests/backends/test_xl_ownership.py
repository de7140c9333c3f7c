"""The xl backend (issue 28): who owns an experiment (run locks), teardown
that believes only the hypervisor, state files that must make sense, time
limits on Dom0 tools and the host lock, and Ctrl-C during a deploy. Against
the fake Dom0 of tests/support/fake_xen.py."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_xen import Domain

from selena.backends import xl as xl_module
from selena.backends.xl import DeployState, XlBackend
from selena.errors import (
    BackendError,
    CleanupError,
    CommandError,
    CommandTimeout,
    ControlError,
    ExperimentExists,
    ExperimentInUse,
    HostLockTimeout,
    HostNotReady,
    SelenaError,
    StateFileError,
)
from selena.model import Topology
from selena.plan import make_plan, short_id
from selena.runner import DEFAULT, DEFAULT_TIMEOUT_S, Runner

TAG = short_id("demo")


def demo_plan(name="demo", hosts=2, bridge_kind="ovs"):
    topo = Topology(name, tdf=10)
    nodes = [topo.add_host(f"h{i}", ip=f"10.0.0.{i}/24") for i in range(1, hosts + 1)]
    if hosts == 2:
        topo.add_link(nodes[0], nodes[1], delay="5ms")
    else:
        topo.add_hub("lan", *nodes)
    return make_plan(topo, bridge_kind=bridge_kind)


def backend(fake_xen, tmp_path, **kw) -> XlBackend:
    return XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0, **kw)


def calls(fake) -> list[str]:
    return [" ".join(c) for c in fake.calls]


# -- 1. ownership -------------------------------------------------------------------

def test_an_existing_experiment_is_refused_unless_replace(fake_xen, tmp_path):
    first = backend(fake_xen, tmp_path)
    first.deploy(demo_plan())
    first.close()                       # detached: deployed, nobody's run
    before = dict(fake_xen.domains)
    second = backend(fake_xen, tmp_path)
    fake_xen.calls.clear()
    with pytest.raises(ExperimentExists) as info:
        second.deploy(demo_plan())
    message = str(info.value)
    assert "\n" not in message and "demo" in message
    assert "`selena destroy demo`, or deploy with --replace / replace=True" in message
    assert not isinstance(info.value, ExperimentInUse)
    assert fake_xen.domains == before
    assert not any(c.startswith(("xl destroy", "xl create")) for c in calls(fake_xen))
    # Refused, it owns nothing: a third backend may destroy it.
    backend(fake_xen, tmp_path).destroy("demo")
    assert fake_xen.domains == {}


def test_replace_destroys_a_detached_experiment_first(fake_xen, tmp_path):
    first = backend(fake_xen, tmp_path)
    first.deploy(demo_plan())
    first.close()
    fake_xen.calls.clear()
    said: list[str] = []
    backend(fake_xen, tmp_path).deploy(demo_plan(), said.append, replace=True)
    made = calls(fake_xen)
    assert made.index("xl destroy 1") < made.index(f"xl create -p -q {tmp_path}/state/demo/h1.cfg")
    assert any("destroying it first" in s for s in said)


def test_a_live_run_is_not_replaced_destroyed_or_cleaned(fake_xen, tmp_path):
    owner = backend(fake_xen, tmp_path)
    owner.deploy(demo_plan())
    fake_xen.store.add_domain(70)       # a crashed experiment's leftover, and its bridge
    fake_xen.domains["selena-other-x"] = Domain("selena-other-x", 70, 128, paused=False)
    fake_xen.dom0.write("/local/domain/70/selena/experiment", "other")
    fake_xen.bridges["slcrash0"] = "other"
    other = backend(fake_xen, tmp_path)
    with pytest.raises(ExperimentInUse, match=rf"its run \(pid {os.getpid()}\) is still alive"):
        other.deploy(demo_plan(), replace=True)
    with pytest.raises(ExperimentInUse, match="force"):
        other.destroy("demo")
    said: list[str] = []
    removed = other.clean(progress=said.append)
    assert sorted(removed) == ["selena-other-x", "slcrash0"]
    assert (f"experiment demo: its run (pid {os.getpid()}) is still alive; skipped "
            "(selena clean --force removes it)") in said
    # Neither its recorded objects nor (in the tag sweep) its tagged ones went.
    assert set(fake_xen.domains) == {"selena-demo-h1", "selena-demo-h2"}
    assert set(fake_xen.bridges) == {f"sl{TAG}l0"}
    assert (tmp_path / "state/demo.json").exists()
    assert sorted(other.clean(force=True)) == ["selena-demo-h1", "selena-demo-h2", f"sl{TAG}l0"]
    assert fake_xen.domains == {} and fake_xen.bridges == {}


def test_the_owner_destroys_its_own_and_its_run_lock_goes(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    run = tmp_path / "state/demo.run"
    assert run.read_text().strip() == str(os.getpid())
    be.deploy(demo_plan(), replace=True)        # its own run: replace is fine
    be.destroy("demo")
    assert not run.exists() and fake_xen.domains == {}
    be.deploy(demo_plan())                      # and it may deploy it again
    be.close()
    assert not run.exists()
    backend(fake_xen, tmp_path).destroy("demo")  # after detach, anyone may destroy it


def test_a_run_lock_held_by_another_process_names_it_and_dies_with_it(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    be.close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"f = open({str(tmp_path / 'state/demo.run')!r}, 'a+')\n"
         "fcntl.flock(f, fcntl.LOCK_EX)\nf.write(f'{os.getpid()}\\n'); f.flush()\n"
         "print('held', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        other = backend(fake_xen, tmp_path)
        with pytest.raises(ExperimentInUse, match=rf"pid {holder.pid}\b") as info:
            other.deploy(demo_plan(), replace=True)
        assert info.value.pid == holder.pid
        with pytest.raises(ExperimentInUse):
            other.destroy("demo")
    finally:
        holder.kill()
        holder.wait()
    backend(fake_xen, tmp_path).destroy("demo")     # the kernel dropped its lock
    assert fake_xen.domains == {}


def test_a_failed_deploy_leaves_no_run_lock(fake_xen, tmp_path):
    fake_xen.refuse_tdf[(2, "10")] = "TDF out of range"
    be = backend(fake_xen, tmp_path)
    with pytest.raises(CommandError):
        be.deploy(demo_plan())
    assert not be._owns_run("demo")
    fake_xen.fail.clear()
    backend(fake_xen, tmp_path).deploy(demo_plan())


# -- 2. truthful teardown -----------------------------------------------------------

LIBXL_FAILURE = ("libxl: error: libxl_domain.c:340:libxl_list_domain: getting domain info "
                 "list: Permission denied\n")


def _not_found(name: str) -> str:
    return f"Can't get domid of domain name '{name}', maybe this domain does not exist.\n"


def test_a_transient_libxl_error_is_not_taken_for_a_gone_domain(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    h1 = be.deploy(demo_plan()).domids["h1"]
    # libxl could not list the domains: xl prints its not-found line after its error.
    fake_xen.fail[("xl", "domid", "selena-demo-h1")] = (1, LIBXL_FAILURE
                                                        + _not_found("selena-demo-h1"))
    fake_xen.fail[("xl", "list")] = (1, LIBXL_FAILURE)
    with pytest.raises(BackendError, match="cannot tell whether domain selena-demo-h1"):
        be.destroy("demo")
    assert "selena-demo-h1" in fake_xen.domains          # not destroyed, not forgotten
    assert DeployState.load(tmp_path / "state/demo.json").domains == {"selena-demo-h1": h1}
    fake_xen.fail.clear()
    be.destroy("demo")
    assert fake_xen.domains == {} and not (tmp_path / "state/demo.json").exists()


def test_an_odd_xl_domid_failure_is_checked_against_xl_list(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    h2 = be.deploy(demo_plan()).domids["h2"]
    fake_xen.fail[("xl", "domid", "selena-demo-h2")] = (1, "xl: cannot init xl context\n")
    with pytest.raises(BackendError, match="`xl list` shows it"):
        be.destroy("demo")
    assert set(fake_xen.domains) == {"selena-demo-h2"}
    fake_xen._destroy(h2)         # now it really is gone: xl list says so
    be.destroy("demo")
    assert not (tmp_path / "state/demo.json").exists()


def test_a_domain_gone_behind_selenas_back_counts_as_removed(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    h1 = be.deploy(demo_plan()).domids["h1"]
    fake_xen._destroy(h1)
    be.destroy("demo")
    assert f"xl destroy {h1}" not in calls(fake_xen) and fake_xen.domains == {}


def test_clean_collects_every_failing_listing_and_still_sweeps_the_rest(fake_xen, tmp_path):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    be.close()
    (tmp_path / "state/demo.json").unlink()         # only the tags are left
    fake_xen.linux_bridges["slcrashlb"] = "selena:other"
    fake_xen.fail[("xl", "list")] = (1, LIBXL_FAILURE)
    fake_xen.fail[("ovs-vsctl", "list-br")] = (1, "ovs-vsctl: unix:/var/run/openvswitch/"
                                                  "db.sock: database connection failed\n")
    with pytest.raises(CleanupError) as info:
        be.clean()
    text = str(info.value)
    assert "listing the domains (xl list)" in text and "getting domain info list" in text
    assert "listing the OVS bridges" in text and "database connection failed" in text
    assert info.value.removed == ["slcrashlb"]          # the Linux sweep still ran
    fake_xen.fail.clear()
    assert sorted(be.clean()) == ["selena-demo-h1", "selena-demo-h2", f"sl{TAG}l0"]


def test_clean_collects_a_marker_that_cannot_be_read(fake_xen, tmp_path, monkeypatch):
    be = backend(fake_xen, tmp_path)
    be.deploy(demo_plan())
    be.close()
    (tmp_path / "state/demo.json").unlink()
    real = be._marker

    h1 = fake_xen.domains["selena-demo-h1"].domid

    def marker(domid):
        if domid == h1:
            raise ControlError(f"xenstore read /local/domain/{h1}/selena/experiment: EIO")
        return real(domid)

    monkeypatch.setattr(be, "_marker", marker)
    with pytest.raises(CleanupError) as info:
        be.clean()
    assert "selena-demo-h1: reading its marker" in str(info.value)
    assert sorted(info.value.removed) == ["selena-demo-h2", f"sl{TAG}l0"]


def test_bridges_are_on_record_before_they_are_created(fake_xen, tmp_path):
    seen: list[dict[str, str]] = []
    run = fake_xen.run

    def spy(argv, **kw):
        if tuple(argv[:2]) == ("ovs-vsctl", "add-br"):
            seen.append(json.loads((tmp_path / "state/demo.json").read_text())["bridges"])
        return run(argv, **kw)

    fake_xen.run = spy
    backend(fake_xen, tmp_path).deploy(demo_plan())
    assert seen == [{f"sl{TAG}l0": "ovs"}]


def test_a_linux_bridge_whose_tagging_fails_is_not_left_behind(fake_xen, tmp_path):
    fake_xen.fail[("ip", "link", "set", f"sl{TAG}l0", "alias")] = (2, "RTNETLINK answers: "
                                                                      "Operation not permitted")
    be = backend(fake_xen, tmp_path)
    with pytest.raises(CommandError, match="Operation not permitted"):
        be.deploy(demo_plan(bridge_kind="linux"))
    assert fake_xen.linux_bridges == {} and fake_xen.domains == {}
    assert not (tmp_path / "state/demo.json").exists()


def _valid_state() -> dict[str, object]:
    return {"experiment": "demo", "tdf": 10.0, "domains": {"selena-demo-h1": 3},
            "bridges": {"sl0": "ovs", "sl1": "linux"}, "pool_keys": {"selena-demo-h1": "k"},
            "nodes": {"h1": "selena-demo-h1"},
            "shaping": {"sv0.0": {"rate_bps": 1e6, "delay_s": 0.005, "queue": None}},
            "tap_pid": 1234, "vif_nodes": {"sv0.0": "h1 eth0"},
            "real_cpu": {"selena-demo-h1": 1}, "vif_bridges": {"sv0.0": "sl0"}}


MALFORMED = [
    "", "{not json", "[]", "null", "42", '"demo"', "\xff", "\0",
    '{"experiment": "demo", "tdf": 1e400, "domains": {}, "bridges": {}}',
    '{"experiment": "demo", "tdf": NaN, "domains": {}, "bridges": {}}',
    '{"experiment": "demo", "tdf": Infinity, "domains": {}, "bridges": {}}',
    '{"experiment": "demo", "tdf": -Infinity, "domains": {}, "bridges": {}}',
    '{"experiment": "demo", "tdf": ' + "9" * 400 + ', "domains": {}, "bridges": {}}',
    '{"experiment": "demo", "tdf": 2, "domains": {"d": ' + "9" * 5000 + '}, "bridges": {}}',
    "[" * 100000 + "]" * 100000,
    '{"a": ' * 50000 + "1" + "}" * 50000,
]

BAD_VALUES: dict[str, list[object]] = {
    "experiment": [None, 3, "", "../x", "a/b", ["demo"], "x" * 5000],
    "tdf": [None, "10", 0, -1, True, [], {}, float("nan"), float("inf")],
    "domains": [None, [], "x", {"d": -1}, {"d": 0}, {"d": 1.5}, {"d": "3"}, {"d": True},
                {"d": 40000}, {"d": None}],
    "bridges": [None, [], {"b": "vde"}, {"b": None}, {"../../etc": "linux"}, {"b c": "ovs"},
                {"x" * 16: "ovs"}],
    "pool_keys": [[], "x", {"d": 3}],
    "nodes": [[], {"h1": None}, {"h1": 1}],
    "shaping": [[], {"v": []}, {"v": {"rate_bps": "1M"}}, {"v": {"delay_s": -1}},
                {"v": {"loss": float("nan")}}, {"v": {"rate_bps": float("inf")}},
                {"v": {"rate_bps": True}}],
    "tap_pid": ["12", -5, 1.5, 2**40, True, []],
    "vif_nodes": [[], {"v": 2}],
    "real_cpu": [[], {"d": 0}, {"d": -1}, {"d": "2"}, {"d": 2.5}],
    "vif_bridges": [[], {"v": None}],
}


def _refused(path: Path) -> None:
    with pytest.raises(StateFileError, match=rf"state file {path}"):
        DeployState.load(path)


def test_state_files_that_make_no_sense_are_refused_as_such(tmp_path):
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(_valid_state()))
    assert DeployState.load(path).domains == {"selena-demo-h1": 3}     # the baseline loads
    for text in MALFORMED:
        path.write_bytes(text.encode("utf-8", "surrogateescape") if text != "\xff"
                         else b"\xff\xfe")
        _refused(path)
    for key in ("experiment", "tdf", "domains", "bridges"):
        data = _valid_state()
        del data[key]
        path.write_text(json.dumps(data))
        _refused(path)
    for key, values in BAD_VALUES.items():
        for value in values:
            data = _valid_state()
            data[key] = value
            path.write_text(json.dumps(data))       # NaN and inf as NaN / Infinity
            _refused(path)


def test_no_mangled_state_file_escapes_as_anything_but_a_state_file_error(tmp_path):
    """Random cuts, flips and splices of a valid file: each loads or is refused
    with a StateFileError; nothing else (OverflowError, RecursionError...)."""
    path = tmp_path / "demo.json"
    good = json.dumps(_valid_state())
    pieces = ["1e400", "NaN", "-1", "[", "{", "]", "}", '"', "null", "true", "9" * 30, ",",
              "[" * 3000, "\\ud800", "0.0"]
    rng = random.Random(28)
    for _ in range(1500):
        text = good
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            cut = rng.randrange(0, 6)
            text = text[:at] + rng.choice(pieces) + text[at + cut:]
        path.write_text(text)
        try:
            state = DeployState.load(path)
        except StateFileError:
            continue
        assert isinstance(state, DeployState)


# -- 3. time limits -----------------------------------------------------------------

def test_every_command_has_a_time_limit_by_default():
    assert Runner().limit(DEFAULT) == DEFAULT_TIMEOUT_S
    assert Runner().limit(None) is None and Runner().limit(5) == 5
    start = time.monotonic()
    with pytest.raises(CommandTimeout, match=r"timed out after 0.3 s"):
        Runner(timeout=0.3).run([sys.executable, "-c", "import time; time.sleep(30)"],
                                check=False)
    assert time.monotonic() - start < 10


def test_xl_create_gets_its_own_longer_limit(fake_xen, tmp_path):
    limits: dict[str, object] = {}
    run = fake_xen.run

    def spy(argv, **kw):
        limits[" ".join(argv[:2])] = kw.get("timeout", DEFAULT)
        return run(argv, **kw)

    fake_xen.run = spy
    backend(fake_xen, tmp_path).deploy(demo_plan())
    assert limits["xl create"] == xl_module.XL_CREATE_TIMEOUT_S
    assert limits["selena-tdf set"] is DEFAULT


def test_the_host_lock_is_waited_for_a_bounded_time(fake_xen, tmp_path):
    holder = backend(fake_xen, tmp_path)
    waiter = backend(fake_xen, tmp_path, lock_timeout=0.5)
    said: list[str] = []
    with holder._locked():
        start = time.monotonic()
        with pytest.raises(HostLockTimeout) as info:
            waiter.deploy(demo_plan(), said.append)
        assert time.monotonic() - start < 5
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "state/.lock") in message
    assert f"pid {os.getpid()}" in message and "stop it" in message
    assert any("waiting for" in s for s in said) and fake_xen.domains == {}
    waiter.deploy(demo_plan())          # free again


def test_a_host_lock_the_user_may_not_open_is_one_line_saying_root(fake_xen, tmp_path,
                                                                    monkeypatch):
    """`selena clean` by a user who is not root was a PermissionError traceback
    (root opens any file, so the refusal is stood in for)."""
    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(xl_module, "open", refused, raising=False)
    with pytest.raises(HostNotReady, match=rf"^cannot open selena's host lock "
                                           rf"{tmp_path}/state/\.lock: Permission denied: "
                                           r"deploy, destroy and clean need root in Dom0 "
                                           r"\(sudo\)$"):
        backend(fake_xen, tmp_path).clean()
    assert fake_xen.domains == {}


# -- 4. Ctrl-C during a deploy ------------------------------------------------------

def test_ctrl_c_during_deploy_cancels_queued_creates_and_rolls_back(fake_xen, tmp_path):
    created: list[str] = []
    create, destroy = fake_xen._create, fake_xen._destroy
    said: list[str] = []

    started = [0]
    lock = threading.Lock()
    main = threading.main_thread().ident
    assert main is not None

    def slow_create(cfg):
        with lock:
            started[0] += 1
            third = started[0] == 3
        if third:         # Ctrl-C: 2 created, 1 or 2 in flight, 5 queued
            signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.2)
        created.append(cfg.name)
        return create(cfg)

    def slow_destroy(domid):
        if threading.current_thread() is threading.main_thread() and \
                not any("ignored" in s for s in said):
            signal.raise_signal(signal.SIGINT)      # a second Ctrl-C, mid-rollback
        time.sleep(0.05)
        return destroy(domid)

    fake_xen._create, fake_xen._destroy = slow_create, slow_destroy
    with pytest.raises(KeyboardInterrupt):
        backend(fake_xen, tmp_path, parallel=2).deploy(demo_plan(hosts=9), said.append)
    assert 3 <= len(created) <= 4           # the queued 5 were never created
    assert fake_xen.domains == {} and fake_xen.bridges == {}
    assert any("Ctrl-C is ignored" in s for s in said)
    assert any("deploy of demo interrupted" in s for s in said)
    time.sleep(0.5)                         # nothing left running brings it back
    assert not (tmp_path / "state/demo.json").exists()
    assert len(created) <= 4 and fake_xen.domains == {}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# -- 5. the vif tap -----------------------------------------------------------------

def test_a_stale_tap_log_does_not_hide_a_dead_tap(fake_xen, tmp_path, monkeypatch):
    monkeypatch.setattr(xl_module, "TAP_START_S", 0.5)
    log = tmp_path / "state/demo/vif-tap.log"
    log.parent.mkdir(parents=True)
    log.write_text("tapping 2 vifs of demo\n")          # a previous deploy's tap
    fake_xen.fail[(sys.executable, "-m", "selena.backends.vif_tap")] = (1, "")
    with pytest.raises(BackendError, match="vif tap of demo did not start"):
        backend(fake_xen, tmp_path).deploy(demo_plan())
    assert fake_xen.domains == {}
    # The rollback removes the logs with the rest: the error carried what they said.
    assert not (tmp_path / "state/demo").exists()


def test_every_new_error_is_a_selena_error():
    for cls in (ExperimentExists, ExperimentInUse, HostLockTimeout):
        assert issubclass(cls, SelenaError)


def test_clean_spares_the_tagged_objects_of_a_live_run_without_a_state_file(fake_xen,
                                                                            tmp_path):
    owner = backend(fake_xen, tmp_path)
    owner.deploy(demo_plan())
    (tmp_path / "state/demo.json").unlink()         # lost, but its run lives on
    other = backend(fake_xen, tmp_path)
    assert other.clean() == []
    assert set(fake_xen.domains) == {"selena-demo-h1", "selena-demo-h2"}
    owner.close()                                   # the run ends: its lock goes
    assert sorted(other.clean()) == ["selena-demo-h1", "selena-demo-h2", f"sl{TAG}l0"]
    assert not list((tmp_path / "state").glob("*.run"))


def test_a_failing_rollback_does_not_hide_the_deploys_own_error(fake_xen, tmp_path):
    fake_xen.fail[("selena-tdf", "set")] = (1, "TDF out of range")
    fake_xen.fail[("xl", "destroy")] = (1, "domain busy")
    said: list[str] = []
    with pytest.raises(CommandError, match="TDF out of range") as info:
        backend(fake_xen, tmp_path, parallel=1).deploy(demo_plan(), said.append)
    assert any("rollback of demo incomplete" in n for n in info.value.__notes__)
    assert any("domain busy" in s for s in said)
    assert DeployState.load(tmp_path / "state/demo.json").domains      # kept on record
    fake_xen.fail.clear()
    backend(fake_xen, tmp_path).destroy("demo")
    assert fake_xen.domains == {}


def test_status_names_the_live_run_of_each_experiment(fake_xen, tmp_path):
    owner = backend(fake_xen, tmp_path)
    owner.deploy(demo_plan())
    other = backend(fake_xen, tmp_path)
    assert [s["run_pid"] for s in other.status()] == [os.getpid()]
    owner.close()
    assert [s["run_pid"] for s in other.status()] == [None]
    assert other.run_owner("demo") is None
