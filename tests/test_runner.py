import sys
import textwrap

import pytest
from fake_runner import FakeRunner

from selena.errors import CommandError, CommandTimeout
from selena.runner import Runner


def test_run_captures_output_and_records_history():
    runner = Runner()
    result = runner.run([sys.executable, "-c", "print('hi')"])
    assert result.stdout == "hi\n"
    assert result.returncode == 0
    assert runner.history[-1] is result


def test_failure_raises_with_command_and_stderr():
    runner = Runner()
    with pytest.raises(CommandError) as info:
        runner.run([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])
    assert info.value.returncode == 3
    assert "boom" in str(info.value)
    assert "exited with status 3" in str(info.value)


def test_missing_program_is_a_command_error():
    with pytest.raises(CommandError, match="cannot start"):
        Runner().run(["/nonexistent/selena-test-binary"])


def test_a_program_that_cannot_be_executed_is_a_command_error_at_every_door(tmp_path):
    """A tool on PATH without its execute bit, or a PATH entry the user may
    not read, is EACCES: it was a raw PermissionError traceback (from
    `selena validate`'s `selena-tdf host`), not a CommandError."""
    tool = tmp_path / "selena-tdf"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o644)
    runner = Runner()
    doors = [lambda: runner.run([str(tool), "host"], check=False),
             lambda: runner.stream([str(tool)], lambda _line: None),
             lambda: runner.spawn([str(tool)]),
             lambda: runner.daemon([str(tool)], tmp_path / "log"),
             lambda: runner.interactive([str(tool)])]
    for door in doors:
        with pytest.raises(CommandError, match=r"cannot start: Permission denied"):
            door()


def test_stream_delivers_lines_and_times_out():
    seen: list[str] = []
    result = Runner().stream([sys.executable, "-c", "print('a'); print('b')"], seen.append)
    assert seen == ["a\n", "b\n"]
    assert result.stdout == "a\nb\n"
    with pytest.raises(CommandTimeout):
        Runner().stream([sys.executable, "-c", "import time; time.sleep(30)"], seen.append,
                        timeout=0.5)


def test_an_interrupted_stream_gives_its_child_a_sigterm_and_grace(tmp_path):
    """`selena reproduce` interrupted: its child `selena lab run` must get
    the chance to power its lab off (a SIGKILL left QEMU and the lab lock)."""
    marker = tmp_path / "tore-down"
    child = textwrap.dedent(f"""
        import signal, sys, time
        def down(*_):
            open({str(marker)!r}, "w").write("yes")
            sys.exit(0)
        signal.signal(signal.SIGTERM, down)
        print("up", flush=True)
        time.sleep(60)
    """)

    def interrupt(line: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Runner().stream([sys.executable, "-c", child], interrupt, stop_grace_s=20)
    assert marker.read_text() == "yes"
    # Without grace, the old way: SIGKILL at once, no teardown.
    marker.unlink()
    with pytest.raises(KeyboardInterrupt):
        Runner().stream([sys.executable, "-c", child], interrupt)
    assert not marker.exists()


def test_fake_runner_answers_by_longest_prefix():
    fake = FakeRunner()
    fake.respond(["xl", "list"], stdout="Domain-0 0\n")
    fake.respond(["xl"], returncode=1, stderr="nope")
    assert fake.run(["xl", "list", "-l"]).stdout == "Domain-0 0\n"
    with pytest.raises(CommandError):
        fake.run(["xl", "create", "x.cfg"])
    assert fake.calls == [("xl", "list", "-l"), ("xl", "create", "x.cfg")]
