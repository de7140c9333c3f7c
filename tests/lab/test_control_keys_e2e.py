"""End to end in the lab: the command keys of protocol 1 as the real agent
writes them into real Xenstore (oxenstored): `running` in agent/started/<id>,
the final state over it when the end marker's event reaches Dom0 (which
reads nothing, the marker's path carrying it) and no `state`, all removed
after the result, the guest's random number generator seeded by Dom0
before the first command (tests/lab/control_keys_probe.py runs in Dom0; about a
minute of lab time: one tiny guest, a 2 s command and 100 `true`)."""

import re

import pytest

pytestmark = pytest.mark.lab


def test_running_is_in_started_and_state_is_written_once_final(lab):
    result = lab.run(["python3", "tests/lab/control_keys_probe.py"], timeout=600)
    out = result.output
    assert result.returncode == 0, out
    assert re.search(r"started=b'running pid=\d+ start=\d+'", out), out
    assert "state-while-running=None" in out, out
    assert "result=exited 0" in out, out
    assert re.search(r"at-marker marker=True started=(b'exited code=0 .*'|None) state=None",
                     out), out
    assert re.search(r"removed=True after \d", out), out
    assert "seed=b'ok' entropy_avail=256" in out, out
    assert "true-ok=100/100" in out, out
    print(re.search(r"true-ok=.*", out).group(0))       # the figure, for the lead
