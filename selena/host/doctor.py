"""Is this host ready for a run? Every check a deploy depends on, each with a
one-line verdict and, when it fails, the command that fixes it.

A check is a small function over a HostProbe, which runs commands through
the Runner (a FakeRunner from tests/support in tests) and reads files under an injectable root
(a fake /proc and /sys tree in tests). Statuses:

- ok:   fine;
- warn: a run works but loses fidelity (no invariant TSC, Dom0 not pinned,
        deep C-states, not credit2) or the doctor cannot tell: advice given;
- fail: a run would not work: the fix given;
- skip: the check cannot apply (e.g. no Xen at all): said once, not a cascade.

`preflight` runs only what a deploy truly needs and raises HostNotReady
with one line; it refuses only on certainty, so it never stops a run on the
lab's Dom0 (patched Xen, oxenstored, OVS, templates under TEMPLATE_ROOT).
"""

from __future__ import annotations

import enum
import logging
import os
import re
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from selena.control.protocol import PROTOCOL_VERSION
from selena.control.xenstore import SOCKET_PATHS
from selena.errors import CommandError, CommandTimeout, HostNotReady
from selena.paths import CONSOLE_LOG_DIR, project_root
from selena.plan import TEMPLATE_ROOT
from selena.runner import CommandResult, Runner

log = logging.getLogger(__name__)

# The kernel modules Dom0 needs, by purpose: one list the lab's Dom0 image
# (selena/lab/build.py DOM0_MODULES) can be built from. SHAPING_MODULES are
# exactly the qdiscs and classifiers selena/shaping emits (a test renders
# every kind of link and compares).
SHAPING_MODULES = ("sch_htb", "sch_netem", "sch_prio", "cls_u32")
BRIDGE_MODULES = {"ovs": ("openvswitch",), "linux": ("bridge",)}
XEN_BACKEND_MODULES = ("xen-evtchn", "xen-gntdev", "xen-privcmd", "xen-netback", "xen-blkback")
# Disk-image templates (debian and its variants) reach guests as loop devices.
DISK_MODULES = ("loop",)

# The templates this tree ships (guest-templates/*/template.yaml); the ones
# every default topology uses are required, the others only listed when absent.
REQUIRED_TEMPLATES = ("tiny-host",)
OPTIONAL_TEMPLATES = ("tools-host", "ovs-switch", "of-controller", "debian", "qjump-host")

# The Xen release selena's patch series targets (xen-patches/SOURCE); read
# from the source tree when there is one, this otherwise (an installed Dom0).
XEN_TARGET_FALLBACK = "4.17.5"
FREE_MEMORY_FAIL_MB = 32      # not even one tiny-host guest
FREE_MEMORY_WARN_MB = 512
DISK_WARN_BYTES = 1 << 30
DISK_FAIL_BYTES = 64 << 20
COMMAND_TIMEOUT_S = 60.0
TIMED_OUT = -1      # returncode of a command that did not finish in time

# What selena-tdf prints (xen-patches/tool/selena-tdf.c).
TDF_NOT_PATCHED = "the hypervisor is not patched for time dilation"
TDF_NO_CONTROL = "cannot open the Xen control interface"
TDF_NOT_PRIVILEGED = "not privileged"

NOT_DOM0 = "not a Xen Dom0"
NOT_DOM0_MESSAGE = ("this machine is not a Xen Dom0 (no /proc/xen): try `selena plan FILE` to "
                    "see what a run would do, or the lab: `selena lab run -- selena run FILE`")
PATCHED_XEN_FIX = ("boot selena's patched Xen: make -C xen-patches deb, apt install "
                   "./xen-patches/build/deb/xen-hypervisor-4.17-selena_*.deb, reboot "
                   "(docs/host.md)")
TDF_TOOL_FIX = ("install selena's hypervisor package (make -C xen-patches deb; it holds "
                "/usr/sbin/selena-tdf), or make -C xen-patches && install -m 755 "
                "xen-patches/out/selena-tdf /usr/local/bin/selena-tdf")
GRUB_XEN = "GRUB_CMDLINE_XEN_DEFAULT in /etc/default/grub, then update-grub and reboot"


