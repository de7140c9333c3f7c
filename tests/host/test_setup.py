"""`selena host setup` and `selena host export` on a fake host: a FakeRunner
for the commands, a fake /proc and /lib/modules under tmp_path for the
module probe, a TemplateBuilder whose templates() returns files made here
(the lab's build itself is not run), and an install root under tmp_path."""

from __future__ import annotations

import json
import os
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_main import run_cli
from fake_runner import FakeRunner

import selena.cli.host as cli_host
import selena.host.setup as host_setup
from selena.control.protocol import PROTOCOL_VERSION
from selena.errors import HostSetupError
from selena.host import doctor
from selena.host.doctor import HostProbe, Status, check_templates
from selena.host.modules import HOST_MODULES, LAB_ONLY_MODULES, MODULES_LOAD_FILE
from selena.host.setup import (
    ANALYSIS_PACKAGES,
    IMAGES_UNDER,
    TEMPLATES_UNDER,
    HostSetup,
    bundle_set,
    export,
)
from selena.lab.build import DOM0_MODULES, DOM0_PACKAGES
from selena.paths import project_root
from selena.templates.artefacts import heartbeat
from selena.templates.build import BuiltTemplates, DiskTemplate, TemplateBuilder
from selena.templates.images import scenarios_need_debian

RELEASE = "6.1.0-test"
BASE = ("tiny-host", "tools-host", "ovs-switch", "of-controller")


class FakeBuilder(TemplateBuilder):
    """templates() as the lab's build returns it, from small files."""

    def __init__(self, root: Path):
        super().__init__(runner=FakeRunner(), root=root)
        self.calls: list[bool] = []

    def templates(self, *, with_debian=False, variants=(), beside=None) -> BuiltTemplates:
        self.calls.append(with_debian)
        images = self.root / "images"
        images.mkdir(parents=True, exist_ok=True)

        def file(path: Path, text: str) -> Path:
            path.write_text(text)
            return path
        kernel = file(self.root / "guest-vmlinuz-k", "guest kernel")
        initrds = {name: file(self.root / f"{name}-x.cpio.gz", f"initrd of {name}")
                   for name in BASE}
        disks = {}
        if with_debian:
            vmlinux = file(images / "debian-vmlinux-6.1", "debian kernel")
            ramdisk = file(images / "debian-initrd-k.gz", "debian initrd")
            disks["debian"] = DiskTemplate("debian", vmlinux, ramdisk,
                                           file(images / "debian-k.ext4", "disk"),
                                           "console=hvc0", 128, ())
            disks["qjump-host"] = DiskTemplate("qjump-host", vmlinux, ramdisk,
                                               file(images / "debian-k+q.ext4", "qjump disk"),
                                               "console=hvc0", 160, ("memcached",))
        return BuiltTemplates(self.root / "kernel-root", kernel, initrds, disks, images)


class OvsDownRunner(FakeRunner):
    """Open vSwitch down until `systemctl enable --now openvswitch-switch`."""

    def __init__(self) -> None:
        super().__init__()
        self.respond(["ovs-vsctl"], 1, "", "database connection failed")

    def run(self, argv, **kwargs):
        if list(argv[:2]) == ["systemctl", "enable"]:
            self.responses.pop(("ovs-vsctl",), None)
        return super().run(argv, **kwargs)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """The fake host's /proc and /lib/modules: every module loaded but loop
    (loadable)."""
    probe = tmp_path / "probe"
    (probe / "proc/sys/kernel").mkdir(parents=True)
    (probe / "proc/sys/kernel/osrelease").write_text(RELEASE + "\n")
    loaded = [m.replace("-", "_") for m in HOST_MODULES if m != "loop"]
    (probe / "proc/modules").write_text("".join(f"{m} 1 0 - Live 0x0\n" for m in loaded))
    mods = probe / "lib/modules" / RELEASE
    mods.mkdir(parents=True)
    (mods / "modules.dep").write_text("kernel/drivers/block/loop.ko:\n")
    (mods / "modules.builtin").write_text("")
    return probe


