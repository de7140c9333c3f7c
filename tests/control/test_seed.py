"""Dom0 seeds each guest's random number generator ($S/seed): unseeded, a
guest's first read of /dev/urandom spun its vCPU for about a guest second
collecting timer jitter (TDF times as long in real time). The agent credits
the seed with RNDADDENTROPY and says how it went on agent/seed; the lab's
test_control_keys_e2e checks the pool is ready in a real guest."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from selena.control.keys import SEED_BYTES, control_keys
from selena.control.xenstore import XenstoreConnection


def test_every_guest_gets_a_fresh_seed_that_no_plan_keeps():
    seeds = [k for k in control_keys(5, "exp") if k.path.endswith("/seed")]
    assert len(seeds) == 1 and seeds[0].value == "" and seeds[0].perms == ("n0", "r5")
    drawn = {seeds[0].fresh_value() for _ in range(3)}
    assert len(drawn) == 3
    assert all(re.fullmatch(f"[0-9a-f]{{{2 * SEED_BYTES}}}", v) for v in drawn)
    # Written before `version`, which starts a reused guest's session.
    paths = [k.path for k in control_keys(5, "exp")]
    assert paths.index(seeds[0].path) < paths.index("/local/domain/5/selena/version")


def _agent_seed_report(xenstored, agent_binary, seed: str | None, random: Path) -> str | None:
    dom0 = XenstoreConnection(xenstored.listen(0), timeout=5)
    xenstored.add_domain(5)
    for key in control_keys(5, "exp"):
        value = key.value
        if key.path.endswith("/seed"):
            if seed is None:
                continue
            value = seed
        dom0.write(key.path, value)
        dom0.set_perms(key.path, list(key.perms))
    agent = subprocess.Popen([str(agent_binary), "--device", xenstored.listen(5),
                              "--random", str(random)])
    try:
        deadline = time.monotonic() + 10
        while dom0.read_or_none("/local/domain/5/selena/agent/state") != b"ready":
            assert time.monotonic() < deadline, "the agent never became ready"
            time.sleep(0.05)
        report = dom0.read_or_none("/local/domain/5/selena/agent/seed")
    finally:
        agent.kill()
        agent.wait()
        dom0.close()
    return None if report is None else report.decode()


@pytest.mark.parametrize("seed, report", [
    # A regular file takes no RNDADDENTROPY: the seed was read and credited
    # to the device the agent was given (the lab's guests: /dev/random).
    ("ab" * SEED_BYTES, "failed Inappropriate ioctl for device"),
    ("zz" * SEED_BYTES, "failed bad seed"),
    ("abc", "failed bad seed"),
    ("ab" * 65, "failed bad seed"),          # longer than the agent takes
    ("", None),                               # none given
    (None, None),                             # an older controller
])
def test_the_agent_credits_the_seed_to_the_device_it_was_given(xenstored, agent_binary,
                                                              tmp_path, seed, report):
    random = tmp_path / "random"
    random.write_bytes(b"")
    assert _agent_seed_report(xenstored, agent_binary, seed, random) == report
    assert random.read_bytes() == b""        # credited by ioctl, never written
