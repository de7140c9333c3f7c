"""`selena lab bench-control --baseline REV`: another revision's control
channel run beside this tree's in one boot. Host tests: the module swap in a
real interpreter, the export from a real git repository, the interleaving
and the summary (the lab's part is bench-control's own)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from selena.errors import LabError
from selena.lab.bench_control import CPU_MARKER
from selena.lab.bench_control_ab import THIS_TREE, cpu_figures, export_control, run_ab, summary
from selena.lab.qemu import LabResult
from selena.paths import project_root
from selena.runner import Runner


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two commits of a selena/control/channel.py."""
    root = tmp_path / "repo"
    (root / "selena" / "control").mkdir(parents=True)
    _git(root, "init", "-q")
    channel = root / "selena" / "control" / "channel.py"
    channel.write_text("VERSION = 1\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "one")
    channel.write_text("VERSION = 2\n")
    _git(root, "commit", "-q", "-am", "two")
    return root


def test_the_swap_takes_selena_control_from_the_directory_and_the_rest_from_the_tree(tmp_path):
    control = tmp_path / "old" / "selena" / "control"
    shutil.copytree(project_root() / "selena" / "control", control,
                    ignore=shutil.ignore_patterns("__pycache__"))
    with (control / "interface.py").open("a") as f:
        f.write("\nFROM_THE_OTHER_REVISION = True\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "ab_probe.py").write_text(
        "import sys\n"
        "import selena.backends.xl\n"
        "import selena.control.channel as channel\n"
        "import selena.control.interface as interface\n"
        "print(channel.__file__)\n"
        "print(interface.FROM_THE_OTHER_REVISION)\n"
        "print(selena.backends.xl.__file__)\n"
        "print(sys.argv[1:])\n")
    env = dict(os.environ, PYTHONPATH=f"{probe}{os.pathsep}{project_root()}")
    out = subprocess.run([sys.executable, "-m", "selena.lab.control_from", str(control),
                          "ab_probe", "--commands", "3"], env=env, capture_output=True,
                         text=True, check=True, cwd=project_root()).stdout.splitlines()
    assert out[0] == str(control.resolve() / "channel.py")
    assert out[1] == "True"
    assert out[2] == str(project_root() / "selena" / "backends" / "xl.py")
    assert out[3] == "['--commands', '3']"


# The last revision of selena/control before end markers and $S/features.
BEFORE_END_MARKERS = "61638a3"


def test_bench_control_loads_against_a_channel_from_before_end_markers(tmp_path):
    """`--baseline` runs this tree's bench-control with an older
    selena/control: it may import nothing the older one lacks (once it
    imported parse_end, and the run died at once in the lab)."""
    archive = subprocess.run(["git", "-C", str(project_root()), "archive", BEFORE_END_MARKERS,
                              "selena/control"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive, check=True)
    control = tmp_path / "selena" / "control"
    assert "parse_end" not in (control / "protocol.py").read_text()
    done = subprocess.run([sys.executable, "-m", "selena.lab.control_from", str(control),
                           "selena.lab.bench_control", "--help"], capture_output=True,
                          text=True, cwd=project_root())
    assert done.returncode == 0, done.stderr
    assert "--baseline-commands" in done.stdout


def test_the_swap_refuses_a_directory_without_the_channel(tmp_path):
    done = subprocess.run([sys.executable, "-m", "selena.lab.control_from", str(tmp_path),
                           "selena.lab.bench_control"], capture_output=True, text=True,
                          cwd=project_root())
    assert done.returncode == 2
    assert f"{tmp_path} holds no channel.py" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_baseline_is_exported_whole_under_build_once(repo):
    first = _git(repo, "rev-parse", "HEAD~1")
    commit, control = export_control(Runner(), "HEAD~1", repo)
    assert commit == first[:12]
    assert control == Path("build", "bench-control", commit, "selena", "control")
    assert (repo / control / "channel.py").read_text() == "VERSION = 1\n"
    assert not list((repo / "build" / "bench-control").glob("*.partial"))
    assert not list((repo / "build" / "bench-control").glob("*.tar"))
    (repo / control / "channel.py").write_text("VERSION = kept\n")
    assert export_control(Runner(), first, repo) == (commit, control)     # not exported again
    assert (repo / control / "channel.py").read_text() == "VERSION = kept\n"


def test_a_commit_without_the_control_channel_is_refused_and_leaves_nothing(repo):
    (repo / "README").write_text("x\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "readme")
    _git(repo, "rm", "-q", "-r", "selena")
    _git(repo, "commit", "-q", "-m", "no channel")
    with pytest.raises(LabError, match=r"--baseline HEAD: commit \w+ has no "
                                       r"selena/control/channel.py"):
        export_control(Runner(), "HEAD", repo)
    assert list((repo / "build" / "bench-control").iterdir()) == []


def test_a_revision_that_is_not_a_commit_is_refused_by_name(repo):
    with pytest.raises(LabError, match=r"--baseline no-such-rev: not a commit"):
        export_control(Runner(), "no-such-rev", repo)
    assert not (repo / "build").exists()


def _output(figures: dict[str, dict[str, float]]) -> str:
    return "  a table\n" + CPU_MARKER + json.dumps(figures) + "\n"


def _case(selena: float, own: float | None = None) -> dict[str, float]:
    own = selena / 2 if own is None else own
    return {"selena": selena, "user": selena * 0.7, "kernel": selena * 0.3,
            "xenstored": 2 * selena, "steal": 1.0, "selena_own": own, "xenstored_own": selena}


def test_the_figures_are_read_from_bench_controls_last_line_of_them():
    assert cpu_figures(_output({"1 guest": _case(5.0)})) == {"1 guest": _case(5.0)}
    with pytest.raises(LabError, match="printed no Dom0 CPU figures"):
        cpu_figures("Traceback ...\nRuntimeError: boom\n")


def test_the_summary_gives_each_trees_runs_medians_and_ratio():
    runs = [("abc", {"1 guest": _case(12.0), "7 guests": _case(20.0)}),
            (THIS_TREE, {"1 guest": _case(11.0), "7 guests": _case(18.0)}),
            ("abc", {"1 guest": _case(13.0), "7 guests": _case(22.0)}),
            (THIS_TREE, {"1 guest": _case(10.0), "7 guests": _case(19.0)}),
            ("abc", {"1 guest": _case(11.0), "7 guests": _case(21.0)}),
            (THIS_TREE, {"1 guest": _case(12.0), "7 guests": _case(17.0)})]
    lines = summary(runs, "abc")
    one = [line for line in lines if line.lstrip().startswith("1 guest")]
    assert "12.0 13.0 11.0" in one[0] and one[0].split()[-7] == "12.0"     # median selena
    assert "11.0 10.0 12.0" in one[1] and one[1].split()[-7] == "11.0"
    assert one[2].endswith("this tree / abc: 0.92 (own: 0.92)")
    seven = [line for line in lines if line.lstrip().startswith("7 guests")]
    assert seven[2].endswith("this tree / abc: 0.86 (own: 0.86)")
    # user, kernel, xenstored, steal, selena own, xenstored own
    assert seven[1].split()[-6:] == ["12.6", "5.4", "36.0", "1.0", "9.0", "18.0"]


def test_the_own_ratio_is_left_out_where_the_baseline_has_none():
    runs = [("abc", {"1 guest": _case(12.0, own=0.0)}),
            (THIS_TREE, {"1 guest": _case(10.0, own=3.0)})]
    ratio = [line for line in summary(runs, "abc") if "this tree / abc" in line]
    assert ratio == [f"  {'1 guest':<28} {'':<15} this tree / abc: 0.83"]


class _Session:
    def __init__(self, results: list[LabResult]) -> None:
        self.results = results
        self.commands: list[list[str]] = []

    def run(self, command: list[str], **_kw: object) -> LabResult:
        self.commands.append(command)
        return self.results.pop(0)


class _Lab:
    def __init__(self, share: Path, results: list[LabResult]) -> None:
        self.share = share
        self.sessions: list[_Session] = []
        self.results = results

    @contextlib.contextmanager
    def session(self) -> Iterator[_Session]:
        self.sessions.append(_Session(self.results))
        yield self.sessions[-1]


def _result(rc: int, selena: float) -> LabResult:
    return LabResult(rc, _output({"1 guest": _case(selena)}), 0.0, 1.0)


def test_the_runs_alternate_in_one_boot_the_baseline_first(repo):
    lab = _Lab(repo, [_result(0, 12.0), _result(0, 11.0), _result(0, 13.0), _result(0, 10.0)])
    echoed: list[str] = []
    lines = run_ab(lab, Runner(), "HEAD~1", ["--commands", "30"], 2, echoed.append)
    commit = _git(repo, "rev-parse", "HEAD~1")[:12]
    assert len(lab.sessions) == 1
    swapped = ["python3", "-m", "selena.lab.control_from",
               f"build/bench-control/{commit}/selena/control", "selena.lab.bench_control",
               "--commands", "30"]
    plain = ["python3", "-m", "selena.lab.bench_control", "--commands", "30"]
    assert lab.sessions[0].commands == [swapped, plain, swapped, plain]
    assert [e for e in echoed if e.startswith("==")] == [
        f"== run 1 of 2: the control channel of {commit}\n",
        "== run 1 of 2: the control channel of this tree\n",
        f"== run 2 of 2: the control channel of {commit}\n",
        "== run 2 of 2: the control channel of this tree\n"]
    assert lines[-1].endswith(f"this tree / {commit}: 0.84 (own: 0.84)")


def test_a_failed_run_stops_the_comparison_naming_whose_channel_it_ran(repo):
    lab = _Lab(repo, [_result(0, 12.0), _result(1, 11.0)])
    with pytest.raises(LabError, match="control channel of this tree exited 1"):
        run_ab(lab, Runner(), "HEAD", [], 2, lambda _text: None)


@pytest.mark.parametrize(("argv", "message"), [
    (["--repeat", "3"], "--repeat 3: it counts the runs of each tree beside a baseline; "
                        "give --baseline REV too"),
    (["--baseline", "HEAD", "--repeat", "0"], "--repeat 0: give 1 or more runs of each"),
])
def test_a_repeat_without_a_baseline_or_below_one_is_refused_before_any_boot(
        argv, message, capsys, monkeypatch):
    from selena import cli

    def no_lab(*_args: object, **_kw: object) -> None:
        raise AssertionError("a lab was started")
    monkeypatch.setattr("selena.lab.cli.Lab", no_lab)
    assert cli.main(["lab", "bench-control", *argv]) == 1
    assert capsys.readouterr().err == f"selena: error: {message}\n"
