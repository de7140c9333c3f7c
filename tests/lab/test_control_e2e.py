"""End to end in the lab: `selena run` drives three real guests through their
agents over real Xenstore (oxenstored) and writes a results bundle."""

import json
from pathlib import Path

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

OUT = lab_results.out("test-agent-commands")


def _cmd(bundle: Path, node: str, n: int) -> tuple[dict, bytes, bytes]:
    base = bundle / "nodes" / node
    return (json.loads((base / f"{n}.json").read_text()), (base / f"{n}.stdout").read_bytes(),
            (base / f"{n}.stderr").read_bytes())


def test_selena_run_three_guests_outputs_timeouts_kills_permissions_and_loss(lab):
    bundle = project_root() / OUT
    script = (f"rm -rf {OUT}; selena run scenarios/agent_commands.py --tdf 5 "
              f"--output-cap 640K --out {OUT}; "
              "echo run-status=$?; xl list | grep -c selena- ; echo leftovers-listed")
    result = lab.run(["sh", "-c", script], timeout=600)
    out = result.output
    assert result.returncode == 0, out
    assert "run-status=0" in out, out
    assert "0\nleftovers-listed" in out, out            # torn down without --keep

    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["tdf"] == 5 and meta["nodes"] == ["h1", "h2", "h3"]
    assert meta["xen_version"].startswith("4.17")
    assert len(meta["xen_patch_series_sha256"]) == 64
    assert meta["guest_kernel"]

    info, stdout, stderr = _cmd(bundle, "h1", 1)
    assert info["state"] == "exited" and info["exit_code"] == 0
    assert stdout == b"hello from h1\n" and stderr == b"to stderr\n"
    assert info["start_ns"] <= info["end_ns"]
    info, stdout, _ = _cmd(bundle, "h1", 2)                   # ping over the hub
    assert info["exit_code"] == 0 and b"3 packets received" in stdout

    info, stdout, _ = _cmd(bundle, "h3", 1)                   # > 64 KB of output
    assert len(stdout) > 64 * 1024
    assert stdout.decode().split() == [str(i) for i in range(1, 100001)]

    assert _cmd(bundle, "h2", 1)[1] == b"parallel-a\n"
    assert _cmd(bundle, "h3", 2)[1] == b"parallel-b\n"
    timed_out = next(i for i in range(1, 5) if _cmd(bundle, "h2", i)[0]["reason"] == "timeout")
    info, stdout, _ = _cmd(bundle, "h2", timed_out)
    assert info["state"] == "killed" and info["signal"] == 9 and stdout == b"started\n"
    # 2 virtual seconds of timeout, measured on the guest's own dilated clock.
    check("control.timeout_2s.duration_virtual_s", info["dur_ns"] / 1e9, low=2.0, below=3.0,
          unit=" s", context=info)
    at_three = next(_cmd(bundle, "h2", i)[0] for i in range(1, 5)
                    if _cmd(bundle, "h2", i)[1] == b"at-three\n")
    check("control.at_3s.started_virtual_s", at_three["at_virtual"], low=3.0, unit=" s",
          context=at_three)

    info, _, _ = _cmd(bundle, "h1", 3)
    assert info["state"] == "killed" and info["reason"] == "kill" and info["signal"] == 15
    # The guest may neither forge a command for itself nor read another guest.
    assert _cmd(bundle, "h1", 4)[1] == b"EACCES\n"
    assert _cmd(bundle, "h1", 5)[1] == b"EACCES\n"

    arp = _cmd(bundle, "h1", 6)[1].decode()       # static entry from the boot-time config
    assert any(line.split()[:4] == ["10.0.0.99", "0x1", "0x6", "02:00:00:00:00:99"]
               for line in arp.splitlines()), arp

    # 1 MB of output against a 640 KiB cap (the 580 KB seq above fits): the
    # start kept, the rest counted.
    info, stdout, _ = _cmd(bundle, "h1", 7)
    assert info["exit_code"] == 0 and stdout == bytes(640 * 1024), len(stdout)
    assert info["stdout_dropped"] == 1_000_000 - 640 * 1024
    capped = [c for c in meta["commands"] if c["node"] == "h1" and c["n"] == 7]
    assert capped[0]["dropped_bytes"] == {"stdout": 1_000_000 - 640 * 1024, "stderr": 0}

    # h2's agent was killed under its command: init restarted it, and the
    # successor failed the orphan and served the next command.
    info, _, _ = _cmd(bundle, "h2", 4)
    assert (info["state"], info["reason"]) == ("failed", "restarted"), info
    assert _cmd(bundle, "h2", 5)[1] == b"after-restart\n"

    # A command that wrote garbage over its own state failed alone.
    info, _, _ = _cmd(bundle, "h2", 6)
    assert (info["state"], info["reason"]) == ("failed", "protocol"), info
    assert _cmd(bundle, "h2", 7)[1] == b"after-garbage\n"
    # h3 flooded output for 2 virtual seconds (10 real) past the cap; h1's
    # echoes beside it were answered all along (once none came in 10 s).
    info, stdout, _ = _cmd(bundle, "h3", 3)
    assert info["reason"] == "timeout" and info["stdout_dropped"] > 0, info
    assert len(stdout) == 640 * 1024
    assert all(_cmd(bundle, "h1", n)[1] == b"beside-flood\n" for n in (8, 9, 10))
    metrics = json.loads((bundle / "metrics.json").read_text())
    check("control.echo_beside_flood_real_ms.max", metrics["echo_beside_flood_real_ms"]["max"],
          below=5000, unit=" ms", samples=metrics["echo_beside_flood_real_ms"].get("samples"),
          context=metrics)

    info, _, _ = _cmd(bundle, "h3", 4)
    assert info["state"] == "lost" and "gone" in info["detail"]
