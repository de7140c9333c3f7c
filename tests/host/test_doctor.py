"""`selena host doctor` and preflight: every check's ok, warn and fail paths
on a fake Dom0 (FakeRunner answers, a fake /proc and /sys under tmp_path),
the not-a-Dom0 case for real on this machine, and preflight's one line."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fake_runner import FakeRunner

import selena.cli.host as cli_host
from selena.cli import main
from selena.control.protocol import PROTOCOL_VERSION
from selena.errors import CommandError, CommandTimeout, HostNotReady
from selena.host import doctor
from selena.host.doctor import (
    DEVICE_MODEL,
    DOM0_DEPENDENT,
    NOT_DOM0_MESSAGE,
    OPTIONAL_TEMPLATES,
    PATCHED_XEN_FIX,
    REQUIRED_TEMPLATES,
    SHAPING_MODULES,
    TDF_TOOL_FIX,
    XEN_TARGET_FALLBACK,
    HostProbe,
    Status,
    check_agent_protocol,
    check_bridge_tool,
    check_clocksource,
    check_cstates,
    check_disk,
    check_dom0,
    check_dom0_vcpus,
    check_modules,
    check_resources,
    check_scheduler,
    check_tdf_domctl,
    check_templates,
    check_tsc,
    check_xen_version,
    check_xenstored,
    preflight,
    preflight_for_runner,
    report_lines,
    run_checks,
    xen_target,
)
from selena.model import Topology
from selena.plan import TEMPLATE_ROOT
from selena.runner import CommandResult
from selena.shaping import shaping_commands

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "6.1.0-28-amd64"
# What selena-tdf prints on a stock hypervisor (xen-patches/tool/selena-tdf.c, ENOSYS).
STOCK = ("selena-tdf: the hypervisor is not patched for time dilation "
         "(XEN_DOMCTL_selena_tdf unknown)\n")
LAB_XEN_CMDLINE = "console=com1 dom0_mem=1536M,max:1536M loglvl=warning guest_loglvl=warning"
# qemu64: word 7 (CPUID 0x80000007 EDX) has no invariant TSC bit.
HW_CAPS_NO_ITSC = "078bfbff:80802001:00000000:00000000:00000000:00000000:00000000:00000000"
# The lab's Xen under QEMU: SVM emulated, no nested paging.
LAB_VIRT_CAPS = "pv hvm shadow"
HW_CAPS_ITSC = "178bfbff:f6d8320b:2c100800:000000f3:0000000f:219c07ab:0040068c:00000100"
MODULES = ("xen_evtchn", "xen_gntdev", "xen_privcmd", "xen_netback", "xen_blkback",
           "sch_htb", "sch_netem", "sch_prio", "cls_u32", "openvswitch", "bridge", "loop")
NOT_DOM0_HERE = Path("/proc/xen").exists()


class Runner(FakeRunner):
    """A FakeRunner where some programs are not installed."""

    def __init__(self, missing: Sequence[str] = ()):
        super().__init__()
        self.missing = set(missing)

    def run(self, argv: Sequence[str], **kwargs: Any) -> CommandResult:
        if argv[0] in self.missing:
            self.calls.append(tuple(argv))
            raise CommandError(list(argv), None, "", "cannot start: No such file or directory")
        return super().run(argv, **kwargs)


def write(root: Path, path: str, text: str = "") -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def xl_info(**override: str) -> str:
    fields = {"nr_cpus": "2", "free_memory": "2400", "xen_major": "4", "xen_minor": "17",
              "xen_extra": ".5", "xen_version": "4.17.5", "xen_scheduler": "credit2",
              "xen_commandline": LAB_XEN_CMDLINE, "hw_caps": HW_CAPS_NO_ITSC,
              "virt_caps": LAB_VIRT_CAPS}
    fields.update(override)
    return "".join(f"{k:22} : {v}\n" for k, v in fields.items())


# xenconsoled as the lab's Dom0 starts it (selena/lab/dom0-init.sh) and as
# Debian's init script does without XENCONSOLED_ARGS.
LAB_XENCONSOLED = ("xenconsoled", "--log=guest", "--log-dir=/var/log/xen/console",
                   "--timestamp=guest")
DEBIAN_XENCONSOLED = ("/usr/sbin/xenconsoled", "--pid-file=/run/xenconsoled.pid")


def xenconsoled(root: Path, argv: Sequence[str], pid: int = 412) -> None:
    write(root, f"/proc/{pid}/comm", "xenconsoled\n")
    write(root, f"/proc/{pid}/cmdline", "\0".join(argv) + "\0")


def install_template(root: Path, name: str, **spec: object) -> Path:
    tdir = root / str(TEMPLATE_ROOT).lstrip("/") / name
    lines = [f"name: {name}"] + [f"{k}: {v}" for k, v in spec.items()]
    write(tdir, "template.yaml", "\n".join(lines) + "\n")
    for key, default in (("kernel", "vmlinuz"), ("ramdisk", "initrd.gz")):
        value = str(spec.get(key, default))
        write(root if value.startswith("/") else tdir, value, "x")
    if "disk" in spec:
        write(root, str(spec["disk"]), "x")
    return tdir


@pytest.fixture
def lab(tmp_path) -> tuple[HostProbe, Runner]:
    """A host like the lab's Dom0: patched Xen 4.17.5 under QEMU (no
    invariant TSC, Dom0 not pinned), oxenstored, OVS, the templates the lab
    installs, every module loaded."""
    root = tmp_path / "root"
    write(root, "/proc/xen/capabilities", "control_d\n")
    write(root, "/proc/sys/kernel/osrelease", RELEASE + "\n")
    write(root, "/proc/modules", "".join(f"{m} 16384 0 - Live 0x0\n" for m in MODULES))
    write(root, f"/lib/modules/{RELEASE}/modules.dep",
          "".join(f"kernel/x/{m}.ko:\n" for m in MODULES))
    write(root, f"/lib/modules/{RELEASE}/modules.builtin", "kernel/x/unix.ko\n")
    write(root, "/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu tsc msr pae\n")
    write(root, "/run/xenstored/socket")
    (root / "usr/lib/xen-4.17").mkdir(parents=True)
    write(root, "/etc/xen/scripts/vif-openvswitch", "#!/bin/sh\n")
    write(root, DEVICE_MODEL)
    write(root, "/sys/devices/system/cpu/online", "0-1\n")
    write(root, "/sys/devices/system/clocksource/clocksource0/current_clocksource", "xen\n")
    write(root, "/sys/devices/system/clocksource/clocksource0/available_clocksource",
          "xen tsc hpet\n")
    for name in ("tiny-host", "tools-host", "ovs-switch", "of-controller"):
        install_template(root, name)
    install_template(root, "debian", kernel="/var/lib/selena/images/vmlinux-1",
                     ramdisk="/var/lib/selena/images/debian-initrd-1.gz",
                     disk="/var/lib/selena/images/debian-1.ext4")
    xenconsoled(root, LAB_XENCONSOLED)
    runner = Runner()
    runner.respond(["selena-tdf", "get", "0"], 0, "1\n")
    runner.respond(["selena-tdf", "host"], 0, "nr_cpus : 2\nfree_memory : 2400\n"
                   "xen_major : 4\nxen_minor : 17\nxen_extra : .5\n")
    runner.respond(["xl", "info"], 0, xl_info())
    runner.respond(["ovs-vsctl"], 0, "c0ffee\n    ovs_version: \"3.1.0\"\n")
    runner.respond(["ip", "-V"], 0, "ip utility, iproute2-6.1.0\n")
    probe = HostProbe(runner=runner, root=root, results_dir=tmp_path / "results",
                      disk_usage=lambda p: (100 << 30, 50 << 30, 50 << 30), environ={})
    return probe, runner


def fresh(probe: HostProbe, *, runner: Runner | None = None, bridge: str | None = None,
          environ: dict[str, str] | None = None) -> HostProbe:
    """The same host, with no cached command results."""
    return dataclasses.replace(probe, _cache={}, runner=runner or probe.runner,
                               bridge=bridge or probe.bridge,
                               environ=probe.environ if environ is None else environ)


def by_name(checks):
    return {c.name: c for c in checks}


# -- the whole doctor ---------------------------------------------------------------


def test_the_labs_dom0_passes_with_warnings_about_fidelity_only(lab):
    probe, _ = lab
    checks = run_checks(probe)
    found = by_name(checks)
    assert doctor.passed(checks), [c.line() for c in checks if c.status is Status.FAIL]
    # What the emulated lab lacks costs fidelity: warned, with advice.
    warned = {c.name for c in checks if c.status is Status.WARN}
    assert warned == {"dom0-vcpus", "cstates", "tsc"}
    assert all(found[n].advice for n in warned)
    assert found["tdf-domctl"].status is Status.OK
    assert "not built (optional): qjump-host" in found["templates"].detail
    assert found["agent-protocol"].status is Status.SKIP
    lines = report_lines(checks)
    assert lines[-1].startswith(f"{len(checks) - 4} ok, 3 warn, 0 failed, 1 skipped")
    assert "a run would work" in lines[-1]
    assert len(lines) == len(checks) + 1


def test_a_machine_without_xen_fails_dom0_once_and_skips_what_depends_on_it(tmp_path):
    root = tmp_path / "root"
    write(root, "/proc/cpuinfo", "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n")
    runner = Runner(missing=["selena-tdf", "xl", "ovs-vsctl"])
    probe = HostProbe(runner=runner, root=root, results_dir=tmp_path,
                      disk_usage=lambda p: (1, 1, 10 << 30), environ={})
    checks = run_checks(probe)
    found = by_name(checks)
    assert found["dom0"].status is Status.FAIL
    assert "not a Xen Dom0 (no /proc/xen)" in found["dom0"].detail
    assert all(found[n].status is Status.SKIP and found[n].detail == "not a Xen Dom0"
               for n in DOM0_DEPENDENT)
    # No Xen command was even tried.
    assert not [c for c in runner.calls if c[0] in ("selena-tdf", "xl")]
    lines = report_lines(checks)
    skipped = [line for line in lines if "not a Xen Dom0" in line and line.startswith("skip")]
    assert skipped == ["skip " + ", ".join(DOM0_DEPENDENT) + ": not a Xen Dom0"]
    assert found["openvswitch"].status is Status.FAIL
    assert found["tsc"].status is Status.OK
    assert not doctor.passed(checks)


@pytest.mark.skipif(NOT_DOM0_HERE, reason="this machine is a Xen Dom0")
def test_the_real_doctor_on_this_machine_exits_1_with_one_clear_line_each(capsys):
    rc = main(["host", "doctor"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "Traceback" not in out + err
    lines = out.splitlines()
    assert lines[0].startswith("FAIL dom0: this machine is not a Xen Dom0 (no /proc/xen)")
    assert "skip " + ", ".join(DOM0_DEPENDENT) + ": not a Xen Dom0" in lines
    for line in lines[:-1]:
        assert line.split(" ", 1)[0] in ("ok", "warn", "FAIL", "skip"), line
    assert all("(fix: " in line for line in lines if line.startswith("FAIL"))
    assert "a run would not work" in lines[-1]


@pytest.mark.skipif(NOT_DOM0_HERE, reason="this machine is a Xen Dom0")
def test_json_for_scripts_parses_and_matches_the_checks(capsys):
    rc = main(["host", "doctor", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["ok"] is False
    expected = run_checks(HostProbe())
    assert [(c["name"], c["status"]) for c in data["checks"]] == \
        [(c.name, c.status.value) for c in expected]
    dom0 = data["checks"][0]
    assert dom0["status"] == "fail" and dom0["fix"] and "advice" in dom0
    assert data["summary"] == doctor.summary(expected)


def test_the_cli_exits_0_when_only_warnings(lab, capsys, monkeypatch):
    probe, _ = lab
    monkeypatch.setattr(cli_host, "HostProbe", lambda **kwargs: fresh(probe))
    assert main(["host", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "warn tsc: " in out and "(advice: " in out and "FAIL" not in out
    assert main(["host", "doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True
    assert {c["name"]: c["status"] for c in data["checks"]}["cstates"] == "warn"


def test_the_cli_names_the_failures_of_a_stock_hypervisor(lab, capsys, monkeypatch):
    probe, runner = lab
    runner.respond(["selena-tdf", "get", "0"], 1, "", STOCK)
    monkeypatch.setattr(cli_host, "HostProbe", lambda **kwargs: fresh(probe))
    assert main(["host", "doctor"]) == 1
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith("FAIL")]
    assert line.startswith("FAIL tdf-domctl: stock hypervisor")
    assert f"(fix: {PATCHED_XEN_FIX})" in line


# -- Dom0 --------------------------------------------------------------------------


def test_dom0_ok_from_control_d(lab):
    check = check_dom0(lab[0])
    assert check.status is Status.OK and "control_d" in check.detail


def test_a_domu_is_not_dom0(lab):
    probe, _ = lab
    write(probe.root, "/proc/xen/capabilities", "\n")
    check = check_dom0(probe)
    assert check.status is Status.FAIL and "not Dom0" in check.detail


def test_xenfs_not_mounted(lab):
    probe, _ = lab
    (probe.root / "proc/xen/capabilities").unlink()
    check = check_dom0(probe)
    assert check.status is Status.FAIL and check.fix == "mount -t xenfs xenfs /proc/xen"


def test_under_xen_without_proc_xen_xl_info_decides(lab):
    probe, runner = lab
    (probe.root / "proc/xen/capabilities").unlink()
    (probe.root / "proc/xen").rmdir()
    write(probe.root, "/sys/hypervisor/type", "xen\n")
    assert check_dom0(probe).status is Status.OK
    runner.respond(["xl", "info"], 1, "", "xencall: error: Could not obtain handle\n")
    check = check_dom0(fresh(probe))
    assert check.status is Status.FAIL and "modprobe xenfs" in (check.fix or "")


# -- the TDF domctl and the Xen version ------------------------------------------------


def test_tdf_domctl_answers(lab):
    check = check_tdf_domctl(lab[0])
    assert check.status is Status.OK and "TDF 1" in check.detail


def test_stock_hypervisor_is_named_as_such(lab):
    probe, runner = lab
    runner.respond(["selena-tdf", "get", "0"], 1, "", STOCK)
    check = check_tdf_domctl(probe)
    assert check.status is Status.FAIL
    assert check.detail.startswith("stock hypervisor: selena-tdf is installed but Xen refuses")
    assert check.fix == PATCHED_XEN_FIX


def test_tdf_tool_missing(lab):
    probe, _ = lab
    check = check_tdf_domctl(fresh(probe, runner=Runner(missing=["selena-tdf"])))
    assert check.status is Status.FAIL and check.fix == TDF_TOOL_FIX
    assert "not installed" in check.detail


def test_tdf_tool_without_root_fails(lab):
    probe, runner = lab
    runner.respond(["selena-tdf", "get", "0"], 1, "", "selena-tdf: cannot open the Xen control "
                   "interface (not in Dom0 of a Xen host, or not root)\n")
    check = check_tdf_domctl(probe)
    assert check.status is Status.FAIL and "cannot reach Xen" in check.detail
    assert check.fix == "run selena as root in Dom0 (sudo)"


@pytest.mark.parametrize("stderr, words", [
    ("selena-tdf: not privileged to read the time of domain 0 (run as root in Dom0; ...)\n",
     "built for another Xen release"),
    ("selena-tdf: domain 0: Bad address\n", "get 0 failed: selena-tdf: domain 0: Bad address"),
])
def test_tdf_tool_refusals_in_doubt_warn(lab, stderr, words):
    probe, runner = lab
    runner.respond(["selena-tdf", "get", "0"], 1, "", stderr)
    check = check_tdf_domctl(probe)
    assert check.status is Status.WARN and words in check.detail
    assert "make -C xen-patches" in (check.advice or "")
    assert preflight(fresh(probe))[1] == check      # a doubt never stops a deploy


def test_xen_target_is_the_pinned_source_and_the_fallback_agrees():
    assert xen_target(ROOT) == XEN_TARGET_FALLBACK
    assert xen_target(Path("/nonexistent")) == XEN_TARGET_FALLBACK
    assert (ROOT / "xen-patches" / "SOURCE").read_text().count(f"version {XEN_TARGET_FALLBACK}")


def test_xen_version_matches(lab):
    check = check_xen_version(lab[0])
    assert check.status is Status.OK and check.detail.startswith("Xen 4.17.5, tools 4.17")


def test_xen_version_of_another_release_fails(lab):
    probe, runner = lab
    runner.respond(["selena-tdf", "host"], 0, "xen_major : 4\nxen_minor : 19\nxen_extra : .1\n")
    check = check_xen_version(probe)
    assert check.status is Status.FAIL and "Xen 4.19.1 runs" in check.detail


def test_tools_of_another_release_fail(lab):
    probe, _ = lab
    (probe.root / "usr/lib/xen-4.17").rename(probe.root / "usr/lib/xen-4.16")
    check = check_xen_version(probe)
    assert check.status is Status.FAIL and check.fix == "apt-get install xen-utils-4.17"


def test_xen_version_from_sysfs_or_unknown(lab):
    probe, runner = lab
    runner.respond(["selena-tdf", "host"], 1)
    runner.respond(["xl", "info"], 1)
    assert check_xen_version(probe).status is Status.WARN
    for part, value in (("major", "4"), ("minor", "17"), ("extra", ".5")):
        write(probe.root, f"/sys/hypervisor/version/{part}", value + "\n")
    check = check_xen_version(fresh(probe))
    assert check.status is Status.OK and "Xen 4.17.5" in check.detail


# -- xenstored, bridges, modules ----------------------------------------------------------


def test_xenstored(lab):
    probe, _ = lab
    assert check_xenstored(probe).detail == "socket /run/xenstored/socket"
    (probe.root / "run/xenstored/socket").unlink()
    check = check_xenstored(probe)
    assert check.status is Status.FAIL and "systemctl start xen" in (check.fix or "")
    write(probe.root, "/tmp/xs.sock")
    assert check_xenstored(fresh(probe, environ={"SELENA_XENSTORE_SOCKET": "/tmp/xs.sock"})
                           ).status is Status.OK


def test_openvswitch(lab):
    probe, runner = lab
    assert check_bridge_tool(probe).status is Status.OK
    runner.respond(["ovs-vsctl"], 1, "", "ovs-vsctl: unix:/var/run/openvswitch/db.sock: "
                   "database connection failed (No such file or directory)\n")
    check = check_bridge_tool(fresh(probe))
    assert check.status is Status.FAIL and "database connection failed" in check.detail
    assert check.fix == "systemctl start openvswitch-switch"
    check = check_bridge_tool(fresh(probe, runner=Runner(missing=["ovs-vsctl"])))
    assert check.status is Status.FAIL and check.fix == "apt-get install openvswitch-switch"


def test_a_command_that_hangs_is_a_doubt(lab):
    probe, _ = lab

    class Hanging(Runner):
        def run(self, argv, **kwargs):
            if argv[0] == "ovs-vsctl":
                raise CommandTimeout(list(argv), None, "", "timed out after 60.0 s")
            return super().run(argv, **kwargs)

    runner = Hanging()
    runner.respond(["selena-tdf", "get", "0"], 0, "1\n")
    check = check_bridge_tool(fresh(probe, runner=runner))
    assert check.status is Status.WARN
    assert check.detail == "ovs-vsctl: did not answer within 60 s"


def test_openvswitch_without_xens_vif_script_warns(lab):
    probe, _ = lab
    (probe.root / "etc/xen/scripts/vif-openvswitch").unlink()
    check = check_bridge_tool(probe)
    assert check.status is Status.WARN and "vif-openvswitch" in check.detail


def test_linux_bridges(lab):
    probe, _ = lab
    assert check_bridge_tool(fresh(probe, bridge="linux")).name == "linux-bridge"
    assert check_bridge_tool(fresh(probe, bridge="linux")).status is Status.OK
    check = check_bridge_tool(fresh(probe, bridge="linux", runner=Runner(missing=["ip"])))
    assert check.status is Status.FAIL and check.fix == "apt-get install iproute2"


def test_shaping_modules_are_what_shaping_emits():
    topo = Topology("m", tdf=2)
    h1, h2 = topo.add_host("h1"), topo.add_host("h2")
    links = [topo.add_link(h1, h2, rate="10Mbit", delay="1ms", jitter="1ms", loss="1%",
                           queue=50, prio=True),
             topo.add_link(h1, h2, delay="1ms"),
             topo.add_link(h1, h2, rate="1Mbit")]
    kinds = set()
    for link in links:
        for argv in shaping_commands("v0", link, 2):
            if argv[1] == "qdisc":
                kinds.add("sch_" + next(a for a in argv if a in ("htb", "netem", "prio", "tbf",
                                                                  "fq_codel", "sfq")))
            elif argv[1] == "filter":
                kinds.add("cls_" + next(a for a in argv if a in ("u32", "matchall", "flower",
                                                                  "bpf", "fw")))
    assert kinds == set(SHAPING_MODULES)


def test_modules_loaded_loadable_builtin(lab):
    probe, _ = lab
    write(probe.root, "/proc/modules", "sch_htb 16384 0 - Live 0x0\n")
    write(probe.root, f"/lib/modules/{RELEASE}/modules.builtin", "kernel/net/sched/cls_u32.ko\n")
    check = check_modules(probe, "shaping-modules", SHAPING_MODULES, "shaping")
    assert check.status is Status.OK
    assert check.detail == "sch_htb, sch_netem (loadable), sch_prio (loadable), cls_u32 (built-in)"


def test_a_module_the_kernel_lacks_fails(lab):
    probe, _ = lab
    write(probe.root, "/proc/modules", "")
    write(probe.root, f"/lib/modules/{RELEASE}/modules.dep", "kernel/x/sch_htb.ko.xz:\n")
    check = check_modules(probe, "shaping-modules", SHAPING_MODULES, "shaping")
    assert check.status is Status.FAIL
    assert check.detail.startswith(f"sch_netem, sch_prio, cls_u32 not in kernel {RELEASE}")
    assert f"linux-image-{RELEASE}" in (check.fix or "")
    loop = check_modules(probe, "loop-module", ("loop",), "disks", required=False)
    assert loop.status is Status.WARN


def test_modules_that_cannot_be_told_warn(lab):
    probe, runner = lab
    write(probe.root, "/proc/modules", "")
    (probe.root / f"lib/modules/{RELEASE}/modules.builtin").unlink()
    runner.respond(["modinfo"], 1, "", "modinfo: ERROR: Module sch_netem not found.\n")
    runner.respond(["modinfo", "-F", "filename", "sch_htb"], 0, "/lib/modules/x/sch_htb.ko\n")
    check = check_modules(probe, "shaping-modules", SHAPING_MODULES, "shaping")
    assert check.status is Status.WARN
    assert "cannot tell" in check.detail and "sch_htb" not in check.detail
    assert check.advice == "modprobe sch_netem sch_prio cls_u32"


# -- templates and the agent protocol ---------------------------------------------------------


def test_known_templates_are_the_trees():
    shipped = {p.parent.name for p in (ROOT / "guest-templates").glob("*/template.yaml")}
    assert shipped == set(REQUIRED_TEMPLATES) | set(OPTIONAL_TEMPLATES)


def test_templates_ok_lists_what_is_not_built(lab):
    check = check_templates(lab[0])
    assert check.status is Status.OK
    assert check.detail == ("debian, of-controller, ovs-switch, tiny-host, tools-host installed; "
                            "not built (optional): qjump-host")


def test_required_template_missing_or_broken_fails(lab):
    probe, _ = lab
    tiny = probe.root / str(TEMPLATE_ROOT).lstrip("/") / "tiny-host"
    (tiny / "initrd.gz").unlink()
    check = check_templates(probe)
    assert check.status is Status.FAIL and check.detail == "tiny-host: missing initrd.gz"
    for f in tiny.iterdir():
        f.unlink()
    check = check_templates(probe)
    assert check.status is Status.FAIL and check.detail == "tiny-host not installed"
    # A plan that uses no tiny-host guest does not need it.
    assert check_templates(probe, {"tools-host"}).status is Status.OK


def test_templates_a_plan_needs(lab):
    probe, _ = lab
    assert check_templates(probe, {"tools-host", "debian"}).status is Status.OK
    check = check_templates(probe, {"tools-host", "qjump-host"})
    assert check.status is Status.FAIL and check.detail == "qjump-host not installed"


def test_an_optional_template_broken_warns(lab):
    probe, _ = lab
    (probe.root / "var/lib/selena/images/debian-1.ext4").unlink()
    check = check_templates(probe)
    assert check.status is Status.WARN
    assert "debian: missing /var/lib/selena/images/debian-1.ext4" in check.detail


def test_no_template_root_fails(tmp_path):
    probe = HostProbe(runner=Runner(), root=tmp_path)
    check = check_templates(probe)
    assert check.status is Status.FAIL and str(TEMPLATE_ROOT) in check.detail


def test_template_of_another_selena_warns(lab):
    probe, _ = lab
    install_template(probe.root, "tools-host", selena_version="0.0.1")
    check = check_templates(probe)
    assert check.status is Status.WARN and "tools-host built by selena 0.0.1" in check.detail


def test_agent_protocol(lab):
    probe, _ = lab
    assert check_agent_protocol(probe).status is Status.SKIP
    install_template(probe.root, "tiny-host", protocol=PROTOCOL_VERSION)
    assert check_agent_protocol(probe).status is Status.OK
    install_template(probe.root, "ovs-switch", protocol=PROTOCOL_VERSION + 1)
    check = check_agent_protocol(probe)
    assert check.status is Status.FAIL
    assert f"ovs-switch speaks {PROTOCOL_VERSION + 1}" in check.detail


# -- resources and fidelity -------------------------------------------------------------------


@pytest.mark.parametrize("cpus, free, status", [
    ("2", "2400", Status.OK), ("2", "300", Status.WARN), ("1", "2400", Status.WARN),
    ("2", "16", Status.FAIL)])
def test_resources(lab, cpus, free, status):
    probe, runner = lab
    runner.respond(["selena-tdf", "host"], 0, f"nr_cpus : {cpus}\nfree_memory : {free}\n")
    check = check_resources(probe)
    assert check.status is status and check.detail.startswith(f"{cpus} CPUs, {free} MB free")


def test_resources_unknown_is_skipped(lab):
    probe, runner = lab
    runner.respond(["selena-tdf", "host"], 1)
    runner.respond(["xl", "info"], 1)
    assert check_resources(probe).status is Status.SKIP


def test_dom0_vcpus(lab):
    probe, runner = lab
    check = check_dom0_vcpus(probe)
    assert check.status is Status.WARN and check.detail.startswith("Dom0 has 2 vCPUs")
    assert "dom0_max_vcpus=2 dom0_vcpus_pin" in (check.advice or "")
    runner.respond(["xl", "info"], 0,
                   xl_info(xen_commandline=LAB_XEN_CMDLINE + " dom0_max_vcpus=2 dom0_vcpus_pin"))
    assert check_dom0_vcpus(fresh(probe)).status is Status.OK
    runner.respond(["xl", "info"], 1)
    assert "unknown" in check_dom0_vcpus(fresh(probe)).detail


def test_scheduler(lab):
    probe, runner = lab
    assert check_scheduler(probe).status is Status.OK
    runner.respond(["xl", "info"], 0, xl_info(xen_scheduler="credit"))
    check = check_scheduler(fresh(probe))
    assert check.status is Status.WARN and "sched=credit2" in (check.advice or "")
    runner.respond(["xl", "info"], 1)
    assert check_scheduler(fresh(probe)).detail.startswith("unknown")


def test_cstates(lab):
    probe, runner = lab
    assert check_cstates(probe).status is Status.WARN
    runner.respond(["xl", "info"], 0, xl_info(xen_commandline="max_cstate=1 dom0_vcpus_pin"))
    assert check_cstates(fresh(probe)).status is Status.OK
    runner.respond(["xl", "info"], 0, xl_info(xen_commandline="max_cstate=3"))
    assert check_cstates(fresh(probe)).status is Status.WARN


def test_console_log_is_checked_on_the_running_xenconsoled(lab):
    probe, _ = lab
    check = doctor.check_console_log(probe)
    assert check.status is Status.OK, check.line()
    assert check.detail == ("xenconsoled logs guests' consoles (--log=guest) into "
                            "/var/log/xen/console")
    # Debian's default: no guest logs; the advice is docs/host.md's line.
    xenconsoled(probe.root, DEBIAN_XENCONSOLED)
    check = doctor.check_console_log(probe)
    assert check.status is Status.WARN and "keeps no guest console logs" in check.detail
    assert check.advice is not None and 'XENCONSOLED_ARGS="--log=guest' in check.advice
    xenconsoled(probe.root, ("xenconsoled", "--log", "all", "--log-dir", "/srv/consoles"))
    check = doctor.check_console_log(probe)
    assert check.status is Status.WARN and "into /srv/consoles" in check.detail
    xenconsoled(probe.root, ("xenconsoled", "--log=all", "--log=none"))
    assert doctor.check_console_log(probe).status is Status.WARN        # the last wins
    xenconsoled(probe.root, ("xenconsoled", "--log", "all"))
    assert doctor.check_console_log(probe).status is Status.OK
    # Another process's name with the same arguments is not xenconsoled.
    write(probe.root, "/proc/412/comm", "xenstored\n")
    check = doctor.check_console_log(probe)
    assert check.status is Status.WARN and "not running" in check.detail


def test_clocksource(lab):
    probe, _ = lab
    assert check_clocksource(probe).status is Status.OK
    path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
    write(probe.root, path, "hpet\n")
    check = check_clocksource(probe)
    assert check.status is Status.WARN and check.advice is not None
    assert check.advice.startswith("echo xen > ")
    (probe.root / path.lstrip("/")).unlink()
    assert check_clocksource(probe).detail.startswith("unknown")


def test_tsc_from_xens_hw_caps(lab):
    probe, runner = lab
    check = check_tsc(probe, dom0=True)
    assert check.status is Status.WARN and check.detail.startswith("not invariant (Xen's")
    runner.respond(["xl", "info"], 0, xl_info(hw_caps=HW_CAPS_ITSC))
    assert check_tsc(fresh(probe), dom0=True).status is Status.OK


def test_tsc_unknown_in_a_pv_dom0_without_hw_caps(lab):
    probe, runner = lab
    runner.respond(["xl", "info"], 1)
    check = check_tsc(probe, dom0=True)
    assert check.status is Status.WARN and check.detail.startswith("unknown")


def test_tsc_from_cpu_flags_off_xen(tmp_path):
    probe = HostProbe(runner=Runner(), root=tmp_path)
    write(tmp_path, "/proc/cpuinfo", "flags\t\t: fpu tsc constant_tsc nonstop_tsc\n")
    assert check_tsc(probe, dom0=False).status is Status.OK
    write(tmp_path, "/proc/cpuinfo", "flags\t\t: fpu tsc constant_tsc\n")
    check = check_tsc(probe, dom0=False)
    assert check.status is Status.WARN and check.detail.startswith("not invariant")


@pytest.mark.parametrize("free, status", [(5 << 30, Status.OK), (500 << 20, Status.WARN),
                                          (10 << 20, Status.FAIL)])
def test_disk(tmp_path, free, status):
    asked: list[Path] = []

    def usage(path: Path) -> tuple[int, int, int]:
        asked.append(path)
        return (free * 2, free, free)

    # The results directory need not exist yet: its nearest parent is measured.
    probe = HostProbe(runner=Runner(), root=tmp_path, results_dir=tmp_path / "a" / "b",
                      disk_usage=usage)
    check = check_disk(probe)
    assert check.status is status and asked == [tmp_path]


@pytest.mark.parametrize("caps, status, words", [
    (LAB_VIRT_CAPS, Status.OK, "pv, pvh, hvm (virt_caps: pv hvm shadow)"),
    ("pv hvm hvm_directio pv_directio hap shadow", Status.OK, "pv, pvh"),
    ("pv pv_directio", Status.WARN, "PVH nodes (virt='pvh') would be refused"),
    (None, Status.SKIP, "xl info gave no virt_caps"),
])
def test_doctor_says_which_guest_types_xen_runs(lab, caps, status, words):
    probe, runner = lab
    info = xl_info()
    if caps is None:
        info = "".join(line + "\n" for line in info.splitlines() if "virt_caps" not in line)
    else:
        info = xl_info(virt_caps=caps)
    runner.respond(["xl", "info"], 0, info)
    check = by_name(run_checks(probe))["guest-types"]
    assert check.status is status and words in check.detail
    assert (check.advice or "").startswith("enable VT-x") == (status is Status.WARN)


# -- preflight -----------------------------------------------------------------------------


def test_preflight_passes_on_the_labs_dom0(lab, caplog):
    probe, runner = lab
    with caplog.at_level(logging.WARNING, logger="selena.host.doctor"):
        checks = preflight(probe, {"tiny-host", "ovs-switch"})
    assert [c.name for c in checks] == ["dom0", "tdf-domctl", "xenstored", "openvswitch",
                                        "templates"]
    assert all(c.status is Status.OK for c in checks) and not caplog.records
    # Only what a deploy needs ran: no xl info (slow under emulation).
    assert ("xl", "info") not in runner.calls


def test_preflight_of_pvh_nodes_asks_xen_for_hvm(lab):
    probe, runner = lab
    checks = preflight(probe, {"tiny-host"}, guest_types={"pv", "pvh"})
    assert by_name(checks)["guest-types"].status is Status.OK
    assert ("xl", "info") in runner.calls


def test_preflight_refuses_pvh_nodes_on_a_xen_without_hvm(lab):
    probe, runner = lab
    runner.respond(["xl", "info"], 0, xl_info(virt_caps="pv"))
    with pytest.raises(HostNotReady) as exc:
        preflight(probe, {"tiny-host"}, guest_types={"pvh"})
    message = str(exc.value)
    assert "\n" not in message and exc.value.check == "guest-types"
    assert message.startswith("host not ready: guest-types: pv (virt_caps: pv): the plan "
                              "has pvh nodes, which this Xen cannot run (fix: enable VT-x")
    # PV nodes alone need nothing more.
    assert preflight(fresh(probe), {"tiny-host"}, guest_types={"pv"})[-1].name == "templates"


def test_preflight_of_hvm_nodes_needs_the_device_model(lab):
    probe, _ = lab
    (probe.root / DEVICE_MODEL.lstrip("/")).unlink()
    with pytest.raises(HostNotReady) as exc:
        preflight(probe, {"tiny-host"}, guest_types={"pv", "hvm"})
    assert str(exc.value) == (f"host not ready: device-model: no {DEVICE_MODEL}: HVM nodes "
                              "(virt='hvm') cannot start (fix: apt-get install qemu-system-xen, "
                              "or make the nodes PVH (add_host(..., virt='pvh')))")
    assert exc.value.check == "device-model"
    # The doctor only warns: no plan needs it.
    assert by_name(run_checks(fresh(probe)))["device-model"].status is Status.WARN
    write(probe.root, DEVICE_MODEL, "")
    checks = preflight(fresh(probe), {"tiny-host"}, guest_types={"pv", "hvm"})
    assert by_name(checks)["device-model"].status is Status.OK
    # PVH nodes need none.
    assert "device-model" not in by_name(preflight(fresh(probe), {"tiny-host"},
                                                   guest_types={"pvh"}))


def test_preflight_logs_a_doubt_and_goes_on(lab, caplog):
    probe, _ = lab
    (probe.root / "etc/xen/scripts/vif-openvswitch").unlink()
    with caplog.at_level(logging.WARNING, logger="selena.host.doctor"):
        checks = preflight(probe)
    assert by_name(checks)["openvswitch"].status is Status.WARN
    assert [r.getMessage()[:16] for r in caplog.records] == ["warn openvswitch"]


def test_preflight_on_a_machine_without_xen_says_so_in_one_line(tmp_path):
    with pytest.raises(HostNotReady) as exc:
        preflight(HostProbe(runner=Runner(), root=tmp_path))
    assert str(exc.value) == NOT_DOM0_MESSAGE
    assert "\n" not in str(exc.value) and exc.value.check == "dom0"


@pytest.mark.skipif(NOT_DOM0_HERE, reason="this machine is a Xen Dom0")
def test_preflight_for_runner_on_this_machine():
    runner = Runner()
    with pytest.raises(HostNotReady, match="not a Xen Dom0"):
        preflight_for_runner(runner, "linux", {"tiny-host"})
    assert runner.calls == []


@pytest.mark.parametrize("change, check, words", [
    ("stock", "tdf-domctl", "stock hypervisor"),
    ("xenstored", "xenstored", "no xenstored socket"),
    ("ovs", "openvswitch", "ovs-vsctl is not installed"),
    ("template", "templates", "qjump-host not installed"),
])
def test_preflight_raises_one_line_with_the_fix(lab, change, check, words):
    probe, runner = lab
    templates = {"tiny-host"}
    if change == "stock":
        runner.respond(["selena-tdf", "get", "0"], 1, "", STOCK)
    elif change == "xenstored":
        (probe.root / "run/xenstored/socket").unlink()
    elif change == "ovs":
        probe = fresh(probe, runner=Runner(missing=["ovs-vsctl"]))
        probe.runner.respond(["selena-tdf", "get", "0"], 0, "1\n")
    else:
        templates = {"tiny-host", "qjump-host"}
    with pytest.raises(HostNotReady) as exc:
        preflight(probe, templates)
    message = str(exc.value)
    assert "\n" not in message and exc.value.check == check
    assert message.startswith(f"host not ready: {check}: ") and words in message
    assert "(fix: " in message


def test_preflight_with_linux_bridges_needs_no_ovs(lab):
    probe, _ = lab
    probe = fresh(probe, bridge="linux", runner=Runner(missing=["ovs-vsctl"]))
    probe.runner.respond(["selena-tdf", "get", "0"], 0, "1\n")
    checks = preflight(probe)
    assert [c.name for c in checks][-1] == "linux-bridge"


def test_preflight_in_a_domu(lab):
    probe, _ = lab
    write(probe.root, "/proc/xen/capabilities", "")
    with pytest.raises(HostNotReady) as exc:
        preflight(probe)
    assert str(exc.value).startswith("host not ready: dom0: a Xen guest, not Dom0")