class Status(enum.StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Check:
    """One verdict. `fix` is the command that repairs a failure; `advice`
    what to change for a warning's lost fidelity."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    advice: str | None = None

    def line(self) -> str:
        tag = {Status.OK: "ok  ", Status.WARN: "warn", Status.FAIL: "FAIL",
               Status.SKIP: "skip"}[self.status]
        text = f"{tag} {self.name}: {self.detail}"
        if self.status is Status.FAIL and self.fix:
            text += f" (fix: {self.fix})"
        elif self.status is Status.WARN and self.advice:
            text += f" (advice: {self.advice})"
        return text

    def as_dict(self) -> dict[str, str | None]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


def ok(name: str, detail: str) -> Check:
    return Check(name, Status.OK, detail)


def warn(name: str, detail: str, advice: str | None = None) -> Check:
    return Check(name, Status.WARN, detail, advice=advice)


def fail(name: str, detail: str, fix: str | None = None) -> Check:
    return Check(name, Status.FAIL, detail, fix=fix)


def skip(name: str, detail: str) -> Check:
    return Check(name, Status.SKIP, detail)


@dataclass
class HostProbe:
    """What the checks see of the host: commands through `runner`, files under
    `root` (a fake tree in tests). Command results are cached, so `xl info`
    runs once however many checks read it."""

    runner: Runner = field(default_factory=Runner)
    root: Path = Path("/")
    results_dir: Path = Path("results")
    bridge: str = "ovs"
    template_root: Path = TEMPLATE_ROOT
    disk_usage: Callable[[Path], tuple[int, int, int]] = shutil.disk_usage
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    _cache: dict[tuple[str, ...], CommandResult | None] = field(default_factory=dict, repr=False)

    def path(self, path: str | Path) -> Path:
        """An absolute host path, under the probe's root."""
        return self.root / str(path).lstrip("/")

    def read(self, path: str | Path) -> str | None:
        try:
            return self.path(path).read_text(errors="replace")
        except OSError:
            return None

    def exists(self, path: str | Path) -> bool:
        return self.path(path).exists()

    def run(self, *argv: str) -> CommandResult | None:
        """The command's result whatever its status (TIMED_OUT when it did
        not finish); None when it cannot be started (not installed)."""
        key = tuple(argv)
        if key not in self._cache:
            try:
                self._cache[key] = self.runner.run(list(argv), check=False,
                                                   timeout=COMMAND_TIMEOUT_S)
            except CommandTimeout as exc:
                log.debug("%s", exc)
                self._cache[key] = CommandResult(key, TIMED_OUT, "", f"{key[0]}: did not "
                                                 f"answer within {COMMAND_TIMEOUT_S:g} s",
                                                 COMMAND_TIMEOUT_S)
            except CommandError as exc:
                log.debug("%s", exc)
                self._cache[key] = None
        return self._cache[key]

    def fields(self, *argv: str) -> dict[str, str] | None:
        """The `key : value` lines of `xl info` or `selena-tdf host`; None
        when the command failed."""
        result = self.run(*argv)
        if result is None or not result.ok:
            return None
        return {k.strip(): v.strip() for k, sep, v in
                (line.partition(":") for line in result.stdout.splitlines()) if sep}

    def xl_info(self) -> dict[str, str] | None:
        return self.fields("xl", "info")

    def tdf_host(self) -> dict[str, str] | None:
        return self.fields("selena-tdf", "host")


# -- Xen ---------------------------------------------------------------------


def check_dom0(probe: HostProbe) -> Check:
    name = "dom0"
    caps = probe.read("/proc/xen/capabilities")
    if caps is not None:
        if "control_d" in caps:
            return ok(name, "this is a Xen Dom0 (/proc/xen/capabilities: control_d)")
        return fail(name, "a Xen guest, not Dom0 (/proc/xen/capabilities has no control_d)",
                    "run selena in Dom0 of the Xen host")
    if probe.exists("/proc/xen"):
        # xenfs registers /proc/xen; its files appear once it is mounted.
        return fail(name, "xenfs is not mounted on /proc/xen", "mount -t xenfs xenfs /proc/xen")
    hv_type = (probe.read("/sys/hypervisor/type") or "").strip()
    if hv_type == "xen":
        result = probe.run("xl", "info")
        if result is not None and result.ok:
            return ok(name, "xl info answers (no /proc/xen: xenfs not mounted)")
        return fail(name, "running under Xen, but no /proc/xen (xenfs not loaded)",
                    "modprobe xenfs && mount -t xenfs xenfs /proc/xen")
    return fail(name, f"this machine is {NOT_DOM0} (no /proc/xen)",
                "boot it into Xen with selena's hypervisor, or use the lab: "
                "selena lab run -- selena run FILE")


def check_tdf_domctl(probe: HostProbe) -> Check:
    """`selena-tdf host` only reads physinfo, which stock Xen answers too;
    reading Dom0's TDF issues the domctl itself (allowed: Dom0 may read,
    not change, its own factor)."""
    name = "tdf-domctl"
    result = probe.run("selena-tdf", "get", "0")
    if result is None:
        return fail(name, "selena-tdf is not installed", TDF_TOOL_FIX)
    said = (result.stderr.strip() or result.stdout.strip()).splitlines()
    message = said[-1] if said else f"exit status {result.returncode}"
    if result.ok:
        return ok(name, f"the hypervisor answers XEN_DOMCTL_selena_tdf (Dom0 at TDF "
                        f"{result.stdout.strip() or '?'})")
    if TDF_NOT_PATCHED in message:
        return fail(name, "stock hypervisor: selena-tdf is installed but Xen refuses the TDF "
                          f"domctl ({message})", PATCHED_XEN_FIX)
    if TDF_NO_CONTROL in message:
        return fail(name, f"selena-tdf cannot reach Xen ({message})",
                    "run selena as root in Dom0 (sudo)")
    # Anything else is a doubt, not a certainty: warned, so that preflight
    # never refuses a host on it.
    if TDF_NOT_PRIVILEGED in message:
        # As root, Xen answers EACCES to a domctl interface version it does
        # not know (a tool built for another release), or an XSM policy does.
        return warn(name, f"Xen refused to read Dom0's TDF ({message}): selena-tdf built for "
                          "another Xen release, or an XSM policy", f"rebuild it: {TDF_TOOL_FIX}")
    return warn(name, f"selena-tdf get 0 failed: {message}", f"rebuild it: {TDF_TOOL_FIX}")


def xen_target(root: Path | None = None) -> str:
    """The Xen version selena's patch series targets, e.g. "4.17.5"."""
    source = (root or project_root()) / "xen-patches" / "SOURCE"
    try:
        text = source.read_text()
    except OSError:
        return XEN_TARGET_FALLBACK
    match = re.search(r"^version\s+(\d+\.\d+(?:\.\d+)?)", text, re.M)
    return match.group(1) if match else XEN_TARGET_FALLBACK


def hypervisor_version(probe: HostProbe) -> str | None:
    """"4.17.5" or similar: from selena-tdf host, xl info, or /sys/hypervisor."""
    for info in (probe.tdf_host(), probe.xl_info()):
        if info and "xen_major" in info and "xen_minor" in info:
            return f"{info['xen_major']}.{info['xen_minor']}{info.get('xen_extra', '')}"
    parts = [(probe.read(f"/sys/hypervisor/version/{p}") or "").strip()
             for p in ("major", "minor", "extra")]
    if parts[0] and parts[1]:
        return f"{parts[0]}.{parts[1]}{parts[2]}"
    return None


def _major_minor(version: str) -> str:
    match = re.match(r"(\d+)\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else version


def check_xen_version(probe: HostProbe) -> Check:
    name = "xen-version"
    target = xen_target()
    running = hypervisor_version(probe)
    if running is None:
        return warn(name, "cannot read the hypervisor's version (selena-tdf host, xl info and "
                          "/sys/hypervisor/version did not answer)")
    want = _major_minor(target)
    if _major_minor(running) != want:
        return fail(name, f"Xen {running} runs; selena's patch series targets Xen {target}",
                    PATCHED_XEN_FIX)
    # Debian installs each release's tools under /usr/lib/xen-X.Y.
    lib = probe.path("/usr/lib")
    tools = sorted(p.name.removeprefix("xen-") for p in lib.glob("xen-[0-9]*")) \
        if lib.is_dir() else []
    if tools and want not in tools:
        return fail(name, f"Xen {running} runs but the installed tools are for Xen "
                          f"{', '.join(tools)}", f"apt-get install xen-utils-{want}")
    shown = f", tools {want}" if tools else ""
    return ok(name, f"Xen {running}{shown} (patch series targets {target})")


def xenstore_sockets(probe: HostProbe) -> tuple[str, ...]:
    env = probe.environ.get("SELENA_XENSTORE_SOCKET")
    return (env,) if env else SOCKET_PATHS


def check_xenstored(probe: HostProbe) -> Check:
    name = "xenstored"
    sockets = xenstore_sockets(probe)
    for path in sockets:
        if probe.exists(path):
            return ok(name, f"socket {path}")
    return fail(name, f"no xenstored socket ({', '.join(sockets)})",
                "start Xen's daemons: systemctl start xen (or oxenstored)")


# -- bridges and modules ---------------------------------------------------------


def check_bridge_tool(probe: HostProbe) -> Check:
    if probe.bridge == "ovs":
        name = "openvswitch"
        # Without --retry, ovs-vsctl fails at once when ovsdb-server is down.
        result = probe.run("ovs-vsctl", "show")
        if result is None:
            return fail(name, "ovs-vsctl is not installed", "apt-get install openvswitch-switch")
        if result.returncode == TIMED_OUT:
            return warn(name, result.stderr, "check ovsdb-server and ovs-vswitchd")
        if not result.ok:
            said = result.stderr.strip().splitlines()
            return fail(name, "ovs-vsctl show failed" + (f": {said[-1]}" if said else ""),
                        "systemctl start openvswitch-switch")
        hook = "/etc/xen/scripts/vif-openvswitch"
        if not probe.exists(hook) and probe.exists("/etc/xen/scripts"):
            return warn(name, f"ovs-vsctl answers, but {hook} is missing (xl attaches vifs "
                              "with it)", "apt-get install --reinstall xen-utils-common")
        return ok(name, "ovs-vsctl show answers")
    name = "linux-bridge"
    result = probe.run("ip", "-V")
    if result is None or not result.ok:
        return fail(name, "the ip tool is missing", "apt-get install iproute2")
    return ok(name, "ip answers")


@dataclass(frozen=True)
class ModuleState:
    name: str
    state: str     # loaded, built-in, loadable, missing, unknown


def _norm(module: str) -> str:
    return module.replace("-", "_")


class Modules:
    """Which kernel modules this kernel has, from /proc/modules, /sys/module,
    modules.builtin and modules.dep (modinfo when those are absent)."""

    def __init__(self, probe: HostProbe):
        self.probe = probe
        release = (probe.read("/proc/sys/kernel/osrelease") or "").strip() or os.uname().release
        base = f"/lib/modules/{release}"
        self.release = release
        self.loaded = {_norm(line.split()[0]) for line in
                       (probe.read("/proc/modules") or "").splitlines() if line.strip()}
        builtin = probe.read(f"{base}/modules.builtin")
        dep = probe.read(f"{base}/modules.dep")
        self.builtin = self._names(builtin)
        self.available = self._names(dep)
        # Only both lists together prove a module absent (a tree without
        # modules.builtin may have it compiled in).
        self.has_tree = dep is not None and builtin is not None

    @staticmethod
    def _names(text: str | None) -> set[str]:
        names = set()
        for line in (text or "").splitlines():
            path = line.split(":", 1)[0].strip()
            if path:
                stem = path.rsplit("/", 1)[-1].split(".ko", 1)[0]
                names.add(_norm(stem))
        return names

    def state(self, module: str) -> ModuleState:
        key = _norm(module)
        if key in self.loaded or self.probe.exists(f"/sys/module/{key}"):
            return ModuleState(module, "loaded")
        if key in self.builtin:
            return ModuleState(module, "built-in")
        if self.has_tree:
            return ModuleState(module, "loadable" if key in self.available else "missing")
        result = self.probe.run("modinfo", "-F", "filename", module)
        if result is not None and result.ok and result.stdout.strip():
            return ModuleState(module, "loadable")
        return ModuleState(module, "unknown")


def check_modules(probe: HostProbe, name: str, modules: Sequence[str], purpose: str,
                  *, required: bool = True, mods: Modules | None = None) -> Check:
    mods = mods or Modules(probe)
    states = [mods.state(m) for m in modules]
    missing = [s.name for s in states if s.state == "missing"]
    unknown = [s.name for s in states if s.state == "unknown"]
    if missing:
        detail = f"{', '.join(missing)} not in kernel {mods.release}, needed for {purpose}"
        fix = (f"install the running kernel's modules: apt-get install "
               f"linux-image-{mods.release}, or a kernel with them")
        return fail(name, detail, fix) if required else warn(name, detail, fix)
    if unknown:
        return warn(name, f"cannot tell whether kernel {mods.release} has {', '.join(unknown)}, "
                          f"for {purpose} (not loaded; neither /lib/modules/{mods.release} nor "
                          "modinfo knows)",
                    f"modprobe {' '.join(unknown)}")
    shown = ", ".join(f"{s.name}" + ("" if s.state == "loaded" else f" ({s.state})")
                      for s in states)
    return ok(name, shown)


# -- templates and the agent protocol ----------------------------------------------


@dataclass(frozen=True)
class TemplateState:
    name: str
    installed: bool
    problem: str | None = None      # a file missing, a template.yaml unreadable
    protocol: int | None = None     # recorded in template.yaml (`protocol:`), if at all
    selena_version: str | None = None


def template_state(probe: HostProbe, name: str) -> TemplateState:
    """One installed template: template.yaml (or the vmlinuz + initrd.gz of
    an old install) and the files it names, which must exist."""
    tdir = probe.path(probe.template_root) / name
    spec = tdir / "template.yaml"
    if not spec.exists():
        if (tdir / "vmlinuz").exists() and (tdir / "initrd.gz").exists():
            return TemplateState(name, True)
        return TemplateState(name, False)
    try:
        data = yaml.safe_load(spec.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        return TemplateState(name, True, f"template.yaml unreadable ({exc})")
    if not isinstance(data, dict):
        return TemplateState(name, True, "template.yaml is not a mapping")
    absent = []
    for key, default in (("kernel", "vmlinuz"), ("ramdisk", "initrd.gz"), ("disk", None)):
        value = data.get(key, default)
        if value is None:
            continue
        # Absolute paths (the debian images' share) are host paths too.
        where = probe.path(value) if str(value).startswith("/") else tdir / str(value)
        if not where.exists():
            absent.append(str(value))
    protocol = data.get("protocol")
    version = data.get("selena_version")
    return TemplateState(name, True, f"missing {', '.join(absent)}" if absent else None,
                         protocol if isinstance(protocol, int) else None,
                         str(version) if version is not None else None)


def check_templates(probe: HostProbe, needed: Iterable[str] | None = None) -> Check:
    """Required templates (REQUIRED_TEMPLATES, or `needed` for a plan) must be
    installed and whole; the others are listed when absent, warned when broken."""
    name = "templates"
    root = probe.template_root
    required = tuple(sorted(set(needed))) if needed is not None else REQUIRED_TEMPLATES
    if not probe.path(root).is_dir():
        return fail(name, f"no templates installed ({root} missing)", _template_fix(root))
    installed = sorted(p.name for p in probe.path(root).iterdir() if p.is_dir())
    states = {t: template_state(probe, t) for t in {*installed, *required, *OPTIONAL_TEMPLATES}}
    absent = [t for t in required if not states[t].installed]
    broken = [t for t in required if states[t].installed and states[t].problem]
    if absent or broken:
        parts = [f"{t} not installed" for t in absent]
        parts += [f"{t}: {states[t].problem}" for t in broken]
        return fail(name, "; ".join(parts), _template_fix(root))
    version = _selena_version()
    stale = [t for t, s in sorted(states.items())
             if s.selena_version is not None and s.selena_version != version]
    other_broken = [f"{t}: {s.problem}" for t, s in sorted(states.items())
                    if s.installed and s.problem and t not in required]
    not_built = [t for t in OPTIONAL_TEMPLATES if not states[t].installed and t not in required]
    have = [t for t in sorted(states) if states[t].installed]
    detail = f"{', '.join(have)} installed"
    if not_built:
        detail += f"; not built (optional): {', '.join(not_built)}"
    if other_broken or stale:
        extra = other_broken + [f"{t} built by selena {states[t].selena_version}, this is "
                                f"{version}" for t in stale]
        return warn(name, f"{detail}; {'; '.join(extra)}",
                    "reinstall them with this selena (selena host setup) before using these "
                    "templates")
    return ok(name, detail)


def _template_fix(root: Path) -> str:
    return (f"selena host setup (from a clone, or --from a bundle of selena host export) "
            f"installs them under {root}")


def _selena_version() -> str:
    from selena import __version__
    return __version__


def check_agent_protocol(probe: HostProbe) -> Check:
    """Compared with the version a template records (`protocol:` in its
    template.yaml). Templates that record none are not judged here: the
    agent refuses a mismatch at boot (ProtocolMismatch on deploy)."""
    name = "agent-protocol"
    root = probe.path(probe.template_root)
    if not root.is_dir():
        return skip(name, "no templates installed")
    states = [template_state(probe, p.name) for p in sorted(root.iterdir()) if p.is_dir()]
    recorded = {s.name: s.protocol for s in states if s.protocol is not None}
    if not recorded:
        return skip(name, f"selena speaks protocol {PROTOCOL_VERSION}; the installed templates "
                          "do not record theirs")
    wrong = {t: v for t, v in recorded.items() if v != PROTOCOL_VERSION}
    if wrong:
        shown = ", ".join(f"{t} speaks {v}" for t, v in sorted(wrong.items()))
        return fail(name, f"selena speaks protocol {PROTOCOL_VERSION}; {shown}",
                    "reinstall the templates with this selena: selena host setup")
    return ok(name, f"protocol {PROTOCOL_VERSION} ({', '.join(sorted(recorded))})")


# -- resources and fidelity ------------------------------------------------------


def _number(info: dict[str, str] | None, key: str) -> int | None:
    value = (info or {}).get(key, "")
    return int(value) if value.isdigit() else None


def check_resources(probe: HostProbe) -> Check:
    name = "resources"
    info = probe.tdf_host() or probe.xl_info()
    cpus, free = _number(info, "nr_cpus"), _number(info, "free_memory")
    if cpus is None or free is None:
        return skip(name, "neither selena-tdf host nor xl info answered (see tdf-domctl)")
    detail = f"{cpus} CPUs, {free} MB free for guests"
    if free < FREE_MEMORY_FAIL_MB:
        return fail(name, f"{detail}: not enough for one {FREE_MEMORY_FAIL_MB} MB guest",
                    "free memory: selena clean (leftover guests), or lower Dom0's share "
                    f"(dom0_mem= on Xen's command line: {GRUB_XEN})")
    if free < FREE_MEMORY_WARN_MB or cpus < 2:
        return warn(name, f"{detail}: room for small experiments only",
                    "give guests more memory (a smaller dom0_mem=) or CPUs")
    return ok(name, detail)


def _xen_cmdline(probe: HostProbe) -> str | None:
    info = probe.xl_info()
    return None if info is None else info.get("xen_commandline", "")


def _dom0_vcpus(probe: HostProbe) -> int | None:
    text = (probe.read("/sys/devices/system/cpu/online") or "").strip()
    if not text:
        return None
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        count += int(hi) - int(lo) + 1 if hi else 1
    return count


def check_dom0_vcpus(probe: HostProbe) -> Check:
    name = "dom0-vcpus"
    cmdline = _xen_cmdline(probe)
    vcpus = _dom0_vcpus(probe)
    shown = f"Dom0 has {vcpus} vCPUs" if vcpus is not None else "Dom0's vCPUs unknown"
    advice = f"add `dom0_max_vcpus=2 dom0_vcpus_pin` to Xen's command line ({GRUB_XEN})"
    if cmdline is None:
        return warn(name, f"{shown}; xl info did not answer, so pinning is unknown", advice)
    words = cmdline.split()
    limited = any(w.startswith("dom0_max_vcpus=") for w in words)
    pinned = "dom0_vcpus_pin" in words or "dom0_vcpus_pin=1" in words
    if limited and pinned:
        return ok(name, f"{shown}, pinned (dom0_max_vcpus, dom0_vcpus_pin)")
    missing = [w for w, have in (("dom0_max_vcpus", limited), ("dom0_vcpus_pin", pinned))
               if not have]
    return warn(name, f"{shown}; no {' or '.join(missing)} on Xen's command line: Dom0 "
                      "competes with guests for CPUs", advice)


def check_scheduler(probe: HostProbe) -> Check:
    name = "scheduler"
    info = probe.xl_info()
    sched = (info or {}).get("xen_scheduler")
    if not sched:
        return warn(name, "unknown (xl info did not answer)",
                    "check `xl info | grep xen_scheduler` says credit2")
    if sched == "credit2":
        return ok(name, "credit2")
    return warn(name, f"{sched}, not credit2: selena's CPU caps and measurements assume "
                      "credit2", f"add sched=credit2 to Xen's command line ({GRUB_XEN})")


def check_cstates(probe: HostProbe) -> Check:
    name = "cstates"
    cmdline = _xen_cmdline(probe)
    advice = f"add max_cstate=1 to Xen's command line ({GRUB_XEN})"
    if cmdline is None:
        return warn(name, "unknown (xl info did not answer)", advice)
    for word in cmdline.split():
        key, _, value = word.partition("=")
        if key == "max_cstate" and value.isdigit() and int(value) <= 1:
            return ok(name, f"limited ({word})")
        if key == "cpuidle" and value in ("0", "no", "false", "off"):
            return ok(name, f"CPU idle states off ({word})")
    return warn(name, "deep C-states allowed: waking from them delays timers",
                advice)


CONSOLE_LOG_FIX = ("add XENCONSOLED_ARGS=\"--log=guest --timestamp=guest\" to /etc/default/xen, "
                   "then restart xenconsoled (systemctl restart xen), as docs/host.md says")


def _xenconsoled_args(probe: HostProbe) -> list[list[str]]:
    """The argument lists of the xenconsoled processes running (from /proc)."""
    found = []
    try:
        entries = list(probe.path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        if (probe.read(f"/proc/{entry.name}/comm") or "").strip() != "xenconsoled":
            continue
        found.append((probe.read(f"/proc/{entry.name}/cmdline") or "").split("\0")[1:])
    return found


def _option(args: list[str], name: str) -> str | None:
    """The value of xenconsoled's `--name=V` or `--name V` (it has no short
    form of --log or --log-dir); the last wins."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            value = arg.partition("=")[2]
        elif arg == f"--{name}" and i + 1 < len(args):
            value = args[i + 1]
    return value


def check_console_log(probe: HostProbe) -> Check:
    """A guest that stops answering is reported with the failure its console
    showed (an OOM kill, a panic) only when xenconsoled logs guests' consoles
    where selena reads them; Debian's xenconsoled logs none by default."""
    name = "console-log"
    running = _xenconsoled_args(probe)
    if not running:
        return warn(name, "xenconsoled is not running: no guest console, no console log",
                    "start Xen's daemons: systemctl start xen")
    args = running[0]
    logged = _option(args, "log")
    if logged not in ("guest", "all"):
        return warn(name, "xenconsoled keeps no guest console logs: a guest lost mid-run is "
                          "reported without what its console showed", CONSOLE_LOG_FIX)
    where = _option(args, "log-dir") or CONSOLE_LOG_DIR
    if where.rstrip("/") != CONSOLE_LOG_DIR:
        return warn(name, f"xenconsoled logs guests' consoles into {where}, selena reads "
                          f"{CONSOLE_LOG_DIR}",
                    f"drop --log-dir from XENCONSOLED_ARGS in /etc/default/xen (or set it to "
                    f"{CONSOLE_LOG_DIR}), then systemctl restart xen")
    return ok(name, f"xenconsoled logs guests' consoles (--log={logged}) into {where}")


def check_clocksource(probe: HostProbe) -> Check:
    name = "clocksource"
    source = (probe.read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
              or "").strip()
    if not source:
        return warn(name, "unknown (no /sys/devices/system/clocksource)")
    if source in ("xen", "tsc", "kvm-clock"):
        return ok(name, source)
    available = (probe.read("/sys/devices/system/clocksource/clocksource0/"
                            "available_clocksource") or "").split()
    better = "xen" if "xen" in available else "tsc" if "tsc" in available else None
    advice = (f"echo {better} > /sys/devices/system/clocksource/clocksource0/"
              "current_clocksource" if better else None)
    return warn(name, f"{source}: slow or coarse clock reads", advice)


def _hw_caps_itsc(info: dict[str, str] | None) -> bool | None:
    """Xen's featureset word 7 is CPUID 0x80000007 EDX, whose bit 8 is the
    invariant TSC (xen/include/public/arch-x86/cpufeatureset.h)."""
    words = (info or {}).get("hw_caps", "").split(":")
    if len(words) < 8:
        return None
    try:
        return bool(int(words[7], 16) & (1 << 8))
    except ValueError:
        return None


# A node's guest type (Node.virt) and the word of `xl info`'s virt_caps
# that Xen needs to run it: a PVH guest is an HVM container.
GUEST_TYPE_CAPS = {"pv": "pv", "pvh": "hvm", "hvm": "hvm"}
HVM_FIX = ("enable VT-x or AMD-V in the firmware (under another hypervisor: expose it to "
           "this one), or make the nodes PV (add_host(..., virt='pv'), the default)")


def offered_guest_types(info: dict[str, str] | None) -> tuple[str, ...] | None:
    """The guest types Xen runs here, from `xl info`'s virt_caps; None when
    xl gave none (an older xl, or no answer)."""
    caps = (info or {}).get("virt_caps")
    if caps is None:
        return None
    words = caps.split()
    return tuple(t for t, cap in GUEST_TYPE_CAPS.items() if cap in words)


def check_guest_types(probe: HostProbe, needed: Iterable[str] | None = None) -> Check:
    """Which node types this Xen runs. With `needed` (a plan's), a type it
    does not run fails; without, a Xen without HVM (no PVH nodes) warns."""
    name = "guest-types"
    info = probe.xl_info()
    offered = offered_guest_types(info)
    if offered is None:
        return skip(name, "xl info gave no virt_caps")
    detail = f"{', '.join(offered) or 'none'} (virt_caps: {(info or {}).get('virt_caps')})"
    missing = sorted(set(needed or ()) - set(offered))
    if missing:
        return fail(name, f"{detail}: the plan has {', '.join(missing)} nodes, which this "
                          "Xen cannot run", HVM_FIX if {"pvh", "hvm"} & set(missing) else None)
    if needed is None and "pvh" not in offered:
        return warn(name, f"{detail}: PVH nodes (virt='pvh') would be refused", HVM_FIX)
    return ok(name, detail)


# The device model HVM nodes run on: Debian's qemu-system-xen, where Debian's
# libxl looks for it.
DEVICE_MODEL = "/usr/libexec/xen-qemu-system-i386"
DEVICE_MODEL_FIX = ("apt-get install qemu-system-xen, or make the nodes PVH "
                    "(add_host(..., virt='pvh'))")


def check_device_model(probe: HostProbe, needed: bool = False) -> Check:
    """The device model HVM nodes need: a failure when a plan has HVM nodes,
    a warning otherwise."""
    name = "device-model"
    if probe.exists(DEVICE_MODEL):
        return ok(name, DEVICE_MODEL)
    detail = f"no {DEVICE_MODEL}: HVM nodes (virt='hvm') cannot start"
    return fail(name, detail, DEVICE_MODEL_FIX) if needed else \
        warn(name, detail, DEVICE_MODEL_FIX)


def check_tsc(probe: HostProbe, dom0: bool) -> Check:
    name = "tsc"
    advice = ("run on a CPU with an invariant TSC (constant_tsc nonstop_tsc) for faithful "
              "guest clocks")
    if dom0:
        itsc = _hw_caps_itsc(probe.xl_info())
        if itsc is True:
            return ok(name, "invariant (Xen's hw_caps)")
        if itsc is False:
            return warn(name, "not invariant (Xen's hw_caps): guest clocks drift more", advice)
    flags: set[str] = set()
    for line in (probe.read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    if {"constant_tsc", "nonstop_tsc"} <= flags:
        return ok(name, "invariant (constant_tsc nonstop_tsc)")
    if dom0:
        # A PV Dom0 sees CPUID as Xen filters it: missing flags prove nothing.
        return warn(name, "unknown: Dom0 does not see the CPU's TSC flags and xl info "
                          "gave no hw_caps", advice)
    return warn(name, "not invariant (no constant_tsc nonstop_tsc in /proc/cpuinfo)", advice)


def check_disk(probe: HostProbe) -> Check:
    name = "disk"
    where = probe.results_dir.resolve()
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = probe.disk_usage(where)[2]
    except OSError as exc:
        return warn(name, f"cannot read free space of {where}: {exc.strerror}")
    shown = f"{free / (1 << 30):.1f} GiB free for results under {where}"
    if free < DISK_FAIL_BYTES:
        return fail(name, f"{shown}: a results bundle may not fit",
                    f"free space on {where} or pass --out elsewhere")
    if free < DISK_WARN_BYTES:
        return warn(name, f"{shown}: a long run's captures may not fit",
                    f"free space on {where} or pass --out elsewhere")
    return ok(name, shown)


# -- all together ------------------------------------------------------------------


DOM0_DEPENDENT = ("tdf-domctl", "xen-version", "xenstored", "xen-modules", "resources",
                  "guest-types", "device-model", "dom0-vcpus", "scheduler", "cstates",
                  "console-log")


def run_checks(probe: HostProbe) -> list[Check]:
    """Every check, in order; the ones that need Xen are skipped (one reason)
    when this is not a Dom0."""
    dom0 = check_dom0(probe)
    checks = [dom0]
    is_dom0 = dom0.status is Status.OK
    mods = Modules(probe)

    def xen(fn: Callable[[], Check], name: str) -> Check:
        return fn() if is_dom0 else skip(name, NOT_DOM0)

    # Those needing Xen first, so that on a machine without it their skip is
    # one line.
    checks.append(xen(lambda: check_tdf_domctl(probe), "tdf-domctl"))
    checks.append(xen(lambda: check_xen_version(probe), "xen-version"))
    checks.append(xen(lambda: check_xenstored(probe), "xenstored"))
    checks.append(xen(lambda: check_modules(probe, "xen-modules", XEN_BACKEND_MODULES,
                                            "Xen's backends (vifs, disks)", mods=mods),
                      "xen-modules"))
    checks.append(xen(lambda: check_resources(probe), "resources"))
    checks.append(xen(lambda: check_guest_types(probe), "guest-types"))
    checks.append(xen(lambda: check_device_model(probe), "device-model"))
    checks.append(xen(lambda: check_dom0_vcpus(probe), "dom0-vcpus"))
    checks.append(xen(lambda: check_scheduler(probe), "scheduler"))
    checks.append(xen(lambda: check_cstates(probe), "cstates"))
    checks.append(xen(lambda: check_console_log(probe), "console-log"))
    checks.append(check_bridge_tool(probe))
    checks.append(check_modules(probe, "shaping-modules", SHAPING_MODULES,
                                "link shaping's tc qdiscs and classifiers", mods=mods))
    checks.append(check_modules(probe, "bridge-modules", BRIDGE_MODULES[probe.bridge],
                                f"{probe.bridge} bridges", mods=mods))
    checks.append(check_modules(probe, "loop-module", DISK_MODULES,
                                "disk-image templates such as debian", required=False,
                                mods=mods))
    checks.append(check_templates(probe))
    checks.append(check_agent_protocol(probe))
    checks.append(check_clocksource(probe))
    checks.append(check_tsc(probe, is_dom0))
    checks.append(check_disk(probe))
    return checks


def passed(checks: Sequence[Check]) -> bool:
    """Would a run work? Warnings cost fidelity only."""
    return not any(c.status is Status.FAIL for c in checks)


def report_lines(checks: Sequence[Check]) -> list[str]:
    """One line per check, except that consecutive skips for one reason
    are one line (the reason said once), then a summary."""
    lines: list[str] = []
    i = 0
    while i < len(checks):
        check = checks[i]
        if check.status is Status.SKIP:
            j = i
            while j + 1 < len(checks) and checks[j + 1].status is Status.SKIP \
                    and checks[j + 1].detail == check.detail:
                j += 1
            names = ", ".join(c.name for c in checks[i:j + 1])
            lines.append(f"skip {names}: {check.detail}")
            i = j + 1
            continue
        lines.append(check.line())
        i += 1
    lines.append(summary(checks))
    return lines


def summary(checks: Sequence[Check]) -> str:
    counts = {s: sum(c.status is s for c in checks) for s in Status}
    text = (f"{counts[Status.OK]} ok, {counts[Status.WARN]} warn, {counts[Status.FAIL]} failed, "
            f"{counts[Status.SKIP]} skipped: ")
    if counts[Status.FAIL]:
        return text + "a run would not work on this host"
    if counts[Status.WARN]:
        return text + "a run would work (the warnings cost fidelity)"
    return text + "a run would work"


def as_json(checks: Sequence[Check]) -> dict[str, object]:
    return {"ok": passed(checks), "summary": summary(checks),
            "checks": [c.as_dict() for c in checks]}


# -- preflight -----------------------------------------------------------------------


def preflight(probe: HostProbe, templates: Iterable[str] | None = None,
              guest_types: Iterable[str] = ()) -> list[Check]:
    """What a deploy truly needs: Dom0, the TDF domctl, xenstored, the bridge
    tool of `probe.bridge`, `templates` (a plan's) when given, and Xen's
    support of `guest_types` (a plan's) other than PV. Raises
    HostNotReady (one line: what is missing and its fix) at the first
    failure; returns the checks, whose warnings it logs."""
    dom0 = check_dom0(probe)
    if dom0.status is not Status.OK:
        if not probe.exists("/proc/xen") and \
                (probe.read("/sys/hypervisor/type") or "").strip() != "xen":
            raise HostNotReady(NOT_DOM0_MESSAGE, dom0.name)
        _refuse(dom0)
    checks = [dom0, check_tdf_domctl(probe), check_xenstored(probe), check_bridge_tool(probe)]
    if templates is not None:
        checks.append(check_templates(probe, templates))
    # PV is what every host so far runs: `xl info` is asked only for others.
    if set(guest_types) - {"pv"}:
        checks.append(check_guest_types(probe, guest_types))
    if "hvm" in guest_types:
        checks.append(check_device_model(probe, needed=True))
    for check in checks:
        if check.status is Status.FAIL:
            _refuse(check)
        if check.status is Status.WARN:
            log.warning("%s", check.line())
    return checks


def _refuse(check: Check) -> None:
    message = f"host not ready: {check.name}: {check.detail}"
    if check.fix:
        message += f" (fix: {check.fix})"
    raise HostNotReady(" ".join(message.split()), check.name)


def preflight_for_runner(runner: Runner, bridge: str = "ovs",
                         templates: set[str] | None = None) -> list[Check]:
    """preflight() on this machine through `runner` (the backend's)."""
    return preflight(HostProbe(runner=runner, bridge=bridge), templates)
