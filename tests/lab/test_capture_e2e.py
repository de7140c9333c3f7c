"""End to end in the lab: a link captured with `selena run --capture`
while its TDF changes mid-run (10 -> 2). h1 pings h2 every 0.5 s of virtual
time; the bundle's capture-h1-h2.pcapng, read on the host side (selena's
reader, and tshark where installed: .ci/host-deps puts it there), must
space the echoes 0.5 s apart in virtual time on both sides of the change,
and their real timestamps (each frame's comment) 5 s then 1 s apart.
About a minute of lab time (boot, ~20 real s at TDF 10, ~4 at TDF 2)."""

import json
import shutil
import struct
import subprocess

import lab_results
import pytest

from selena.capture import INBOUND, OUTBOUND, read_pcapng
from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-capture")
SCENARIO = "tests/lab_programs/capture_ping.py"
NS = 1_000_000_000


def echoes(path, icmp_type, direction):
    """((ICMP id, sequence), virtual s, real s) of the echo requests or replies."""
    _, packets = read_pcapng(path)
    found = []
    for p in packets:
        d = p.data
        if len(d) < 42 or d[12:14] != b"\x08\x00" or d[23] != 1:    # IPv4, ICMP
            continue
        icmp = 14 + (d[14] & 0x0F) * 4
        if d[icmp] != icmp_type or p.flags != direction:
            continue
        real = p.comment.split()[0].removeprefix("real=")
        found.append((struct.unpack(">HH", d[icmp + 4:icmp + 8]), p.t_ns / NS, float(real)))
    return found


def test_a_captured_link_is_in_virtual_time_across_a_tdf_change(lab):
    result = lab.run(f"rm -rf {OUT}; selena run {SCENARIO} --capture h1,h2 --out {OUT}",
                     timeout=600)
    assert result.returncode == 0, result.output
    bundle = project_root() / OUT
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["status"] == "ok", meta.get("error")
    assert [seg["tdf"] for seg in meta["tdf_timeline"]] == [10, 2]
    (info,) = meta["captures"]
    assert info["file"] == "capture-h1-h2.pcapng" and info["lost_frames"] == 0, info
    metrics = json.loads((bundle / "metrics.json").read_text())
    assert metrics["echo_replies"]["median"] == 12, metrics
    change = metrics["tdf_change_virtual_s"]["median"] + info["virtual_origin"]
    capture = bundle / "capture-h1-h2.pcapng"
    requests = echoes(capture, 8, INBOUND)      # from h1 into Dom0
    replies = echoes(capture, 0, OUTBOUND)      # toward h1
    assert len(requests) >= 12 and len(replies) >= 12, (requests, replies)
    timed = [r for r in requests if r[0][0] == requests[-1][0][0]]  # the timed ping's
    assert len(timed) == 12, timed
    before, after = [], []
    for (_, v0, r0), (_, v1, r1) in zip(timed, timed[1:], strict=False):
        assert v1 - v0 == pytest.approx(0.5, abs=0.1), timed
        if v1 < change - 0.05:
            before.append((v1 - v0, r1 - r0))
        elif v0 > change + 0.05:
            after.append((v1 - v0, r1 - r0))
    assert len(before) >= 3 and len(after) >= 5, (change, timed)
    for virtual, real in before:                # TDF 10
        assert virtual == pytest.approx(0.5, abs=0.05) and real == pytest.approx(5.0, abs=0.5)
    for virtual, real in after:                 # TDF 2
        assert virtual == pytest.approx(0.5, abs=0.1) and real == pytest.approx(1.0, abs=0.2)
    # Each reply is a short round trip after its request, in virtual time.
    sent = {ident: v for ident, v, _ in requests}
    assert all(0 <= v - sent[ident] < 0.05 for ident, v, _ in replies), (requests, replies)
    tshark = shutil.which("tshark")
    if tshark:      # Wireshark's reading of the file agrees with ours
        out = subprocess.run([tshark, "-r", str(capture), "-Y", "icmp.type == 8", "-T",
                              "fields", "-e", "frame.time_epoch"], capture_output=True,
                             text=True, check=True, timeout=120).stdout.split()
        assert [float(t) for t in out] == pytest.approx([v for _, v, _ in requests], abs=1e-6)
