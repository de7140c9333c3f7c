"""Run in the lab's Dom0 by test_control_keys_e2e.py: one guest, real
oxenstored, the real agent. Prints what the test checks: a running command's
agent/started/<id> key and its absent out/<id>/state, the final state (over `running` in
started/<id> when its end marker's event comes, no `state`), the removal of its
keys, the seeded random number generator, and selena's CPU per `true` (printed, never asserted)."""

import time

from selena.control.channel import Controller, base_path
from selena.control.protocol import CommandSpec
from selena.control.xenstore import XenstoreConnection
from selena.experiment import Experiment
from selena.model import Topology


def topology() -> Topology:
    topo = Topology("ctlkeys", tdf=1)
    topo.add_host("h1")
    return topo


def main() -> None:
    with Experiment(topology(), command_timeout=None, monitor=False) as exp:
        probe(exp)


def probe(exp: Experiment) -> None:
    ctl = exp.controller
    assert isinstance(ctl, Controller)     # the xl backend's: Xenstore keys to read
    base = base_path(exp.domid("h1"))
    out = f"{base}/out"
    handle = ctl.submit("h1", CommandSpec(argv=("sleep", "2")))
    deadline = time.monotonic() + 20
    started = None
    while started is None and time.monotonic() < deadline:
        started = ctl.xs.read_or_none(f"{base}/agent/started/{handle.id}")
        time.sleep(0.05)
    state = ctl.xs.read_or_none(f"{out}/{handle.id}/state")
    print(f"started={started!r}")
    print(f"state-while-running={state!r}")
    # What Dom0 finds when the end marker's event comes (PROTOCOL.md): the
    # final state already over `running` in started/<id> (or, should Dom0's
    # removal come first, nothing), never `running`; and no `state`.
    markers: list[str] = []
    with XenstoreConnection(ctl.xs.path, timeout=10) as probe_xs:
        probe_xs.watch(f"{out}/{handle.id}", "probe",
                       lambda path, _token: markers.append(path) if "/end/" in path else None)
        deadline = time.monotonic() + 30
        while not markers and time.monotonic() < deadline:
            probe_xs.poll(0.5)
        at_marker = (probe_xs.read_or_none(f"{base}/agent/started/{handle.id}"),
                     probe_xs.read_or_none(f"{out}/{handle.id}/state"))
    result = ctl.wait(handle, timeout=60)
    print(f"at-marker marker={bool(markers)} started={at_marker[0]!r} state={at_marker[1]!r}")
    print(f"result={result.state} {result.exit_code}")
    began = time.monotonic()
    while (ctl.xs.read_or_none(f"{out}/{handle.id}") is not None
           and time.monotonic() - began < 10):
        time.sleep(0.02)
    gone = all(ctl.xs.read_or_none(path) is None
               for path in (f"{out}/{handle.id}", f"{base}/agent/started/{handle.id}"))
    print(f"removed={gone} "
          f"after {time.monotonic() - began:.2f} s")
    # Dom0's seed, credited before the first command: the guest's random
    # number generator is ready (entropy_avail reads 256 once it is).
    avail = ctl.run("h1", CommandSpec(argv=("cat", "/proc/sys/kernel/random/entropy_avail")),
                    timeout=60)
    print(f"seed={ctl.xs.read_or_none(f'{base}/agent/seed')!r} "
          f"entropy_avail={avail.stdout.decode().strip()}")
    true = CommandSpec(argv=("true",))
    cpu, wall = time.process_time(), time.perf_counter()
    ok = sum(ctl.run("h1", true, timeout=60).ok for _ in range(100))
    print(f"true-ok={ok}/100 cpu-ms-per-command="
          f"{(time.process_time() - cpu) * 10:.1f} "
          f"wall-ms-per-command={(time.perf_counter() - wall) * 10:.1f}")


if __name__ == "__main__":
    main()
