"""Values of the control protocol (guest-agent/PROTOCOL.md), version 1.

Pure functions: encoding command specs and network directives for Dom0 to
write, parsing the states the agent writes back.
"""

from __future__ import annotations

import ipaddress
import operator
import re
from dataclasses import dataclass, field

from selena.errors import ProtocolMismatch, ValidationError

PROTOCOL_VERSION = 1
# What Dom0 speaks beyond the version, in $S/features (PROTOCOL.md): an agent
# uses a feature only when it is listed, so either side may be the older one.
FEATURES = ("end-markers",)
# A Xenstore request carries at most 4096 bytes, but xenstored's quota on one
# value's size (2048 bytes by default; oxenstored checks it for Dom0's writes
# too, C xenstored counts the node's permissions in it) is what a long command
# meets first: E2BIG, found with a 2.2 KB switch setup script in the lab.
SPEC_MAX_BYTES = 2048 - 128
MAX_ARGS = 128
MAX_ENV = 64
CMD_ID = re.compile(r"[A-Za-z0-9_-]{1,32}\Z")
MAC = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}\Z")
IFNAME = re.compile(r"[A-Za-z0-9_.-]{1,15}\Z")
FINAL_STATES = ("exited", "killed", "failed")


# Unicode controls a terminal acts on besides C0, DEL and C1: line and
# paragraph separators and the bidirectional overrides (text shown reversed).
_FORMAT_CONTROLS = frozenset([0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def printable(text: str | bytes, limit: int | None = 512) -> str:
    """Guest-supplied text made safe for one line of a terminal or a log:
    C0 and C1 controls (newline included), DEL and bidirectional overrides
    become `\\xNN` / `\\uNNNN`, bytes that are not UTF-8 `\\xNN`, and past
    `limit` characters the rest is cut (and counted)."""
    if isinstance(text, bytes):
        text = text.decode(errors="backslashreplace")
    out = []
    for ch in text[:limit] if limit is not None else text:
        code = ord(ch)
        if code < 0x20 or 0x7f <= code < 0xa0:
            out.append(f"\\x{code:02x}")
        elif code in _FORMAT_CONTROLS:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    if limit is not None and len(text) > limit:
        out.append(f"... ({len(text) - limit} more characters)")
    return "".join(out)


def guest_text(raw: bytes, what: str, guest: str) -> str:
    """A guest key's value as text; a value that is not UTF-8 is refused,
    naming the guest and the key."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise ProtocolMismatch(f"guest {guest}: {what} is not UTF-8 text: "
                               f"{printable(raw, 80)}") from None


# What escape() leaves alone: printable ASCII but space and %.
_NEEDS_ESCAPE = re.compile(rb"[^\x21-\x24\x26-\x7e]")


def _escaped(match: re.Match[bytes]) -> bytes:
    return b"%%%02X" % match[0][0]


def escape(value: str | bytes) -> str:
    """Percent-escape %, space, control bytes, DEL and non-ASCII bytes."""
    raw = value.encode() if isinstance(value, str) else value
    # One pass in C: Dom0 escapes every argument of every command it sends.
    return _NEEDS_ESCAPE.sub(_escaped, raw).decode("ascii")


def unescape(text: str) -> bytes:
    out = bytearray()
    i = 0
    raw = text.encode()
    while i < len(raw):
        b = raw[i]
        if b == 0x25:
            pair = raw[i + 1:i + 3]
            try:
                value = int(pair, 16) if len(pair) == 2 else -1
            except ValueError:
                value = -1
            if value <= 0:
                raise ProtocolMismatch(f"bad escape in {text!r}")
            out.append(value)
            i += 3
        else:
            out.append(b)
            i += 1
    return bytes(out)


def net_failure(report: str) -> tuple[str, str]:
    """Where and why an agent's boot-time network set-up failed, from its
    agent/net report `failed <index> <escaped reason>` (PROTOCOL.md); every
    word is the guest's, so both come back with control characters escaped."""
    parts = report.split(" ", 2)
    where = f"directive {printable(parts[1], 20)}" if len(parts) > 1 else "its directives"
    why = parts[2] if len(parts) > 2 else report
    try:
        why = unescape(why).decode(errors="replace")
    except ProtocolMismatch:
        pass
    return where, printable(why)


# The agent refuses longer ones (spec.h): start + timeout must not wrap.
TIMEOUT_NS_MAX = 10**17


@dataclass(frozen=True)
class CommandSpec:
    """What to run in a guest: an argv (no shell) or one shell command line."""

    argv: tuple[str, ...] = ()
    shell: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout_ns: int = 0         # in the guest's (virtual) time; 0: none

    def _check_limits(self) -> None:
        """What the agent refuses, refused here with the reason."""
        if bool(self.argv) == (self.shell is not None):
            raise ValidationError("a command needs either an argv or a shell line, not both")
        if self.argv and not self.argv[0]:
            raise ValidationError("a command's program name is empty")
        if len(self.argv) > MAX_ARGS:
            raise ValidationError(f"a command has {len(self.argv)} arguments (at most {MAX_ARGS})")
        if len(self.env) > MAX_ENV:
            raise ValidationError(f"a command has {len(self.env)} environment entries "
                                  f"(at most {MAX_ENV})")
        if self.timeout_ns < 0:
            raise ValidationError(f"negative command timeout {self.timeout_ns} ns")
        if self.timeout_ns > TIMEOUT_NS_MAX:
            raise ValidationError(f"command timeout {self.timeout_ns} ns is longer than "
                                  f"{TIMEOUT_NS_MAX} ns (about three years)")

    def encode(self) -> str:
        self._check_limits()
        lines = [f"selena-cmd {PROTOCOL_VERSION}"]
        if self.timeout_ns:
            lines.append(f"timeout {int(self.timeout_ns)}")
        if self.cwd is not None:
            if not self.cwd.startswith("/"):
                raise ValidationError(f"command working directory {self.cwd!r} is not absolute")
            lines.append(f"cwd {escape(self.cwd)}")
        for name, value in self.env.items():
            if not name or "=" in name:
                raise ValidationError(f"bad environment variable name {name!r}")
            lines.append(f"env {escape(f'{name}={value}')}")
        for part in [*self.argv, self.shell]:
            if part is not None and "\0" in part:
                raise ValidationError(f"command text {part!r} contains a NUL byte")
        lines += [f"arg {escape(a)}" for a in self.argv]
        if self.shell is not None:
            lines.append(f"shell {escape(self.shell)}")
        text = "\n".join(lines) + "\n"
        if len(text.encode()) > SPEC_MAX_BYTES:
            raise ValidationError(f"command is {len(text.encode())} bytes encoded "
                                  f"(at most {SPEC_MAX_BYTES}): {self.describe()[:80]}")
        return text

    def describe(self) -> str:
        return self.shell if self.shell is not None else " ".join(self.argv)


@dataclass(frozen=True)
class CommandState:
    """One value of $S/out/<id>/state."""

    state: str                  # running | exited | killed | failed
    code: int | None = None     # exit code (exited)
    signal: int | None = None   # killed
    reason: str | None = None   # killed: kill|timeout|signal; failed: bad-spec|exec|...
    detail: str = ""
    start_ns: int | None = None     # guest CLOCK_REALTIME
    end_ns: int | None = None
    dur_ns: int | None = None       # guest CLOCK_MONOTONIC
    stdout_chunks: int = 0
    stderr_chunks: int = 0
    pid: int | None = None
    lost_bytes: int = 0             # output the agent could not write (optional key)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


_FINAL_NUMBERS = ("code", "signal", "start", "end", "dur", "stdout", "stderr", "lost")


# "key=value" -> [key, value], as a C call per field (no Python frame).
_SPLIT_FIELD = operator.methodcaller("split", "=", 1)


def _numbers(fields: dict[str, str], keys: tuple[str, ...], text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for key in keys:
        value = fields.get(key)
        if value is not None:
            try:
                found[key] = int(value)
            except ValueError:
                raise ProtocolMismatch(f"non-numeric {key} in command state "
                                       f"{text!r}") from None
    return found


def parse_state(text: str) -> CommandState:
    word, _, rest = text.strip().partition(" ")
    try:
        fields = dict(map(_SPLIT_FIELD, rest.split()))
    except ValueError:          # a word without "="
        raise ProtocolMismatch(f"malformed command state {text!r}") from None
    if word in ("exited", "killed"):
        # The common case in few steps (Dom0 parses a state per command); a
        # bad value is named by _numbers().
        get = fields.get
        try:
            code, signal, lost = get("code"), get("signal"), get("lost")
            return CommandState(
                word, code=None if code is None else int(code),
                signal=None if signal is None else int(signal), reason=get("reason"),
                start_ns=int(fields["start"]), end_ns=int(fields["end"]),
                dur_ns=int(fields["dur"]), stdout_chunks=int(fields["stdout"]),
                stderr_chunks=int(fields["stderr"]), lost_bytes=0 if lost is None else int(lost))
        except KeyError as exc:
            raise ProtocolMismatch(f"command state {text!r} lacks {exc.args[0]}") from None
        except ValueError:
            _numbers(fields, _FINAL_NUMBERS, text)
            raise
    if word == "running":
        num = _numbers(fields, ("pid", "start"), text)
        return CommandState("running", pid=num.get("pid"), start_ns=num.get("start"))
    if word == "failed":
        detail = unescape(fields.get("detail", "")).decode(errors="replace")
        return CommandState("failed", reason=fields.get("reason", "?"), detail=detail)
    raise ProtocolMismatch(f"unknown command state {text!r}")


# The final state in the name of a node, $S/out/<id>/end/<name> (PROTOCOL.md):
# exited_<code>_<start>_<end>_<dur>_<stdout>_<stderr>_<lost>, or killed_ with
# <signal>_<reason> in place of <code> (Xenstore names allow no space or =).
_KILL_REASONS = ("kill", "timeout", "signal")


def parse_end(name: str) -> CommandState:
    """The final state an `end/<name>` node's name carries: Dom0 has it from
    the watch event's path, without reading `state`. Parsed once per
    command, so in few steps."""
    word, *numbers = name.split("_")
    reason = None
    if word == "killed" and len(numbers) == 8:
        reason = numbers.pop(1)
        if reason not in _KILL_REASONS:
            raise ProtocolMismatch(f"unknown kill reason in end marker {name[:80]!r}")
    elif word != "exited" or len(numbers) != 7:
        raise ProtocolMismatch(f"malformed end marker {name[:80]!r}")
    digits = "".join(numbers)
    # ASCII digits only (int() takes "+1", " 1" and other scripts' digits),
    # and no field empty.
    if not (all(numbers) and digits.isascii() and digits.isdigit()):
        raise ProtocolMismatch(f"non-numeric field in end marker {name[:80]!r}")
    first, start, end, dur, stdout, stderr, lost = map(int, numbers)
    return CommandState(word, code=None if reason else first, signal=first if reason else None,
                        reason=reason, start_ns=start, end_ns=end, dur_ns=dur,
                        stdout_chunks=stdout, stderr_chunks=stderr, lost_bytes=lost)


def net_directives(addresses: list[tuple[str, str]], *, gateway: str | None = None,
                   txqueuelen: list[tuple[str, int]] | None = None,
                   arp: list[tuple[str, str, str]] | None = None,
                   names: list[tuple[str, str]] | None = None,
                   gateways: list[str] | None = None) -> str:
    """Boot-time network directives: interface names [(mac, "eth1")] first,
    then addresses [(mac, "ip/prefix")] (IPv4 or IPv6), per-interface queue
    lengths [(mac, packets)], static neighbour entries [(ip, neighbour mac,
    via mac)] and default routes (`gateway` and/or `gateways`, one per
    address family)."""
    lines = []
    for mac, name in names or []:
        _check_mac(mac)
        if not IFNAME.match(name):
            raise ValidationError(f"bad interface name {name!r}")
        lines.append(f"name {mac} {name}")
    for mac, cidr in addresses:
        _check_mac(mac)
        ipaddress.ip_interface(cidr)
        lines.append(f"addr {mac} {cidr}")
    for mac, qlen in txqueuelen or []:
        _check_mac(mac)
        lines.append(f"txqueuelen {mac} {int(qlen)}")
    for ip, mac, via in arp or []:
        ipaddress.ip_address(ip)
        _check_mac(mac)
        _check_mac(via)
        lines.append(f"arp {ip} {mac} {via}")
    for gw in ([gateway] if gateway else []) + list(gateways or []):
        ipaddress.ip_address(gw)
        lines.append(f"route default {gw}")
    return "\n".join(lines)


def _check_mac(mac: str) -> None:
    if not MAC.match(mac):
        raise ValidationError(f"bad MAC address {mac!r}")
