"""Files into and out of a running guest (`exp.put`, `exp.get`, `selena cp`).

A guest shares no file system with Dom0, and its network is the
experiment's, so a file travels over the command channel. Into a guest: a
temporary file beside the target is joined from pieces that commands write,
several at once, each decoding one base64 piece (a command's spec is kept
under xenstored's 2 KB value quota, so a piece carries about 1.4 KB), its
sha256 is checked in the guest, and it is renamed over the target whole:
a failed or interrupted copy never leaves half a file at the target. Out
of a guest: one command's output (`cat`), so at most the output cap (16
MiB by default). The guest needs /bin/sh, base64, sha256sum, cat, mkdir,
chmod and mv: busybox and Debian have them. Large files and whole trees
belong in a template (Debian packages); this is for the scripts,
configurations and traces of one experiment.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import secrets
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from selena.control.channel import CommandResult
from selena.control.protocol import SPEC_MAX_BYTES, CommandSpec, printable
from selena.errors import ExperimentError, ScenarioError
from selena.ownership import hand_over, missing_dirs

log = logging.getLogger(__name__)

# About 6,000 commands, a few minutes of real time: past it, a template.
MAX_PUT_BYTES = 8 * 1024 * 1024
# Exit status of put's first command when the target is a directory.
_IS_A_DIRECTORY = 21

# Runs shell lines in one guest at once; their results in the lines' order.
RunLines = Callable[[Sequence[str]], list[CommandResult]]
# A put's pieces in flight at once: their round trips through Xenstore
# overlap (the guest's agent runs them side by side).
PIECES_AT_ONCE = 16


class TransferError(ExperimentError):
    """A file could not be copied into or out of a guest."""


@dataclass(frozen=True)
class Transfer:
    """One copy, as the results bundle records it (meta.json's `files`)."""

    node: str
    direction: str              # "put" (into the guest) or "get" (out of it)
    guest_path: str
    local_path: str
    size: int
    sha256: str
    at_virtual: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "direction": self.direction, "guest_path": self.guest_path,
                "local_path": self.local_path, "bytes": self.size, "sha256": self.sha256,
                "at_virtual": round(self.at_virtual, 6)}


