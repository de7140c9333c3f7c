"""Encoding of command specs and network directives; parsing of states."""

import pytest

from selena.control.protocol import (
    CommandSpec,
    escape,
    net_directives,
    parse_end,
    parse_state,
    unescape,
)
from selena.errors import ProtocolMismatch, ValidationError


def test_escape_round_trip_and_exact_form():
    raw = "a b%c\n\tü"
    assert escape(raw) == "a%20b%25c%0A%09%C3%BC"
    assert unescape(escape(raw)).decode() == raw
    for bad in ("%2", "%zz", "%00"):
        with pytest.raises(ProtocolMismatch):
            unescape(bad)


def test_escape_leaves_exactly_printable_ascii_but_space_and_percent():
    """Every byte value: kept as itself when printable ASCII other than space
    and %, else %XX in capitals (what the agent's unescape expects)."""
    every = bytes(range(256))
    expected = "".join(chr(b) if 0x21 <= b <= 0x7e and b != 0x25 else f"%{b:02X}"
                       for b in every)
    assert escape(every) == expected
    assert unescape(escape(every[1:])) == every[1:]       # NUL is refused on the way back


def test_spec_encoding():
    spec = CommandSpec(argv=("echo", "a b"), env={"K": "v 1"}, cwd="/tmp",
                       timeout_ns=2_000_000_000)
    assert spec.encode() == ("selena-cmd 1\ntimeout 2000000000\ncwd /tmp\nenv K=v%201\n"
                             "arg echo\narg a%20b\n")
    assert CommandSpec(shell="x && y").encode() == "selena-cmd 1\nshell x%20&&%20y\n"


@pytest.mark.parametrize("spec,message", [
    (CommandSpec(), "either an argv or a shell"),
    (CommandSpec(argv=("a",), shell="b"), "either an argv or a shell"),
    (CommandSpec(argv=("",)), "program name is empty"),
    (CommandSpec(argv=("x",) * 129), "129 arguments"),
    (CommandSpec(argv=("x",), cwd="rel"), "not absolute"),
    (CommandSpec(argv=("x",), env={"A=B": "c"}), "bad environment variable name"),
    (CommandSpec(shell="a\0b"), "NUL byte"),
    (CommandSpec(shell="x" * 5000), "at most 1920"),
    (CommandSpec(argv=("x",), timeout_ns=-1), "negative command timeout"),
    (CommandSpec(argv=("x",), timeout_ns=2**64 - 1), "longer than"),
])
def test_bad_specs_are_refused_before_sending(spec, message):
    with pytest.raises(ValidationError, match=message):
        spec.encode()


def test_states_parse_into_the_state_machine():
    running = parse_state("running pid=42 start=100")
    assert running.state == "running" and running.pid == 42 and not running.final
    exited = parse_state("exited code=3 start=1 end=5 dur=4 stdout=2 stderr=0")
    assert exited.final and exited.code == 3 and exited.stdout_chunks == 2
    assert exited.lost_bytes == 0                   # an agent before `lost` existed
    lost = parse_state("exited code=0 start=1 end=5 dur=4 stdout=2 stderr=0 lost=2048")
    assert lost.lost_bytes == 2048
    killed = parse_state("killed signal=9 reason=timeout start=1 end=2 dur=1 stdout=0 stderr=1")
    assert killed.signal == 9 and killed.reason == "timeout" and killed.stderr_chunks == 1
    failed = parse_state("failed reason=exec detail=/x:%20No%20such%20file")
    assert failed.final and failed.reason == "exec" and failed.detail == "/x: No such file"
    for bad in ("exploded", "exited code=1", "running pid=x start=1", "exited nonsense",
                "exited code=0 start=1 end=5 dur=4 stdout=2 stderr=0 lost=many"):
        with pytest.raises(ProtocolMismatch):
            parse_state(bad)


def test_end_markers_carry_the_final_state_as_the_state_key_does():
    """The agent's end marker (out/<id>/end/<name>) and its `state` give Dom0
    the same final state; a malformed name is refused, digits ASCII only."""
    pairs = [("exited_3_1_5_4_2_0_0",
              "exited code=3 start=1 end=5 dur=4 stdout=2 stderr=0 lost=0"),
             ("killed_9_timeout_1_2_1_0_1_2048",
              "killed signal=9 reason=timeout start=1 end=2 dur=1 stdout=0 stderr=1 lost=2048")]
    for name, text in pairs:
        assert parse_end(name) == parse_state(text) and parse_end(name).final
    for bad in ("exited", "exited_3_1_5_4_2_0", "exited_3_1_5_4_2_0_0_0", "failed_exec",
                "exited_+3_1_5_4_2_0_0", "exited_\u0663_1_5_4_2_0_0", "exited__1_5_4_2_0_0",
                "killed_9_because_1_2_1_0_1_0", "running_42_100"):
        with pytest.raises(ProtocolMismatch, match="end marker"):
            parse_end(bad)


def test_net_directives():
    text = net_directives([("02:00:00:00:00:01", "10.0.0.1/24")], gateway="10.0.0.254",
                          txqueuelen=[("02:00:00:00:00:01", 100)],
                          arp=[("10.0.0.2", "02:00:00:00:00:02", "02:00:00:00:00:01")])
    assert text.splitlines() == [
        "addr 02:00:00:00:00:01 10.0.0.1/24", "txqueuelen 02:00:00:00:00:01 100",
        "arp 10.0.0.2 02:00:00:00:00:02 02:00:00:00:00:01", "route default 10.0.0.254"]
    with pytest.raises(ValidationError, match="bad MAC"):
        net_directives([("nope", "10.0.0.1/24")])


def test_printable_escapes_controls_and_cuts_long_text():
    from selena.control.protocol import printable

    assert printable("ok é 漢") == "ok é 漢"
    assert printable("a\x1b[2J\n\t\x7f\x85\u202eb") == "a\\x1b[2J\\x0a\\x09\\x7f\\x85\\u202eb"
    assert printable(b"\xff\x1bok") == "\\xff\\x1bok"
    assert printable("x" * 20, limit=5) == "xxxxx... (15 more characters)"


def test_a_failed_net_report_says_where_and_why_with_the_guests_words_escaped():
    from selena.control.protocol import net_failure
    from selena.errors import GuestSetupError

    where, why = net_failure("failed 2 no%20such%20device%1B[31m")
    assert (where, why) == ("directive 2", "no such device\\x1b[31m")
    assert net_failure("failed") == ("its directives", "failed")
    assert net_failure("failed 0 bad%zz") == ("directive 0", "bad%zz")
    error = GuestSetupError("h1", "failed 2 x", *net_failure("failed 2 x"))
    assert str(error) == "guest h1: network setup failed at directive 2: x"


def test_the_errors_module_does_not_import_the_wire_format():
    # errors.py is imported by everything; the protocol imports errors, so the
    # other way round would be a cycle (issue 35).
    import subprocess
    import sys

    probe = ("import sys, selena.errors\n"
             "print(sorted(m for m in sys.modules if m.startswith('selena.control')))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
    # Not even lazily, inside a function (where the old GuestSetupError did).
    import ast
    from pathlib import Path

    import selena.errors

    tree = ast.parse(Path(selena.errors.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m for m in imported if m and m.startswith("selena")}
