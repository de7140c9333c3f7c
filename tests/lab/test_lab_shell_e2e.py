"""End to end: `selena lab shell` gives an interactive Dom0 shell on a
terminal; exiting it powers the lab off and leaves no QEMU behind."""

import os
import pty
import select
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.own_lab]


def _read_until(fd: int, needle: bytes, seen: bytearray, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                return needle in seen
    return needle in seen


# make test-long: a boot of its own, which make test's budget cannot carry;
# what the shell runs in, the lab boot, every lab test uses.
@pytest.mark.long
def test_lab_shell_is_interactive_and_powers_off_on_exit(own_lab):
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "selena", "lab", "shell"],
                            stdin=secondary, stdout=secondary, stderr=secondary,
                            start_new_session=True)
    os.close(secondary)
    seen = bytearray()
    try:
        assert _read_until(primary, b"SELENA-LAB-SHELL", seen, 600), seen[-2000:]
        time.sleep(2)     # let the shell start reading its terminal
        os.write(primary, b"echo shell-$((6*7)); xl list | head -2; selena-tdf get 0\n")
        assert _read_until(primary, b"shell-42", seen, 120), seen[-2000:]
        assert _read_until(primary, b"Domain-0", seen, 120), seen[-2000:]
        os.write(primary, b"exit\n")
        assert proc.wait(timeout=180) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
        os.close(primary)
    # Nothing of that session (QEMU included) may outlive the shell.
    assert _session_members(proc.pid) == []


def _session_members(sid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[3] == str(sid):      # field 6 of stat: the session id
            found.append(int(entry))
    return found