def guest_path(path: str, what: str) -> str:
    """A guest path as put and get take it: absolute, printable text.
    ScenarioError otherwise (`what` names it in the message)."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ScenarioError(f"{what} {path!r}: give an absolute path in the guest "
                            "(e.g. /root/app.py)")
    if any(ord(c) < 0x20 or ord(c) == 0x7f for c in path):
        raise ScenarioError(f"{what} {printable(path)}: control characters in a guest path")
    return path


def put(run: RunLines, node: str, src: str | os.PathLike[str], dest: str, *,
        mode: int | None = None) -> Transfer:
    """Copy local file `src` to `dest` in the guest (a path ending in / or
    an existing directory gets src's name), creating missing directories;
    `mode` defaults to src's permission bits. `run` runs shell lines in the
    guest, all at once, and returns their results in order: the pieces go
    PIECES_AT_ONCE at a time, each into a part file of its own, so their
    round trips overlap."""
    source = Path(src)
    data = _read_local(source)
    if mode is not None and (isinstance(mode, bool) or not isinstance(mode, int)
                             or not 0 <= mode <= 0o7777):
        raise ScenarioError(f"put {source}: mode {mode!r} is not a permission mode "
                            "(e.g. 0o755)")
    dest = guest_path(dest, f"put {source} ->")
    if dest.endswith("/"):
        dest += source.name
    target = str(PurePosixPath(dest))
    bits = mode if mode is not None else source.stat().st_mode & 0o7777
    where = f"put {source} -> {node}:{target}"
    tmp = f"{target}.selena-put-{secrets.token_hex(4)}"
    q_target, q_tmp = shlex.quote(target), shlex.quote(tmp)
    q_dir = shlex.quote(str(PurePosixPath(target).parent))

    def one(line: str) -> CommandResult:
        return run([line])[0]
    try:
        first = one(f"if [ -d {q_target} ]; then exit {_IS_A_DIRECTORY}; fi; "
                    f"mkdir -p {q_dir} && : > {q_tmp}")
        if first.state == "exited" and first.exit_code == _IS_A_DIRECTORY:
            raise TransferError(f"{where}: {target} is a directory in the guest; give the "
                                f"file's path ({target.rstrip('/')}/{source.name})")
        _check(first, where, "creating it")
        pieces = _pieces(data, q_tmp)
        for at in range(0, len(pieces), PIECES_AT_ONCE):
            lines = [f"printf %s {piece} | base64 -d > {q_tmp}.{k:06d}"
                     for k, piece in enumerate(pieces[at:at + PIECES_AT_ONCE], start=at)]
            for result in run(lines):
                _check(result, where, "writing it")
        if pieces:      # the part files' names sort in their order
            _check(one(f"cat {q_tmp}.[0-9]* > {q_tmp} && rm -f {q_tmp}.[0-9]*"), where,
                   "joining its pieces")
        digest = hashlib.sha256(data).hexdigest()
        summed = one(f"sha256sum {q_tmp}")
        _check(summed, where, "checking it")
        got = summed.stdout.decode(errors="replace").split()[:1]
        if got != [digest]:
            raise TransferError(f"{where}: the guest's copy has sha256 "
                                f"{printable(got[0] if got else '(none)')[:64]}, not "
                                f"{digest}; nothing was put there")
        _check(one(f"chmod {bits:o} {q_tmp} && mv -f {q_tmp} {q_target}"), where,
               "putting it in place")
    except BaseException:
        try:
            one(f"rm -f {q_tmp} {q_tmp}.[0-9]*")
        except Exception as exc:  # noqa: BLE001 - the copy's own error matters more
            log.warning("%s: the temporary %s may be left in the guest: %s", where, tmp, exc)
        raise
    log.info("%s: %d bytes", where, len(data))
    return Transfer(node, "put", target, str(source), len(data), digest)


def get(run: RunLines, node: str, src: str, dest: str | os.PathLike[str]) -> Transfer:
    """Copy file `src` of the guest to local `dest` (a path ending in / or
    an existing directory gets src's name), creating missing directories; written whole or not
    at all, and given to the user who ran sudo."""
    src = guest_path(src, "get")
    target = Path(dest)
    if target.is_dir() or os.fspath(dest).endswith(("/", os.sep)):
        target = target / PurePosixPath(src).name
    where = f"get {node}:{src} -> {target}"
    result = run([f"cat {shlex.quote(src)}"])[0]
    if result.truncated:
        raise TransferError(f"{where}: the file is larger than the output cap "
                            f"({len(result.stdout)} bytes kept, {result.stdout_dropped} more); "
                            "give the experiment a larger output_cap (--output-cap)")
    _check(result, where, "reading it")
    created = missing_dirs(target.parent)
    tmp = target.parent / f".{target.name}.selena-get-{secrets.token_hex(4)}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(result.stdout)
        tmp.replace(target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise TransferError(f"{where}: cannot write it ({exc.strerror or exc}); give "
                            "another local path") from None
    hand_over(*(created[:1] or [target]))
    log.info("%s: %d bytes", where, len(result.stdout))
    return Transfer(node, "get", src, str(target), len(result.stdout),
                    hashlib.sha256(result.stdout).hexdigest())


def _read_local(source: Path) -> bytes:
    if source.is_dir():
        raise ScenarioError(f"put {source}: a directory; put copies one file (pack a tree "
                            "with tar first, or put it in a template)")
    try:
        size = source.stat().st_size
        if size > MAX_PUT_BYTES:
            raise ScenarioError(f"put {source}: {size} bytes, more than put carries "
                                f"({MAX_PUT_BYTES // (1024 * 1024)} MiB); put a large file "
                                "in a template (docs/topologies.md)")
        return source.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"put {source}: no such file") from None
    except OSError as exc:
        raise ScenarioError(f"put {source}: cannot read it ({exc.strerror or exc})") from None


def _pieces(data: bytes, q_tmp: str) -> list[str]:
    """data as base64 pieces, each as long as a command appending it to
    q_tmp may be within the spec's limit (whole 4-character groups)."""
    overhead = len(CommandSpec(shell=f"printf %s  | base64 -d > {q_tmp}.000000",
                               timeout_ns=10 ** 17).encode())
    room = (SPEC_MAX_BYTES - overhead) // 4 * 4
    if room < 64:
        raise ScenarioError(f"put: guest path {q_tmp} is too long to write a file to")
    text = base64.b64encode(data).decode()
    return [text[i:i + room] for i in range(0, len(text), room)] if text else []


def _check(result: CommandResult, where: str, step: str) -> None:
    if result.ok:
        return
    said = printable(result.stderr.decode(errors="replace").strip().splitlines()[-1]
                     if result.stderr.strip() else "", 200)
    raise TransferError(f"{where}: {step} {result.summary()}" + (f": {said}" if said else ""))

