"""The results bundle of a run:

    <out>/meta.json                 status (ok, failed, interrupted) and the error,
                                    TDF and its timeline, versions, topology hash,
                                    host, timing, every command's state
    <out>/metrics.json              what the scenario recorded (exp.record)
    <out>/nodes/<node>/<n>.json     one command: text, state, exit, guest times
    <out>/nodes/<node>/<n>.stdout   its standard output, byte for byte
    <out>/nodes/<node>/<n>.stderr

A bundle appears whole or not at all (BundleWriter): it is written into
`.<name>.tmp-<random>` beside `out`, each command's output as the command
completes, meta.json last, then renamed to `out`; an older bundle there is
moved aside and removed only once the new one is in place.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import platform
import shutil
import socket
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from selena import __version__
from selena.engine import Recorded
from selena.errors import ResultsError
from selena.metrics import Metric
from selena.model import Node, Topology
from selena.model.cpus import credit_cap
from selena.ownership import hand_over, missing_dirs, unique_dir
from selena.provenance import patch_series_hash

log = logging.getLogger(__name__)

# What marks an existing directory as a bundle that a new run may replace;
# anything else at the target is refused, never moved aside and removed.
_BUNDLE_MARKS = ("meta.json", "nodes", "metrics.json")


def topology_hash(topo: Topology) -> str:
    data = dataclasses.asdict(topo)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class BundleWriter:
    """One bundle, written atomically: everything goes into a staging
    directory beside the target (`.<name>.tmp-<random>`), each command's
    output as it completes (add), meta.json last (finish), then the staging
    directory is renamed into place; an older bundle at the target is only
    removed once the new one is there. A failed or interrupted run never
    leaves a mix of two runs at the target."""

    def __init__(self, target: Path, staging: Path):
        self.target = target
        self.staging = staging
        # Held while writing: finish waits for an add under way, and no add
        # writes after it (it would recreate the staging directory).
        self._lock = threading.Lock()
        self._failed: OSError | None = None
        self._closed = False

    @classmethod
    def prepare(cls, target: Path) -> BundleWriter:
        """Check the target and create the staging directory, before anything
        else of the run exists. Raises ResultsError naming the path and the fix."""
        target = Path(target)
        check_target(target)
        parent = target.absolute().parent
        created = missing_dirs(parent)
        try:
            parent.mkdir(parents=True, exist_ok=True)
            # The directories made for it, empty; the staging directory stays
            # root's until it is whole (_move_into_place).
            hand_over(*created[:1])
            staging = unique_dir(parent, f".{target.name}.tmp-")
        except OSError as exc:
            raise ResultsError(f"results directory {target}: cannot create it in {parent} "
                               f"({exc.strerror or exc}); choose another --out") from None
        return cls(target, staging)

    def add(self, rec: Recorded, stdout: bytes, stderr: bytes) -> None:
        """One finished command: its output and its description, now, so that
        the engine need not keep the bytes. A failure is kept and raised by
        finish (the run goes on; its bundle cannot be complete)."""
        r = rec.result
        with self._lock:
            if self._failed is not None or self._closed:
                return
            try:
                node_dir = self.staging / "nodes" / r.guest
                node_dir.mkdir(parents=True, exist_ok=True)
                (node_dir / f"{rec.n}.stdout").write_bytes(stdout)
                (node_dir / f"{rec.n}.stderr").write_bytes(stderr)
                info = {k: v for k, v in dataclasses.asdict(r).items()
                        if k not in ("stdout", "stderr")}
                info.update(seq=rec.seq, at_virtual=rec.at_virtual, stdout_bytes=len(stdout),
                            stderr_bytes=len(stderr))
                (node_dir / f"{rec.n}.json").write_text(json.dumps(info, indent=1) + "\n")
            except OSError as exc:
                self._failed = exc

    def finish(self, *, topo: Topology, records: Sequence[Recorded],
               environment: Mapping[str, Any], started: float, finished: float,
               metrics: Mapping[str, Metric] | None = None,
               error: Mapping[str, Any] | None = None,
               fidelity: Mapping[str, Any] | None = None,
               extra: Mapping[str, Any] | None = None) -> Path:
        """Write the rest (meta.json last) and move the bundle into place.
        On failure the staging directory is removed and ResultsError raised;
        the target keeps whatever it had before."""
        with self._lock:
            self._closed = True
        try:
            if self._failed is not None:
                raise self._failed
            meta = _meta(topo, records, environment, started, finished, error, fidelity,
                         extra)
            if fidelity is not None:
                (self.staging / "fidelity.json").write_text(json.dumps(fidelity, indent=1)
                                                            + "\n")
            summary = {name: metric.summary() for name, metric in (metrics or {}).items()}
            (self.staging / "metrics.json").write_text(json.dumps(summary, indent=1) + "\n")
            (self.staging / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
            self._move_into_place()
        except OSError as exc:
            self.discard()
            raise ResultsError(f"results bundle {self.target} not written "
                               f"({exc.strerror or exc}"
                               f"{': ' + str(exc.filename) if exc.filename else ''}); "
                               "free space or choose another --out") from None
        except ResultsError:
            self.discard()
            raise
        return self.target

    def _move_into_place(self) -> None:
        check_target(self.target)
        hand_over(self.staging)
        old: Path | None = None
        if self.target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old-",
                                        dir=self.staging.parent))
            old.rmdir()
            os.rename(self.target, old)
        try:
            os.rename(self.staging, self.target)
        except OSError:
            if old is not None:
                os.rename(old, self.target)      # the previous bundle, as it was
            raise
        if old is not None:
            _remove(old, "the previous bundle")

    def discard(self) -> None:
        """Remove the staging directory (a run that ends with no bundle)."""
        with self._lock:
            self._closed = True
        _remove(self.staging, "an unfinished bundle")


def _remove(path: Path, what: str) -> None:
    """Remove a directory of ours; one that will not go is said (it is
    hidden, and no reader takes it for a bundle), not fatal to the run."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove %s %s: %s", what, path, exc)