def make_setup(tmp_path: Path, host: Path, runner: FakeRunner, **kwargs) -> tuple[HostSetup,
                                                                                 list[str]]:
    lines: list[str] = []
    defaults: dict[str, Any] = dict(runner=runner, root=tmp_path / "root", progress=lines.append,
                    probe_root=host, find_module=lambda name: object(), in_venv=True,
                    python="/venv/bin/python", euid=lambda: 0)
    defaults.update(kwargs)
    return HostSetup(**defaults), lines


def changing_calls(runner: FakeRunner) -> list[tuple[str, ...]]:
    """Every command but the read-only Open vSwitch probe."""
    return [c for c in runner.calls if c[:1] != ("ovs-vsctl",)]


def test_a_dry_run_prints_every_step_and_runs_and_writes_nothing(tmp_path, host):
    runner = FakeRunner()
    runner.respond(["ovs-vsctl"], 1, "", "database connection failed")
    setup, lines = make_setup(tmp_path, host, runner, builder=FakeBuilder(tmp_path / "cache"),
                              find_module=lambda name: None)
    assert setup.run(dry_run=True) is True
    text = "\n".join(lines)
    assert changing_calls(runner) == [], runner.calls
    assert not (tmp_path / "root").exists()
    assert setup.builder.calls == []       # a dry run does not build either
    for expected in ("[1/5] analysis (scipy, matplotlib): would",
                     "run: /venv/bin/python -m pip install -q scipy>=1.10 matplotlib>=3.5",
                     "[2/5] kernel modules: would", "run: modprobe loop",
                     "[3/5] modules at boot: would",
                     f"write {tmp_path / 'root' / MODULES_LOAD_FILE}",
                     "[4/5] Open vSwitch: would",
                     "run: systemctl enable --now openvswitch-switch",
                     "[5/5] guest templates: would",
                     "build tiny-host, tools-host, ovs-switch, of-controller with the lab's "
                     "template build", "host setup: dry run, nothing was changed"):
        assert expected in text, (expected, text)


def test_a_user_who_is_not_root_is_told_so_before_any_step(tmp_path, host):
    """It ran modprobe, which refused, and said the kernel lacked the modules."""
    runner = OvsDownRunner()
    setup, lines = make_setup(tmp_path, host, runner, builder=FakeBuilder(tmp_path / "cache"),
                              euid=lambda: 1000)
    with pytest.raises(HostSetupError, match=r"^host setup changes this host \(kernel modules, "
                                             r"modules at boot, Open vSwitch, guest templates\): "
                                             r"run it as root \(sudo selena host setup\), or "
                                             r"with --dry-run to see what it would do$"):
        setup.run()
    assert changing_calls(runner) == [] and setup.builder.calls == []
    assert not (tmp_path / "root").exists()
    # A dry run is anyone's; root's runs.
    assert setup.run(dry_run=True) is True
    setup.euid = lambda: 0
    assert setup.run() is True and (tmp_path / "root" / MODULES_LOAD_FILE).is_file()


