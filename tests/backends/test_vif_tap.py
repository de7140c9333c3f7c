"""The vif tap: a packet socket that receives nothing (its filter drops all)
and lives as long as its experiment's state file."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from selena.backends.vif_tap import open_tap


def test_the_tap_is_bound_and_receives_nothing():
    tap = open_tap("lo")
    tap.settimeout(0.3)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        for _ in range(5):
            udp.sendto(b"x" * 100, ("127.0.0.1", 9))
    try:
        got = tap.recv(2048)
    except TimeoutError:
        got = b""
    tap.close()
    assert got == b""


def test_the_tap_ends_with_its_experiment(tmp_path):
    state = tmp_path / "exp.json"
    state.write_text("{}")
    proc = subprocess.Popen([sys.executable, "-m", "selena.backends.vif_tap", "exp",
                             str(tmp_path), "lo"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "tapping 1 vifs of exp\n"
    time.sleep(0.5)
    assert proc.poll() is None
    state.unlink()
    assert proc.wait(timeout=10) == 0
