"""flowgen (guest-templates/tools/flowgen.c) on the host over 127.0.0.1: flows
complete with the right sizes, the schedule is exponential and seeded, flows
run concurrently, the closed loop (--concurrency) keeps N flows in flight, and
timeouts, connection errors and bad options are reported as documented."""

from __future__ import annotations

import csv
import io
import re
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.toolchain

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "guest-templates"
FLOWGEN = TEMPLATES / "build" / "bin" / "flowgen"
HEADER = ["flow", "start_ns", "end_ns", "fct_s", "bytes", "status"]


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    subprocess.run(["make", "-s", "-C", str(TEMPLATES), "tools"], check=True)


def run_client(*args: str, timeout: float = 60) -> tuple[int, list[dict[str, str]], str]:
    done = subprocess.run([str(FLOWGEN), "client", *args], capture_output=True, text=True,
                          timeout=timeout)
    rows: list[dict[str, str]] = []
    if done.stdout:
        reader = csv.DictReader(io.StringIO(done.stdout))
        assert reader.fieldnames == HEADER, done.stdout[:200]
        rows = list(reader)
    return done.returncode, rows, done.stderr


def schedule(*args: str) -> list[int]:
    """Scheduled start offsets (ns) from --dry-run."""
    done = subprocess.run([str(FLOWGEN), "client", "--dry-run", *args], capture_output=True,
                          text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "flow,offset_ns"
    return [int(line.split(",")[1]) for line in lines[1:]]


@pytest.fixture
def server() -> Iterator[int]:
    """A flowgen server on a free port; yields the port."""
    proc = subprocess.Popen([str(FLOWGEN), "server", "--port", "0"], stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.match(r"flowgen: listening on port (\d+)", line)
        assert match, line
        yield int(match.group(1))
    finally:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_binary_is_static() -> None:
    described = subprocess.run(["file", "-b", str(FLOWGEN)], capture_output=True,
                               text=True).stdout
    assert "statically linked" in described, described


def test_flows_complete_with_the_right_sizes_in_start_order(server: int) -> None:
    opts = ["--rate", "100", "--size", "200000", "--duration", "1", "--seed", "7"]
    rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(server), *opts)
    assert rc == 0, err
    assert len(rows) == len(schedule(*opts)) > 50
    assert [int(r["flow"]) for r in rows] == list(range(len(rows)))
    starts = [int(r["start_ns"]) for r in rows]
    assert starts == sorted(starts)
    for r in rows:
        assert r["status"] == "ok" and int(r["bytes"]) == 200000
        fct_ns = int(r["end_ns"]) - int(r["start_ns"])
        assert fct_ns > 0
        assert float(r["fct_s"]) == pytest.approx(fct_ns / 1e9, abs=1e-9)
    summary = err.strip().splitlines()
    assert len(summary) == 1 and f"{len(rows)} ok, 0 timeout, 0 error" in summary[0]


def test_max_flows_caps_the_count(server: int) -> None:
    rc, rows, _ = run_client("--host", "127.0.0.1", "--port", str(server), "--rate", "1000",
                             "--size", "10", "--duration", "10", "--max-flows", "5")
    assert rc == 0 and len(rows) == 5


def test_schedule_is_seeded_and_exponential() -> None:
    opts = ["--rate", "1000", "--size", "1", "--duration", "50"]
    a = schedule(*opts, "--seed", "42")
    assert a == schedule(*opts, "--seed", "42")
    assert a != schedule(*opts, "--seed", "43")
    assert a[0] == 0 and a == sorted(a) and a[-1] < 50e9
    for seed in ("1", "42", "12345"):
        offsets = schedule(*opts, "--seed", seed)
        gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
        n = len(gaps)   # ~50000: the mean's standard error is ~0.45 %
        assert 48000 < n < 52000
        mean = statistics.fmean(gaps)
        assert mean == pytest.approx(1e6, rel=0.03)                  # > 6 sigma
        # exponential: standard deviation equals the mean, P(gap > mean) = 1/e
        assert statistics.pstdev(gaps) / mean == pytest.approx(1.0, abs=0.05)
        assert sum(g > 1e6 for g in gaps) / n == pytest.approx(0.3679, abs=0.015)


def test_real_start_times_follow_the_schedule(server: int) -> None:
    opts = ["--rate", "200", "--size", "1000", "--duration", "3", "--seed", "3"]
    planned = schedule(*opts)
    rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(server), *opts)
    assert rc == 0, err
    starts = [int(r["start_ns"]) for r in rows]
    assert len(starts) == len(planned)
    # starts are scheduled against absolute offsets, so lateness does not add up;
    # the tolerance covers a loaded 2-core machine
    lateness = [s - starts[0] - p for s, p in zip(starts, planned, strict=True)]
    assert min(lateness) >= 0
    assert statistics.median(lateness) < 50e6
    real_mean = (starts[-1] - starts[0]) / (len(starts) - 1)
    planned_mean = (planned[-1] - planned[0]) / (len(planned) - 1)
    assert real_mean == pytest.approx(planned_mean, rel=0.05)
    assert real_mean == pytest.approx(5e6, rel=0.2)   # ~600 gaps: 4 % standard error