def directory_entries(path: Path, what: str) -> set[str]:
    """The names in the directory `path` may become (none if it does not
    exist yet), once no regular file stands in its way. ResultsError names
    `what` ("results directory", ...), the path and the fix."""
    for above in [path, *path.absolute().parents]:
        if above.exists() and not above.is_dir():
            where = "is a file" if above == path else f"is under {above}, a regular file"
            raise ResultsError(f"{what} {path} {where}; choose another --out")
    try:
        return {p.name for p in path.iterdir()} if path.is_dir() else set()
    except OSError as exc:
        raise ResultsError(f"{what} {path}: cannot read it ({exc.strerror or exc}); choose "
                           "another --out") from None


def check_target(target: Path) -> None:
    """A bundle may go to `target`: nothing there, an empty directory or an
    earlier bundle (replaced once the new one is complete), and no regular
    file in the way. Raises ResultsError naming the path and the fix."""
    entries = directory_entries(target, "results directory")
    if entries and not entries & set(_BUNDLE_MARKS):
        raise ResultsError(f"results directory {target} exists and holds no results "
                           "bundle (no meta.json); choose another --out or empty it")


def write_bundle(out: Path, *, topo: Topology, records: Sequence[Recorded],
                 environment: Mapping[str, Any], started: float, finished: float,
                 metrics: Mapping[str, Metric] | None = None,
                 error: Mapping[str, Any] | None = None,
                 fidelity: Mapping[str, Any] | None = None,
                 extra: Mapping[str, Any] | None = None) -> Path:
    """Write a whole bundle at once (atomically, see BundleWriter) from
    records that still hold their output; `error` (type, message, where,
    traceback, status) is set when the run failed or was interrupted."""
    writer = BundleWriter.prepare(out)
    numbered = number_records(records)
    for rec in numbered:
        writer.add(rec, rec.result.stdout, rec.result.stderr)
    return writer.finish(topo=topo, records=numbered, environment=environment,
                         started=started, finished=finished, metrics=metrics, error=error,
                         fidelity=fidelity, extra=extra)


def number_records(records: Sequence[Recorded]) -> list[Recorded]:
    """Records in order, each numbered among its node's commands (n) where
    the engine did not number them already."""
    per_node: dict[str, int] = {}
    out = []
    for rec in sorted(records, key=lambda r: r.seq):
        per_node[rec.result.guest] = per_node.get(rec.result.guest, 0) + 1
        if not rec.n:
            rec = dataclasses.replace(rec, n=per_node[rec.result.guest],
                                      stdout_bytes=len(rec.result.stdout),
                                      stderr_bytes=len(rec.result.stderr))
        out.append(rec)
    return out


def _meta(topo: Topology, records: Sequence[Recorded], environment: Mapping[str, Any],
          started: float, finished: float, error: Mapping[str, Any] | None,
          fidelity: Mapping[str, Any] | None,
          extra: Mapping[str, Any] | None) -> dict[str, Any]:
    commands = []
    for rec in sorted(records, key=lambda r: r.seq):
        r = rec.result
        entry = {"node": r.guest, "n": rec.n, "command": r.command, "state": r.state,
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
        # Each node's CPU time; a "real" node's cap, and a cpu_share's, follows
        # the TDF (tdf_timeline).
        "cpu_time": {node.name: _cpu_time(node, topo.tdf, environment.get("host_cpus"))
                     for node in sorted(topo.nodes.values(), key=lambda n: n.name)},
        # Each node's guest type (Node.virt): "pv", "pvh" or "hvm".
        "virt": {node.name: node.virt
                 for node in sorted(topo.nodes.values(), key=lambda n: n.name)},
        **environment,
    }
    for key, value in (extra or {}).items():
        meta.setdefault(key, value)     # a caller's labels (a sweep's id), never ours
    if error:
        meta["error"] = {k: v for k, v in error.items() if k != "status"}
    if fidelity is not None:
        meta["fidelity"] = {"verdict": fidelity.get("verdict"),
                            "reasons": fidelity.get("reasons", [])}
    return meta


