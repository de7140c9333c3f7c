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
from lab_stats import check

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
    # The timed ping's (the fidelity monitor's latency probes ping h1 -> h2
    # too, 5 echoes each under ICMP ids of their own).
    ids = {r[0][0] for r in requests}
    timed = max(([r for r in requests if r[0][0] == i] for i in ids), key=len)
    assert len(timed) == 12, timed
    before, after = [], []
    for (_, v0, r0), (_, v1, r1) in zip(timed, timed[1:], strict=False):
        if v1 < change - 0.05:
            before.append((v1 - v0, r1 - r0))
        elif v0 > change + 0.05:
            after.append((v1 - v0, r1 - r0))
    # Each check holds for every interval (the one nearest its bound is recorded).
    check("capture.echo_interval_virtual_s",
          [v1 - v0 for (_, v0, _), (_, v1, _) in zip(timed, timed[1:], strict=False)],
          low=0.4, high=0.6, unit=" s", context=timed)
    check("capture.intervals_before_change", len(before), low=3, context=(change, timed))
    check("capture.intervals_after_change", len(after), low=5, context=(change, timed))
    # TDF 10
    check("capture.tdf10.interval_virtual_s", [v for v, _ in before], low=0.45, high=0.55,
          unit=" s", context=before)
    check("capture.tdf10.interval_real_s", [r for _, r in before], low=4.5, high=5.5,
          unit=" s", context=before)
    # TDF 2
    check("capture.tdf2.interval_virtual_s", [v for v, _ in after], low=0.4, high=0.6,
          unit=" s", context=after)
    check("capture.tdf2.interval_real_s", [r for _, r in after], low=0.8, high=1.2,
          unit=" s", context=after)
    # Each reply is a short round trip after its request, in virtual time.
    # A reply converted through another TDF segment than its request's
    # would be off by tenths of a second (0.4 s one real second past the
    # change, through TDF 10's segment instead of TDF 2's); the
    # round trips themselves are 2-20 ms, and 92 ms once in 52 runs (an
    # emulator stall at TDF 2): 0.2 s catches the one, not the other.
    sent = {ident: v for ident, v, _ in requests}
    check("capture.echo_round_trip_virtual_s", [v - sent[ident] for ident, v, _ in replies],
          low=0, below=0.2, unit=" s", context=(requests, replies))
    tshark = shutil.which("tshark")
    if tshark:      # Wireshark's reading of the file agrees with ours
        out = subprocess.run([tshark, "-r", str(capture), "-Y", "icmp.type == 8", "-T",
                              "fields", "-e", "frame.time_epoch"], capture_output=True,
                             text=True, check=True, timeout=120).stdout.split()
        assert [float(t) for t in out] == pytest.approx([v for _, v, _ in requests], abs=1e-6)