class SlowEofServer:
    """Reads each connection to EOF, then waits `delay` seconds before closing; with
    more delays, the i-th connection accepted waits delays[i % len(delays)]."""

    def __init__(self, delay: float, *more: float) -> None:
        self.delays = (delay, *more)
        self.accepted = 0
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = int(self.sock.getsockname()[1])
        self.received: list[int] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            delay = self.delays[self.accepted % len(self.delays)]
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn, delay), daemon=True).start()

    def _serve(self, conn: socket.socket, delay: float) -> None:
        with conn:
            total = 0
            while chunk := conn.recv(65536):
                total += len(chunk)
            self.received.append(total)
            time.sleep(delay)

    def close(self) -> None:
        self.sock.close()


def test_flows_run_concurrently() -> None:
    slow = SlowEofServer(delay=0.5)
    try:
        opts = ["--rate", "20", "--size", "50000", "--duration", "1", "--seed", "5"]
        began = time.monotonic()
        rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(slow.port), *opts)
        wall = time.monotonic() - began
    finally:
        slow.close()
    assert rc == 0, err
    assert len(rows) >= 10
    assert sorted(slow.received) == [50000] * len(rows)
    fcts = [float(r["fct_s"]) for r in rows]
    assert min(fcts) >= 0.5                     # the FCT includes waiting for EOF
    assert wall < sum(fcts) / 2                 # sequential flows would take sum(fcts)
    spans = [(int(r["start_ns"]), int(r["end_ns"])) for r in rows]
    most = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert most >= 4


def spans_of(rows: list[dict[str, str]]) -> list[tuple[int, int]]:
    return [(int(r["start_ns"]), int(r["end_ns"])) for r in rows]


def test_concurrency_keeps_n_flows_in_flight_and_replaces_each_at_once() -> None:
    # uneven flow lengths, so replacing each flow as it ends differs from waiting
    # for a whole batch of 3 to end (that would start flow 3 ~0.2 s late)
    slow = SlowEofServer(0.05, 0.15, 0.25, 0.1)
    try:
        rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(slow.port),
                                   "--concurrency", "3", "--size", "20000",
                                   "--duration", "1.5")
    finally:
        slow.close()
    assert rc == 0, err
    assert [int(r["flow"]) for r in rows] == list(range(len(rows)))
    assert all(r["status"] == "ok" and r["bytes"] == "20000" for r in rows)
    assert sorted(slow.received) == [20000] * len(rows)
    spans = spans_of(rows)
    starts = [s for s, _ in spans]
    assert starts == sorted(starts)
    first, duration_ns = starts[0], int(1.5e9)
    assert all(s < first + duration_ns for s in starts)     # none after the duration
    assert len(rows) > 3 * 4            # ~1.5 s / 0.14 s mean flow * 3 in flight
    # never more than 3 at once: the count just after each start
    assert max(sum(s <= t < e for s, e in spans) for t in starts) <= 3
    assert sum(s <= starts[2] < e for s, e in spans) == 3   # 3 start together
    # flow k >= 3 replaces the (k-2)th end (1-based): not before it, and right
    # after it while the duration runs (the tolerance covers a loaded machine)
    ends = sorted(e for _, e in spans)
    for k in range(3, len(rows)):
        assert starts[k] >= ends[k - 3]
        assert starts[k] - ends[k - 3] < 50e6, k
    # every end well inside the duration was replaced
    replaced = [m for m, e in enumerate(ends) if e < first + duration_ns - 100e6]
    assert len(rows) >= replaced[-1] + 4
    summary = err.strip().splitlines()
    assert len(summary) == 1 and "concurrency 3" in summary[0], err
    assert f"{len(rows)} flows" in summary[0] and f"{len(rows)} ok, 0 timeout" in summary[0]


def test_concurrency_lets_flows_in_flight_finish_after_the_duration() -> None:
    slow = SlowEofServer(delay=0.6)
    try:
        began = time.monotonic()
        rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(slow.port),
                                   "--concurrency", "2", "--size", "1000",
                                   "--duration", "0.2")
        wall = time.monotonic() - began
    finally:
        slow.close()
    assert rc == 0, err
    assert [r["status"] for r in rows] == ["ok", "ok"]
    spans = spans_of(rows)
    assert all(e - spans[0][0] >= 0.6e9 for _, e in spans)  # ended past the duration
    assert 0.6 <= wall < 3


def test_max_flows_caps_the_count_with_concurrency(server: int) -> None:
    began = time.monotonic()
    rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(server),
                               "--concurrency", "4", "--size", "10", "--duration", "30",
                               "--max-flows", "9")
    assert rc == 0, err
    assert time.monotonic() - began < 10          # did not run for the duration
    assert [int(r["flow"]) for r in rows] == list(range(9))
    assert all(r["status"] == "ok" for r in rows)
    assert "9 flows" in err and "concurrency 4" in err


