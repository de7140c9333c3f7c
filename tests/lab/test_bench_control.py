"""bench-control's Dom0 CPU accounting (the benchmark itself runs in the lab:
`selena lab bench-control`)."""

import time

from selena.lab.bench_control import _dom0_cpu_seconds


def test_this_process_cpu_time_is_read_from_proc_and_grows_with_work():
    before_self, before_xenstored = _dom0_cpu_seconds()
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    after_self, after_xenstored = _dom0_cpu_seconds()
    assert after_self - before_self >= 0.15
    # No xenstored runs on a test host; in Dom0 its time is summed the same way.
    assert after_xenstored == before_xenstored
