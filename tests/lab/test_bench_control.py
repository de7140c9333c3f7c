"""bench-control's Dom0 CPU accounting (the benchmark itself runs in the lab:
`selena lab bench-control`)."""

import os
import subprocess
import threading
import time

import pytest
from fake_runner import FakeRunner

from selena.lab.bench_control import (
    _BEFORE_WORKERS_END,
    _dom0_cpu_seconds,
    _OwnCpu,
    _spread,
    beside_xenstored,
    cpus_split,
)


def test_this_process_cpu_time_is_read_from_proc_and_grows_with_work():
    before = _dom0_cpu_seconds()
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    after = _dom0_cpu_seconds()
    assert after.selena - before.selena >= 0.15
    per_command = after.per_command(before, 10)
    assert per_command.selena == pytest.approx((after.selena - before.selena) / 10)
    # No xenstored runs on a test host; in Dom0 its time is summed the same way.
    assert after.xenstored == before.xenstored
    assert after.dom0_irq >= before.dom0_irq and after.dom0_steal >= before.dom0_steal


class _Stats:
    """Taskstats' answers, per process, set by the test between looks."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[int, tuple[float, float]]] = {}

    def threads(self, pid: str) -> dict[int, tuple[float, float]]:
        return dict(self.seen.get(pid, {}))


def test_own_cpu_counts_threads_born_since_from_zero_and_ended_ones_to_their_last_look():
    stats = _Stats()
    stats.seen = {"self": {1: (1.0, 0.5), 2: (2.0, 0.0)}, "77": {9: (10.0, 1.0)}}
    own = _OwnCpu(stats, ["77"])
    # A worker (3) is born and works; thread 2 ends after its last look.
    stats.seen = {"self": {1: (1.5, 0.5), 2: (2.25, 0.0), 3: (0.5, 0.25)},
                  "77": {9: (10.5, 1.5)}}
    own.look()
    stats.seen = {"self": {1: (2.0, 1.0)}, "77": {9: (11.0, 1.0)}}
    used = own.used()
    assert used["selena"] == pytest.approx((1.0 + 0.25 + 0.5, 0.5 + 0.0 + 0.25))
    assert used["xenstored"] == pytest.approx((1.0, 0.0))


def test_workers_are_looked_at_before_they_end():
    seen: list[int] = []
    both = threading.Barrier(2, timeout=10)

    def worker(_guest: str, count: int) -> list[float]:
        both.wait()                     # a thread each, as the guests' commands take
        return [float(count)] * count

    def look() -> None:
        seen.append(sum(1 for t in threading.enumerate() if t.name.startswith("ThreadPool")))
    _BEFORE_WORKERS_END.append(look)
    try:
        times = _spread(worker, ["a", "b"], 5)
    finally:
        _BEFORE_WORKERS_END.remove(look)
    assert sorted(times) == [2.0, 2.0, 3.0, 3.0, 3.0]
    assert seen == [2]


def test_splitting_the_cpus_pins_dom0_apart_and_gives_its_vcpus_back_after_a_failure(tmp_path):
    runner = FakeRunner()
    runner.respond(["selena-tdf", "host"], stdout="xen_major: 4\nnr_cpus: 4\n")
    runner.respond(["xl", "vcpu-list", "0"],
                   stdout="Name ID VCPU CPU State Time(s) Affinity (Hard / Soft)\n"
                          "Domain-0 0 0 0 r-- 10.0 all / all\n"
                          "Domain-0 0 1 1 -b- 9.0 all / all\n")
    cpus = tmp_path / "cpu"
    (cpus / "cpu1").mkdir(parents=True)
    (cpus / "cpu1" / "online").write_text("1\n")
    with pytest.raises(RuntimeError, match="measuring"), cpus_split(runner, cpus) as guests:
        assert guests == "1-3"
        assert ("xl", "vcpu-pin", "0", "all", "0") in runner.calls
        (cpus / "cpu1" / "online").write_text("0\n")     # what vcpu-set 0 1 left
        raise RuntimeError("measuring failed")
    assert runner.calls[-2:] == [("xl", "vcpu-set", "0", "2"),
                                 ("xl", "vcpu-pin", "0", "all", "all")]
    # vcpu-set makes the vCPU present again, not online: Dom0's sysfs does.
    assert (cpus / "cpu1" / "online").read_text() == "1"


def test_splitting_one_cpu_is_refused_before_anything_is_pinned():
    runner = FakeRunner()
    runner.respond(["selena-tdf", "host"], stdout="nr_cpus: 1\n")
    with pytest.raises(RuntimeError, match="needs 2"), cpus_split(runner):
        pass
    assert not [c for c in runner.calls if c[:2] in (("xl", "vcpu-set"), ("xl", "vcpu-pin"))]


def test_beside_xenstored_pins_every_thread_of_both_to_one_cpu_and_gives_each_its_mask_back():
    mask = os.sched_getaffinity(0)
    cpu = max(mask)
    stand_in = subprocess.Popen(["sleep", "60"])       # xenstored's part
    release = threading.Event()
    waiting = threading.Thread(target=release.wait)     # a thread started before the block
    waiting.start()
    try:
        with pytest.raises(RuntimeError, match="measuring"), \
                beside_xenstored(cpu, [str(stand_in.pid)]):
            assert os.sched_getaffinity(0) == {cpu}
            assert os.sched_getaffinity(waiting.native_id) == {cpu}
            assert os.sched_getaffinity(stand_in.pid) == {cpu}
            started = threading.Thread(target=release.wait)  # inherits the pinning
            started.start()
            raise RuntimeError("measuring failed")
        assert os.sched_getaffinity(0) == mask
        assert os.sched_getaffinity(waiting.native_id) == mask
        assert os.sched_getaffinity(started.native_id) == mask
        assert os.sched_getaffinity(stand_in.pid) == mask
    finally:
        release.set()
        stand_in.kill()
        stand_in.wait()
