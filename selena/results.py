"""The results bundle of a run:

    <out>/meta.json                 status (ok, failed, interrupted) and the error,
                                    TDF and its timeline, versions, topology hash,
                                    host, timing, every command's state
    <out>/metrics.json              what the scenario recorded (exp.record)
    <out>/nodes/<node>/<n>.json     one command: text, state, exit, guest times
    <out>/nodes/<node>/<n>.stdout   its standard output, byte for byte
    <out>/nodes/<node>/<n>.stderr
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from selena import __version__
from selena.engine import Recorded
from selena.metrics import Metric
from selena.model import Topology
from selena.model.cpus import credit_cap
from selena.provenance import patch_series_hash


def topology_hash(topo: Topology) -> str:
    data = dataclasses.asdict(topo)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def write_bundle(out: Path, *, topo: Topology, records: Sequence[Recorded],
                 environment: Mapping[str, Any], started: float, finished: float,
                 metrics: Mapping[str, Metric] | None = None,
                 error: Mapping[str, Any] | None = None,
                 fidelity: Mapping[str, Any] | None = None) -> Path:
    """Write the bundle; `error` (type, message, where, traceback, status) is
    set when the run failed or was interrupted."""
    out.mkdir(parents=True, exist_ok=True)
    per_node: dict[str, int] = {}
    commands = []
    for rec in sorted(records, key=lambda r: r.seq):
        r = rec.result
        per_node[r.guest] = per_node.get(r.guest, 0) + 1
        n = per_node[r.guest]
        node_dir = out / "nodes" / r.guest
        node_dir.mkdir(parents=True, exist_ok=True)
        (node_dir / f"{n}.stdout").write_bytes(r.stdout)
        (node_dir / f"{n}.stderr").write_bytes(r.stderr)
        info = {k: v for k, v in dataclasses.asdict(r).items() if k not in ("stdout", "stderr")}
        info.update(seq=rec.seq, at_virtual=rec.at_virtual, stdout_bytes=len(r.stdout),
                    stderr_bytes=len(r.stderr))
        (node_dir / f"{n}.json").write_text(json.dumps(info, indent=1) + "\n")
        entry = {"node": r.guest, "n": n, "command": r.command, "state": r.state,
                 "exit_code": r.exit_code}
        if r.truncated:     # past the output cap: stdout/stderr hold only its start
            entry["dropped_bytes"] = {"stdout": r.stdout_dropped, "stderr": r.stderr_dropped}
        if r.lost_bytes:    # the guest could not hand this much over: incomplete
            entry["lost_bytes"] = r.lost_bytes
        commands.append(entry)
    meta = {
        "experiment": topo.name, "status": (error or {}).get("status", "ok"),
        "tdf": topo.tdf, "selena_version": __version__,
        "xen_patch_series_sha256": patch_series_hash(),
        "topology_sha256": topology_hash(topo),
        "host": socket.gethostname(), "platform": platform.platform(),
        "started": started, "finished": finished, "real_seconds": finished - started,
        "nodes": sorted(topo.nodes), "commands": commands,
        # Each node's CPU time; a "real" node's cap follows the TDF (tdf_timeline).
        "cpu_time": {node.name: {"mode": node.cpu_time, "vcpus": node.vcpus,
                                 "cap_percent_at_start": _cap(node.vcpus, topo.tdf,
                                                              node.cpu_time)}
                     for node in sorted(topo.nodes.values(), key=lambda n: n.name)},
        **environment,
    }
    if error:
        meta["error"] = {k: v for k, v in error.items() if k != "status"}
    if fidelity is not None:
        meta["fidelity"] = {"verdict": fidelity.get("verdict"),
                            "reasons": fidelity.get("reasons", [])}
        (out / "fidelity.json").write_text(json.dumps(fidelity, indent=1) + "\n")
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    summary = {name: metric.summary() for name, metric in (metrics or {}).items()}
    (out / "metrics.json").write_text(json.dumps(summary, indent=1) + "\n")
    return out


def _cap(vcpus: int, tdf: float, cpu_time: str) -> int | None:
    try:
        return credit_cap(vcpus, tdf, cpu_time)
    except ValueError:
        return None


def read_fidelity(bundle: Path) -> dict[str, Any] | None:
    """fidelity.json of a bundle (None when the run had no monitor)."""
    path = bundle / "fidelity.json"
    return json.loads(path.read_text()) if path.exists() else None


def read_metrics(bundle: Path) -> dict[str, dict[str, Any]]:
    """metrics.json of a bundle ({} when the run recorded none)."""
    path = bundle / "metrics.json"
    return json.loads(path.read_text()) if path.exists() else {}