def test_setup_installs_the_built_templates_then_a_second_run_does_nothing(tmp_path, host):
    runner = OvsDownRunner()
    builder = FakeBuilder(tmp_path / "cache")
    setup, lines = make_setup(tmp_path, host, runner, builder=builder, with_debian=True)
    assert setup.run() is True
    root = tmp_path / "root"
    assert ("modprobe", "loop") in runner.calls
    assert ("systemctl", "enable", "--now", "openvswitch-switch") in runner.calls
    assert (root / MODULES_LOAD_FILE).read_text().split("\n")[1:-1] == list(HOST_MODULES)
    troot, iroot = root / TEMPLATES_UNDER, root / IMAGES_UNDER
    assert sorted(p.name for p in troot.iterdir()) == sorted([*BASE, "debian", "qjump-host"])
    assert (troot / "tiny-host" / "vmlinuz").read_text() == "guest kernel"
    assert (troot / "ovs-switch" / "initrd.gz").read_text() == "initrd of ovs-switch"
    tiny = yaml.safe_load((troot / "tiny-host" / "template.yaml").read_text())
    assert tiny["memory_mb"] == 32 and tiny["protocol"] == PROTOCOL_VERSION
    qjump = yaml.safe_load((troot / "qjump-host" / "template.yaml").read_text())
    # The planner reads these paths: where the images really are.
    assert qjump["disk"] == str(iroot / "debian-k+q.ext4")
    assert Path(qjump["kernel"]).read_text() == "debian kernel"
    assert not [p for p in [*troot.iterdir(), *iroot.iterdir()] if p.name.startswith(".")]
    # What the doctor sees of them: every template whole, this protocol.
    probe = HostProbe(runner=FakeRunner(), template_root=troot)
    assert check_templates(probe).status is Status.OK, check_templates(probe)
    assert doctor.check_agent_protocol(probe).status is Status.OK

    # Second run: the host now answers, every step has nothing to do.
    runner2 = FakeRunner()
    (host / "proc/modules").write_text("".join(f"{m.replace('-', '_')} 1 0 - Live 0x0\n"
                                               for m in HOST_MODULES))
    again, lines2 = make_setup(tmp_path, host, runner2, builder=builder, with_debian=True)
    assert again.run() is False
    assert changing_calls(runner2) == []
    assert lines2[-1] == "host setup: nothing to do, this host is set up"
    heads = [line for line in lines2 if line.startswith("[")]
    assert all("nothing to do" in line for line in heads[:4]), lines2
    # The templates are known only once built (cached, quick when warm): then nothing to do.
    assert heads[4].startswith("[5/5] guest templates: build tiny-host"), lines2
    assert lines2[-2].startswith("      templates: nothing to do (debian, of-controller,"), lines2


def test_export_then_setup_from_the_bundle_on_another_host(tmp_path, host):
    bundle = tmp_path / "templates.tar"
    said: list[str] = []
    export(bundle, with_debian=True, progress=said.append,
           builder=FakeBuilder(tmp_path / "cache"))
    assert "export: 6 templates" in said[0] and not bundle.with_name("templates.tar.partial") \
        .exists()
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("manifest.json"))
    # The guest kernel is in four templates and in the bundle once.
    assert len(names) == 1 + len({s for t in manifest["templates"].values()
                                  for s in t["files"].values()})
    assert manifest["protocol"] == PROTOCOL_VERSION
    assert manifest["templates"]["debian"]["spec"]["disk"] == "images/debian-k.ext4"

    runner = FakeRunner()
    setup, lines = make_setup(tmp_path, host, runner, bundle=bundle)
    setup.run()
    troot = tmp_path / "root" / TEMPLATES_UNDER
    assert (troot / "of-controller" / "initrd.gz").read_text() == "initrd of of-controller"
    assert (tmp_path / "root" / IMAGES_UNDER / "debian-k.ext4").read_text() == "disk"
    again, lines = make_setup(tmp_path, host, FakeRunner(), bundle=bundle)
    again.run(dry_run=True)
    assert any(line.startswith("[5/5] guest templates: nothing to do (debian, of-controller,")
               for line in lines), lines

    # What a set-up host exports (--installed) installs the same elsewhere.
    copy = tmp_path / "copy.tar"
    export(copy, installed=True, root=tmp_path / "root", with_debian=True)
    other, _ = make_setup(tmp_path, host, FakeRunner(), bundle=copy, root=tmp_path / "other")
    other.run()
    for name in ("tiny-host", "qjump-host"):
        spec = yaml.safe_load((tmp_path / "other" / TEMPLATES_UNDER / name / "template.yaml")
                              .read_text())
        files = [spec["kernel"], spec["ramdisk"]] + ([spec["disk"]] if "disk" in spec else [])
        for f in files:
            path = Path(f) if f.startswith("/") else \
                tmp_path / "other" / TEMPLATES_UNDER / name / f
            assert path.exists() and str(path).startswith(str(tmp_path / "other")), path


def test_a_bad_export_target_is_refused_before_any_build(tmp_path):
    class NoBuild:
        def __getattr__(self, name):
            raise AssertionError(f"built before the target was checked ({name})")
    with pytest.raises(HostSetupError, match=r"/missing does not exist: create it or export "
                                             r"elsewhere$"):
        export(tmp_path / "missing" / "t.tar", builder=NoBuild())
    with pytest.raises(HostSetupError, match="is a directory: give the bundle's file name"):
        export(tmp_path, builder=NoBuild())
    assert list(tmp_path.iterdir()) == []
    # A file where a directory must be was said not to exist.
    (tmp_path / "file").write_text("")
    with pytest.raises(HostSetupError, match=r"/file is not a directory: export elsewhere$"):
        export(tmp_path / "file" / "t.tar", builder=NoBuild())