def _cpu_time(node: Node, tdf: float, host_cpus: object) -> dict[str, Any]:
    cpus = host_cpus if isinstance(host_cpus, int) else None
    entry: dict[str, Any] = {"mode": node.cpu_time, "vcpus": node.vcpus}
    if node.cpu_share is not None:
        entry["cpu_share"] = node.cpu_share
    try:
        entry["cap_percent_at_start"] = credit_cap(node.vcpus, tdf, node.cpu_time,
                                                   node.cpu_share, cpus)
    except ValueError:
        entry["cap_percent_at_start"] = None
    return entry


# What a reader of a bundle that is not whole can do about it.
_DAMAGED = "the bundle is damaged: run it again, or move it out of the way"
_METRIC_NUMBERS = ("n", "median", "p5", "p95", "mean", "stddev", "expected", "error_pct")


def read_bundle_json(bundle: Path, name: str) -> dict[str, Any] | None:
    """One of a bundle's JSON files, an object (None when the file is absent).
    Anything else (unreadable, not JSON, nested past the parser, not an
    object) is a ResultsError naming the file and the fix: a bundle copied
    in part or cut short by a full disk is read by people, not just by selena."""
    path = bundle / name
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read it ({exc.strerror or exc}); {_DAMAGED}") from None
    except (ValueError, RecursionError) as exc:
        raise ResultsError(f"{path}: not JSON ({str(exc)[:120]}); {_DAMAGED}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: holds a JSON {type(data).__name__}, not an object; "
                           f"{_DAMAGED}")
    return data


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _is_texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_fields(path: Path, data: Mapping[str, Any],
                  fields: Sequence[tuple[str, Callable[[object], bool], str]]) -> None:
    for key, sound, wanted in fields:
        if key in data and not sound(data[key]):
            raise ResultsError(f"{path}: {key} is {json.dumps(data[key])[:40]}, not {wanted}; "
                               f"{_DAMAGED}")


def read_fidelity(bundle: Path) -> dict[str, Any] | None:
    """fidelity.json of a bundle (None when the run had no monitor)."""
    data = read_bundle_json(bundle, "fidelity.json")
    if data is None:
        return None
    _check_fields(bundle / "fidelity.json", data, (("verdict", _is_text, "text"),
                                                   ("reasons", _is_texts, "a list of text"),
                                                   ("unchecked", _is_texts, "a list of text")))
    return data


def read_metrics(bundle: Path) -> dict[str, dict[str, Any]]:
    """metrics.json of a bundle ({} when the run recorded none): each metric
    an object whose numbers are numbers and whose samples a list of them."""
    data = read_bundle_json(bundle, "metrics.json") or {}
    for name, metric in data.items():
        where = f"{bundle / 'metrics.json'}: metric {name!r}"
        if not isinstance(metric, dict):
            raise ResultsError(f"{where} is {json.dumps(metric)[:40]}, not an object; {_DAMAGED}")
        samples = metric.get("samples", [])
        if not isinstance(samples, list) or not all(_is_number(x) for x in samples):
            raise ResultsError(f"{where}: samples are not a list of numbers; {_DAMAGED}")
        for key in _METRIC_NUMBERS:
            if metric.get(key) is not None and not _is_number(metric[key]):
                raise ResultsError(f"{where}: {key} is {json.dumps(metric[key])[:40]}, not a "
                                   f"number; {_DAMAGED}")
        if not isinstance(metric.get("unit", ""), str):
            raise ResultsError(f"{where}: unit is not text; {_DAMAGED}")
    return data


def read_meta(bundle: Path) -> dict[str, Any] | None:
    """meta.json of a bundle (None while it is incomplete): the fields a
    reader of runs relies on (status, real_seconds, sweep_id) checked."""
    data = read_bundle_json(bundle, "meta.json")
    if data is None:
        return None
    _check_fields(bundle / "meta.json", data, (
        ("status", _is_text, "text"), ("real_seconds", _is_number, "a number"),
        ("sweep_id", lambda v: v is None or _is_text(v), "text")))
    return data
