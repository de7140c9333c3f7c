"""End to end in the lab: files into and out of tiny-host guests, from a
scenario (exp.put, exp.get) and then, the run kept, from another shell
(`selena cp`): a 200 KB file and a script of the researcher's own go in
whole, with their modes; the script runs; its output and the file come back
out byte for byte; the bundle lists the copies, not their pieces, and
where the run came from."""

import hashlib
import json
import os
import re

import lab_results
import pytest
from lab_stats import check

from selena.paths import project_root

pytestmark = pytest.mark.lab

NAME = lab_results.out("test-files")
BLOB = f"{NAME}-blob.bin"
SCRIPT = f"{NAME}-app.sh"
BLOB_BYTES = 200_000

SCENARIO = f"""\
import time

from selena.model import Topology

topology = Topology("files", tdf=2)
h1 = topology.add_host("h1", ip="10.0.0.1/24")
h2 = topology.add_host("h2", ip="10.0.0.2/24")
topology.add_link(h1, h2, delay="1ms")


def run(exp):
    exp.put("h1", "{SCRIPT}", "/root/bin/", mode=0o750)
    began = time.monotonic()
    exp["h1"].put("{BLOB}", "/root/data/blob.bin")
    print(f"put-real-s={{time.monotonic() - began:.2f}}", flush=True)
    exp.cmd("h1", "/root/bin/{os.path.basename(SCRIPT)} /root/data/blob.bin /root/sum.txt",
            check=True)
    print(exp.cmd("h1", "stat -c 'mode %a %s' /root/bin/{os.path.basename(SCRIPT)} "
                        "/root/data/blob.bin").stdout.decode(), flush=True)
    exp.get("h1", "/root/sum.txt", exp.out_dir)
    began = time.monotonic()
    exp.get("h1", "/root/data/blob.bin", f"{{exp.out_dir}}/back/")
    print(f"get-real-s={{time.monotonic() - began:.2f}}", flush=True)
"""


def test_files_go_into_guests_and_come_back_out_whole(lab):
    blob = os.urandom(BLOB_BYTES)
    root = project_root()
    (root / BLOB).parent.mkdir(parents=True, exist_ok=True)
    (root / BLOB).write_bytes(blob)
    (root / BLOB).chmod(0o644)
    (root / SCRIPT).write_text('#!/bin/sh\nsha256sum "$1" > "$2"\n')
    (root / SCRIPT).chmod(0o644)
    (root / f"{NAME}.py").write_text(SCENARIO)
    # One job: the lab cleans up after each, and `selena cp` needs the run kept.
    result = lab.run(
        f"rm -rf {NAME}; selena run {NAME}.py --keep --out {NAME}; echo run-status=$?; "
        "echo ---cp---; "
        f"selena cp files {SCRIPT} h2:/opt/app.sh --mode 755 && "
        "selena exec files h2 /opt/app.sh /opt/app.sh /opt/sum && "
        f"selena cp files h2:/opt/sum {NAME}-cp-sum.txt; echo cp-status=$?; "
        "selena destroy files; xl list | grep -c selena-files; echo leftovers-counted",
        timeout=900)
    out, copied = result.output.split("---cp---")
    assert "run-status=0" in out, out
    digest = hashlib.sha256(blob).hexdigest()
    bundle = root / NAME
    assert (bundle / "sum.txt").read_text().split()[0] == digest
    assert (bundle / "back" / "blob.bin").read_bytes() == blob
    script = os.path.basename(SCRIPT)
    assert re.search(r"^mode 750 32$", out, re.M) and re.search(rf"^mode 644 {BLOB_BYTES}$",
                                                               out, re.M), out
    meta = json.loads((bundle / "meta.json").read_text())
    assert [(f["node"], f["direction"], f["guest_path"], f["bytes"]) for f in meta["files"]] == [
        ("h1", "put", f"/root/bin/{script}", 32), ("h1", "put", "/root/data/blob.bin", BLOB_BYTES),
        ("h1", "get", "/root/sum.txt", len((bundle / "sum.txt").read_bytes())),
        ("h1", "get", "/root/data/blob.bin", BLOB_BYTES)]
    assert meta["files"][1]["sha256"] == digest == meta["files"][3]["sha256"]
    assert len(meta["commands"]) == 2, meta["commands"]     # the scenario's own two
    # Where the run came from, in Dom0: the file as loaded, the command line.
    provenance = meta["provenance"]
    assert provenance["source"] == f"{NAME}.py", provenance
    assert provenance["source_sha256"] == hashlib.sha256(SCENARIO.encode()).hexdigest()
    assert provenance["argv"][1:3] == ["run", f"{NAME}.py"], provenance
    assert re.fullmatch(r"[0-9a-f]{64}", provenance["selena_source_sha256"]), provenance
    put_s = float(re.search(r"put-real-s=([\d.]+)", out).group(1))
    get_s = float(re.search(r"get-real-s=([\d.]+)", out).group(1))
    print(f"200 KB: put {put_s:.1f} s, get {get_s:.1f} s of real time")
    check("files.put_200kb_real_s", put_s, below=120, unit=" s", context=out[-2000:])
    check("files.get_200kb_real_s", get_s, below=60, unit=" s", context=out[-2000:])

    # The run kept: `selena cp` from another shell, into h2 and back out.
    assert "cp-status=0" in copied, copied
    assert re.search(rf"^{re.escape(SCRIPT)} -> h2:/opt/app.sh: 32 bytes, sha256 \w{{64}}$",
                     copied, re.M), copied
    script_digest = hashlib.sha256((root / SCRIPT).read_bytes()).hexdigest()
    assert (root / f"{NAME}-cp-sum.txt").read_text().split()[0] == script_digest
    assert "0\nleftovers-counted" in copied, copied