def test_concurrency_replaces_failed_flows_too() -> None:
    # each refused connection is an ended flow, so another starts (after the
    # back-off's few milliseconds)
    rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(free_port()),
                               "--concurrency", "2", "--size", "1000", "--duration", "5",
                               "--max-flows", "6")
    assert rc == 1
    assert [r["status"] for r in rows] == ["error:ECONNREFUSED"] * 6
    assert "6 error" in err


def test_concurrency_backs_off_while_flows_fail() -> None:
    # Without a back-off a refused port made 64624 failed flows in 1 s: the
    # delay (1 ms, doubled by each error, at most 1 s) leaves a dozen or so.
    rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(free_port()),
                               "--concurrency", "2", "--size", "1000", "--duration", "1")
    assert rc == 1
    assert 6 <= len(rows) <= 30, err
    assert {r["status"] for r in rows} == {"error:ECONNREFUSED"}
    starts = [int(r["start_ns"]) for r in rows]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    # The delay grows: the longest gap is at least 64 ms and comes late.
    assert max(gaps) >= 64_000_000 and gaps.index(max(gaps)) >= len(gaps) // 2, gaps


def test_flow_without_eof_times_out() -> None:
    # a listening socket that never accepts: the handshake and the data complete
    # in the kernel, but no EOF ever comes back
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = str(silent.getsockname()[1])
        rc, rows, err = run_client("--host", "127.0.0.1", "--port", port, "--rate", "10",
                                   "--size", "1000", "--duration", "1", "--max-flows", "2",
                                   "--timeout", "1")
    assert rc == 1
    assert [r["status"] for r in rows] == ["timeout", "timeout"]
    assert all(1.0 <= float(r["fct_s"]) < 3.0 for r in rows)
    assert "0 ok, 2 timeout, 0 error" in err


def test_closed_port_is_econnrefused() -> None:
    rc, rows, err = run_client("--host", "127.0.0.1", "--port", str(free_port()), "--rate", "10",
                               "--size", "1000", "--duration", "1", "--max-flows", "3")
    assert rc == 1
    assert [r["status"] for r in rows] == ["error:ECONNREFUSED"] * 3
    assert all(r["bytes"] == "0" for r in rows)
    assert "3 error" in err


def test_server_serves_many_concurrent_connections(server: int) -> None:
    conns = [socket.create_connection(("127.0.0.1", server)) for _ in range(200)]
    try:
        for c in conns:
            c.sendall(b"x" * 10000)
            c.shutdown(socket.SHUT_WR)
        for c in conns:
            c.settimeout(10)
            assert c.recv(1) == b""          # EOF: the server read all and closed
    finally:
        for c in conns:
            c.close()


BASE = ["--host", "127.0.0.1", "--rate", "1", "--size", "1", "--duration", "1"]
NO_LOOP = ["--host", "127.0.0.1", "--size", "1", "--duration", "1"]   # no --rate/--concurrency


@pytest.mark.parametrize(("argv", "named"), [
    (["client", "--host", "127.0.0.1", "--rate", "0", "--size", "1", "--duration", "1"],
     "--rate"),
    (["client", "--host", "127.0.0.1", "--rate", "fast", "--size", "1", "--duration", "1"],
     "--rate"),
    (["client", "--host", "127.0.0.1", "--rate", "1", "--size", "-5", "--duration", "1"],
     "--size"),
    (["client", "--host", "localhost", "--rate", "1", "--size", "1", "--duration", "1"],
     "--host"),
    (["client", *BASE, "--port", "70000"], "--port"),
    (["client", *BASE, "--timeout"], "--timeout"),
    (["client", *BASE, "--frobnicate", "1"], "--frobnicate"),
    (["client", "--host", "127.0.0.1", "--rate", "1", "--size", "1"], "--duration"),
    (["client", "--rate", "1", "--size", "1", "--duration", "1"], "--host"),
    (["client", *BASE, "--concurrency", "3"], "--rate and --concurrency"),
    (["client", *NO_LOOP], "missing --rate or --concurrency"),
    (["client", *NO_LOOP, "--concurrency", "0"], "for --concurrency"),
    (["client", *NO_LOOP, "--concurrency", "1025"], "for --concurrency"),
    (["client", *NO_LOOP, "--concurrency", "-1"], "for --concurrency"),
    (["client", *NO_LOOP, "--concurrency", "2", "--dry-run"], "--dry-run"),
    (["server", "--port", "x"], "--port"),
    (["serve"], "serve"),
    ([], "mode"),
])
def test_bad_usage_exits_2_naming_the_problem(argv: list[str], named: str) -> None:
    done = subprocess.run([str(FLOWGEN), *argv], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert named in done.stderr.splitlines()[0], done.stderr
    assert "usage:" in done.stderr and done.stdout == ""
