"""The fidelity signals' own cost, measured on this host with the fake Dom0
(docs/fidelity.md quotes the printed figures): CPU of one load sample, of
judging a run's samples, and of one latency probe through the control
channel to a real guest agent (a stand-in `ping` on its PATH prints five
answers 0.2 s apart, as the guests' ping does)."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from selena.backends.xl import XlBackend
from selena.experiment import Experiment
from selena.fidelity import judge
from selena.model import Topology

pytestmark = pytest.mark.toolchain

PING = """#!/bin/sh
for i in 0 1 2 3 4; do echo "64 bytes from 10.0.0.2: seq=$i ttl=64 time=10.$i ms"; sleep 0.2; done
"""


def pair() -> Topology:
    topo = Topology("pair", tdf=4)
    h1 = topo.add_host("h1", ip="10.0.0.1/24")
    h2 = topo.add_host("h2", ip="10.0.0.2/24")
    topo.add_link(h1, h2, rate="10Mbit", delay="5ms")
    return topo


def test_the_signals_cost_little_and_a_probe_at_the_end_is_cut_short(fake_xen, tmp_path,
                                                                     monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ping").write_text(PING)
    (bin_dir / "ping").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    backend = XlBackend(fake_xen, tmp_path / "state", xenstore=fake_xen.dom0,
                        host_root=fake_xen.host_root)
    with Experiment(pair(), backend=backend, templates=None, out=tmp_path / "out",
                    ready_timeout=20, monitor_interval=0.2) as exp:
        exp.sleep(1.0)
        n = 100
        cpu = time.thread_time()
        samples = [backend.load_sample("pair") for _ in range(n)]
        sample_ms = (time.thread_time() - cpu) / n * 1e3
        cpu = time.thread_time()
        judge(samples)
        judge_ms = (time.thread_time() - cpu) * 1e3
        probe = exp._latency_probe()[0]
        assert probe is not None
        stop = threading.Event()
        cpu, real = time.thread_time(), time.monotonic()
        rounds = [probe(stop) for _ in range(5)]
        probe_ms = (time.thread_time() - cpu) / 5 * 1e3
        probe_real_s = (time.monotonic() - real) / 5
        stop.set()
        real = time.monotonic()
        cut = probe(stop)
        cut_s = time.monotonic() - real
    print(f"\nload sample {sample_ms:.3f} ms CPU; judging {n} samples {judge_ms:.2f} ms CPU; "
          f"one probe {probe_ms:.2f} ms CPU over {probe_real_s:.2f} real s; "
          f"a probe cut short after {cut_s:.2f} s")
    assert all(r.rtts_ms == (10.0, 10.1, 10.2, 10.3, 10.4) and not r.error for r in rounds)
    assert sample_ms < 5 and judge_ms < 50 and probe_ms < 50
    assert cut_s < 2 and len(cut.rtts_ms) <= 2
    fidelity = json.loads((tmp_path / "out/fidelity.json").read_text())
    latency = fidelity["latency"]
    assert latency["echoes"] >= 5 and latency["fastest_ms"] == 10.0, latency
    assert fidelity["verdict"] == "ok", fidelity

