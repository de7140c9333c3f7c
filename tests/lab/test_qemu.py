"""Unit tests of the lab's QEMU command line and console protocol (no QEMU run)."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from fake_runner import FakeRunner

from selena.errors import LabError
from selena.lab.build import LabArtefacts
from selena.lab.qemu import Lab, command_script, qemu_argv
from selena.signals import SignalInterrupt

ART = LabArtefacts(Path("/c/xen"), Path("/c/vmlinuz"), Path("/c/dom0.cpio.gz"),
                   Path("/c/tiny.cpio.gz"), {})


@pytest.fixture(autouse=True)
def private_lab_lock(tmp_path, monkeypatch):
    """These tests boot no QEMU: they must not queue behind a real lab."""
    monkeypatch.setenv("SELENA_CACHE", str(tmp_path / "cache"))


def test_qemu_argv_boots_patched_xen_with_dom0_and_share():
    argv = qemu_argv(ART, Path("/src"), "run1")
    assert argv[0] == "qemu-system-x86_64"
    assert argv[argv.index("-kernel") + 1] == "/c/xen"
    assert argv[argv.index("-cpu") + 1] == "qemu64"
    modules = argv[argv.index("-initrd") + 1]
    assert modules.startswith("/c/vmlinuz console=hvc0")
    assert "selena.run=run1" in modules
    assert modules.endswith(",/c/dom0.cpio.gz")
    assert "local,path=/src,mount_tag=selena,security_model=none,id=selena" in argv
    assert "dom0_mem=1536M,max:1536M" in argv[argv.index("-append") + 1]


def test_more_hypervisor_arguments_follow_the_usual_ones():
    usual = qemu_argv(ART, Path("/src"), "x")
    flask = qemu_argv(replace(ART, xen_args="xsm=flask flask=enforcing"), Path("/src"), "x")
    append = usual.index("-append") + 1
    assert flask[append] == usual[append] + " xsm=flask flask=enforcing"
    assert flask[:append] + flask[append + 1:] == usual[:append] + usual[append + 1:]


def test_qemu_argv_rejects_commas_in_artefact_paths():
    bad = LabArtefacts(Path("/c/xen"), Path("/c/a,b"), Path("/c/d"), Path("/c/t"), {})
    with pytest.raises(LabError, match="comma"):
        qemu_argv(bad, Path("/src"), "x")
    bad = replace(ART, images=Path("/c/im,ages"))
    with pytest.raises(LabError, match="comma"):
        qemu_argv(bad, Path("/src"), "x")


def test_the_debian_images_are_shared_read_only_when_built():
    assert sum(a == "-virtfs" for a in qemu_argv(ART, Path("/src"), "x")) == 1
    argv = qemu_argv(replace(ART, images=Path("/c/images")), Path("/src"), "x")
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert shares[1] == ("local,path=/c/images,mount_tag=selena-images,security_model=none,"
                         "readonly=on,id=selena-images")


def test_the_analysis_packages_are_shared_read_only_when_built():
    argv = qemu_argv(replace(ART, images=Path("/c/images"), analysis=Path("/c/analysis")),
                     Path("/src"), "x")
    shares = [argv[i + 1] for i, a in enumerate(argv) if a == "-virtfs"]
    assert shares[2] == ("local,path=/c/analysis,mount_tag=selena-analysis,"
                         "security_model=none,readonly=on,id=selena-analysis")
    with pytest.raises(LabError, match="comma"):
        qemu_argv(replace(ART, analysis=Path("/c/ana,lysis")), Path("/src"), "x")


def test_command_script_quotes_argv_and_exports_tdf():
    script = command_script(["echo", "a b", "$HOME"], 2.5)
    assert "export SELENA_TDF=2.5" in script
    assert "echo 'a b' '$HOME'" in script
    assert "SELENA_TDF" not in command_script("true", None)


def _lab_with_console(console: str, tmp_path: Path) -> Lab:
    fake = FakeRunner()
    fake.respond(["qemu-system-x86_64"], stdout=console)
    lab = Lab(runner=fake, artefacts=ART)
    lab.share = tmp_path
    return lab


def test_run_returns_command_output_and_status(tmp_path):
    lab = _lab_with_console("(XEN) booting\nSELENA-LAB-READY\nSELENA-LAB-BEGIN 0001\n"
                            "hello\r\nSELENA-LAB-EXIT 1 2\nSELENA-LAB-EXIT 0001 3\n", tmp_path)
    result = lab.run(["true"])
    assert result.returncode == 3
    # a marker-like line that is not this job's end is output, not the end
    assert result.output == "hello\nSELENA-LAB-EXIT 1 2\n"
    # the per-run job directory is removed afterwards
    assert list((tmp_path / "build" / "lab-run").iterdir()) == []


def test_a_session_runs_jobs_in_order_on_one_boot(tmp_path):
    lab = _lab_with_console("SELENA-LAB-READY\nSELENA-LAB-BEGIN 0001\none\n"
                            "SELENA-LAB-EXIT 0001 0\nSELENA-LAB-BEGIN 0002\ntwo\n"
                            "SELENA-LAB-EXIT 0002 5\n", tmp_path)
    seen: list[str] = []
    with lab.session() as session:
        first = session.run("echo one", on_output=seen.append)
        second = session.run(["echo", "two"], tdf=2)
        with pytest.raises(LabError, match="the lab stopped during the command"):
            session.run("echo three")
    assert (first.returncode, first.output, second.returncode, second.output) == \
        (0, "one\n", 5, "two\n")
    assert second.boot_seconds == 0.0
    qemus = [c for c in lab.runner.calls if c[0] == "qemu-system-x86_64"]
    assert len(qemus) == 1


def test_dom0_failure_is_reported_with_console_tail(tmp_path):
    lab = _lab_with_console("(XEN) boot\nSELENA-LAB-FAIL cannot mount xenfs\n", tmp_path)
    with pytest.raises(LabError, match="cannot mount xenfs") as info:
        lab.run(["true"])
    assert "(XEN) boot" in str(info.value)


def test_crash_before_the_command_is_reported(tmp_path):
    lab = _lab_with_console("(XEN) Hardware Dom0 crashed\n", tmp_path)
    with pytest.raises(LabError, match="before Dom0 ran the command"):
        lab.run(["true"])


def test_second_lab_waits_for_the_first(tmp_path, monkeypatch):
    import fcntl
    import threading

    from selena.lab.qemu import one_lab_at_a_time

    monkeypatch.setenv("SELENA_CACHE", str(tmp_path))
    messages: list[str] = []
    order: list[str] = []
    holder = open(tmp_path / "lab.lock", "w")
    fcntl.flock(holder, fcntl.LOCK_EX)

    def second() -> None:
        with one_lab_at_a_time(messages.append):
            order.append("second")

    thread = threading.Thread(target=second)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive(), "the second lab must wait while the first holds the lock"
    assert messages and "another lab is running" in messages[0]
    order.append("first done")
    fcntl.flock(holder, fcntl.LOCK_UN)
    holder.close()
    thread.join(5)
    assert order == ["first done", "second"]


def test_cache_keys_do_not_depend_on_where_the_tree_is_cloned(tmp_path, monkeypatch):
    from selena.templates import artefacts as build

    # A file outside the tree (a host binary) between the two clones' paths.
    host = tmp_path / "m" / "usr-bin-tool"
    host.parent.mkdir()
    host.write_bytes(b"\x7fELF")
    keys = []
    for clone in ("a", "z"):
        root = tmp_path / clone
        (root / "guest-templates").mkdir(parents=True)
        (root / "guest-templates" / "f.config").write_text("CONFIG_X=y\n")
        monkeypatch.setattr(build, "project_root", lambda root=root: root)
        keys.append(build.hash_files([*build.tree_files(root / "guest-templates"), host]))
    assert keys[0] == keys[1]
    (tmp_path / "z" / "guest-templates" / "f.config").write_text("CONFIG_X=n\n")
    assert build.hash_files([*build.tree_files(tmp_path / "z" / "guest-templates"),
                             host]) != keys[0]


def test_a_lab_given_more_memory_boots_qemu_with_it(tmp_path):
    fake = FakeRunner()
    fake.respond(["qemu-system-x86_64"],
                 stdout="SELENA-LAB-READY\nSELENA-LAB-BEGIN 0001\nSELENA-LAB-EXIT 0001 0\n")
    lab = Lab(runner=fake, artefacts=ART, memory_mb=6144)
    lab.share = tmp_path
    lab.run(["true"])
    (argv,) = [c for c in fake.calls if c[0] == "qemu-system-x86_64"]
    assert argv[argv.index("-m") + 1] == "6144"
    # Dom0's share stays fixed; the rest is the guests'
    assert "dom0_mem=1536M,max:1536M" in argv[argv.index("-append") + 1]


@pytest.mark.parametrize("text", ["lots", "1024", "1000000"])
def test_lab_memory_outside_the_range_is_refused_by_name(text):
    import argparse

    from selena.lab.cli import lab_memory_arg
    with pytest.raises(argparse.ArgumentTypeError, match="--memory"):
        lab_memory_arg(text)


def test_sigterm_while_the_lab_runs_powers_it_off_as_ctrl_c_does(tmp_path):
    """`kill` of `selena reproduce` left QEMU running: Python died of the
    signal before the session's teardown. While a session is open SIGTERM
    (and SIGHUP) raise SignalInterrupt, so the teardown runs; after it the
    handlers are what they were."""
    before = signal.getsignal(signal.SIGTERM)
    lab = _lab_with_console("SELENA-LAB-READY\n", tmp_path)
    with lab.session():
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler) and handler is not before
        with pytest.raises(SignalInterrupt, match="SIGTERM"):
            handler(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGTERM) == before
    # The whole path, in a process of its own: a session around a job that
    # never ends, a SIGTERM, and the teardown's QEMU kill.
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        sys.path[:0] = {[str(Path(__file__).parents[1] / "support")]!r}
        from fake_runner import FakeRunner
        import selena.lab.qemu
        from selena.lab.qemu import Lab
        from selena.lab.build import LabArtefacts
        selena.lab.qemu.POWER_OFF_S = 0.5      # the fake never powers off: killed
        fake = FakeRunner()
        # A lab that runs until it is powered off (a fake QEMU that ended
        # by itself raced the signal: the job failed first, or the signal
        # landed in the teardown).
        fake.respond(["qemu-system-x86_64"], stdout="SELENA-LAB-READY\\n", stays_up=True)
        art = LabArtefacts(Path("/c/xen"), Path("/c/vmlinuz"), Path("/c/dom0.cpio.gz"),
                           Path("/c/tiny.cpio.gz"), {{}})
        lab = Lab(runner=fake, artefacts=art)
        lab.share = Path({str(tmp_path)!r})
        try:
            with lab.session() as session:
                print("up", flush=True)
                session.run("sleep 600", timeout=60)
        except KeyboardInterrupt as exc:
            print("interrupted", type(exc).__name__, flush=True)
        print("torn down", not any((lab.share / "build" / "lab-run").iterdir()), flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "up\n"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert out == "interrupted SignalInterrupt\ntorn down True\n", out
    assert proc.returncode == 0


def test_a_signal_while_the_run_directory_is_removed_is_noted_not_obeyed(tmp_path, monkeypatch):
    """A SIGTERM that landed in the teardown's rmtree aborted it and left the
    run's directory behind (seen once under load): the removal now runs
    with interrupts deferred, and the signal is noted."""
    lab = _lab_with_console("SELENA-LAB-READY\n", tmp_path)
    noted: list[str] = []
    lab.progress = noted.append
    real_rmtree = shutil.rmtree

    def rmtree_hit_by_a_signal(path, ignore_errors=False):
        os.kill(os.getpid(), signal.SIGTERM)      # handled before the next bytecode
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr("selena.lab.qemu.shutil.rmtree", rmtree_hit_by_a_signal)
    with lab.session():
        pass
    assert list((tmp_path / "build" / "lab-run").iterdir()) == []
    assert any("removing the lab's run directory" in n for n in noted), noted