def test_a_damaged_bundle_installs_nothing(tmp_path, host):
    bundle = tmp_path / "b.tar"
    export(bundle, builder=FakeBuilder(tmp_path / "cache"))
    # Rewrite one blob with other bytes of the same length.
    damaged = tmp_path / "damaged.tar"
    with tarfile.open(bundle) as src, tarfile.open(damaged, "w") as out:
        for member in src.getmembers():
            data = src.extractfile(member).read()
            if b"initrd of ovs-switch" == data:
                data = b"initrd of ovs-swatch"
            import io
            out.addfile(member, io.BytesIO(data))
    setup, _ = make_setup(tmp_path, host, FakeRunner(), bundle=damaged)
    with pytest.raises(HostSetupError, match="ovs-switch: initrd.gz does not match its sha256"):
        setup.run()
    troot = tmp_path / "root" / TEMPLATES_UNDER
    assert list(troot.iterdir()) == []          # no template, no staging left
    assert not (tmp_path / "root" / "var/lib/selena/installed.json").exists()


@pytest.mark.parametrize("content, message", [
    (None, "no such file (make one with selena host export FILE)"),
    ("dir", "a directory, not a bundle file (make one with selena host export FILE)"),
    (b"not a tar", "not a selena host export bundle (not a tar archive)"),
    ({"format": 9}, "bundle format 9, this selena reads format 1"),
    ({"format": 1, "protocol": PROTOCOL_VERSION + 1, "selena_version": "9",
      "templates": {}}, f"speaks protocol {PROTOCOL_VERSION + 1} (selena 9)"),
    ({"format": 1, "protocol": PROTOCOL_VERSION,
      "templates": {"../x": {"spec": {}, "files": {}}}}, "template '../x' in its manifest"),
    ({"format": 1, "protocol": PROTOCOL_VERSION,
      "templates": {"x": {"spec": {}, "files": {"../../etc/passwd": "0"}}}}, "bad file name"),
])
def test_bad_bundles_are_one_line_errors(tmp_path, content, message):
    bundle = tmp_path / "b.tar"
    if content == "dir":
        bundle.mkdir()
    elif isinstance(content, bytes):
        bundle.write_bytes(content)
    elif content is not None:
        import io
        data = json.dumps(content).encode()
        with tarfile.open(bundle, "w") as tar:
            info = tarfile.TarInfo("manifest.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(HostSetupError) as caught:
        bundle_set(bundle)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_analysis_uses_pip_in_a_venv_and_debian_packages_otherwise(tmp_path, host):
    runner = FakeRunner()
    setup, _ = make_setup(tmp_path, host, runner, find_module=lambda n: None
                          if n == "scipy" else object())
    assert setup.analysis_step().actions == ["run: /venv/bin/python -m pip install -q "
                                             "scipy>=1.10"]
    setup.in_venv = False
    step = setup.analysis_step()
    assert step.actions == ["run: apt-get install -y -q python3-scipy"]
    runner.respond(["apt-get"], 100, "", "E: Unable to locate package python3-scipy")
    with pytest.raises(HostSetupError, match="^analysis: apt-get install -y -q python3-scipy "
                                             "failed: E: Unable to locate package"):
        step.run()
    setup.without = frozenset({"analysis"})
    step = setup.analysis_step()
    assert not step.actions and step.done == "left out (--without analysis)"


def test_a_module_that_does_not_load_is_named(tmp_path, host):
    runner = FakeRunner()
    runner.respond(["modprobe", "loop"], 1, "", "FATAL: Module loop not found")
    step = make_setup(tmp_path, host, runner)[0].modules_step()
    with pytest.raises(HostSetupError, match=f"modprobe failed for loop \\(kernel {RELEASE}\\)"):
        step.run()


def test_no_source_tree_and_no_bundle_says_how_to_get_templates(tmp_path, host, monkeypatch):
    monkeypatch.setattr(host_setup, "project_root", lambda: tmp_path / "nowhere")
    setup, _ = make_setup(tmp_path, host, FakeRunner())
    with pytest.raises(HostSetupError, match="no selena source tree here .* selena host setup "
                                             "--from FILE"):
        setup.run(dry_run=True)


def test_the_cli_runs_setup_and_export_and_says_bad_input_in_one_line(tmp_path, capsys,
                                                                      monkeypatch):
    runner = FakeRunner()
    monkeypatch.setattr(cli_host, "Runner", lambda: runner)
    bundle = tmp_path / "b.tar"
    export(bundle, builder=FakeBuilder(tmp_path / "cache"))
    rc, out, err = run_cli(capsys, "host", "setup", "--dry-run", "--from", str(bundle),
                           "--root", str(tmp_path / "r"))
    assert rc == 0, err
    assert "[5/5] guest templates: would" in out and "install tiny-host into" in out
    assert not (tmp_path / "r").exists()
    rc, out, err = run_cli(capsys, "host", "setup", "--from", str(tmp_path / "none.tar"))
    assert rc == 1 and err.strip() == (f"selena: error: bundle {tmp_path / 'none.tar'}: no such "
                                       "file (make one with selena host export FILE)")
    rc, out, err = run_cli(capsys, "host", "export", str(tmp_path), "--installed", "--root",
                           str(tmp_path / "r"))
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    rc, out, err = run_cli(capsys, "host", "setup", "--with", "ubuntu")
    assert rc == 2 and "invalid choice: 'ubuntu'" in err


def test_one_module_list_and_one_analysis_list_for_host_and_lab():
    assert DOM0_MODULES == HOST_MODULES + LAB_ONLY_MODULES
    for listed in (doctor.SHAPING_MODULES, doctor.XEN_BACKEND_MODULES, doctor.DISK_MODULES,
                   *doctor.BRIDGE_MODULES.values()):
        assert set(listed) <= set(HOST_MODULES), listed
    extras = tomllib.loads((project_root() / "pyproject.toml").read_text())
    assert extras["project"]["optional-dependencies"]["analysis"] == \
        [pip for _, pip, _ in ANALYSIS_PACKAGES]
    # The lab's Dom0 leaves them out (python3-scipy's compiler is 1 GB).
    assert not {deb for _, _, deb in ANALYSIS_PACKAGES} & set(DOM0_PACKAGES)


def test_a_quiet_step_prints_progress_while_it_runs():
    import time
    lines: list[str] = []
    with heartbeat(lines.append, "guest kernel", detail=lambda: "12 objects compiled",
                   expected=180, every=0.02):
        time.sleep(0.1)
    assert lines and lines[0].startswith("      guest kernel: 0 s (12 objects compiled; the "
                                         "last cold build took 180 s)"), lines
    count = len(lines)
    time.sleep(0.05)
    assert len(lines) == count       # stopped with the block


def test_the_lab_builds_the_debian_images_only_for_scenarios_that_use_them():
    scenarios = project_root() / "scenarios"
    assert scenarios_need_debian([scenarios / "qjump_ping.py"])
    assert scenarios_need_debian([scenarios / "debian_memcached.py"])
    assert not scenarios_need_debian([scenarios / "two_hosts.py"])
    assert not scenarios_need_debian([])


def _open_fds_to(path: Path) -> int:
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path.resolve()))


def test_a_bundle_is_read_blob_by_blob_and_not_kept_open(tmp_path):
    bundle = tmp_path / "templates.tar"
    export(bundle, with_debian=True, progress=lambda msg: None,
           builder=FakeBuilder(tmp_path / "cache"))
    templates = bundle_set(bundle)
    assert _open_fds_to(bundle) == 0
    sha = templates.entries["of-controller"].files["initrd.gz"]
    with templates.open_file(sha) as blob:
        assert _open_fds_to(bundle) == 1
        assert blob.read() == b"initrd of of-controller"      # that member, no more
    assert _open_fds_to(bundle) == 0
    with pytest.raises(HostSetupError, match=r"blobs/0+ is missing"):
        templates.open_file("0" * 64)
