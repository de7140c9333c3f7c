"""bench-control's Dom0 CPU accounting (the benchmark itself runs in the lab:
`selena lab bench-control`)."""

import time

import pytest

from selena.lab.bench_control import _dom0_cpu_seconds


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
