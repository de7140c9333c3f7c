"""A host-side stand-in for a Xen Dom0, for unit tests of the experiment
lifecycle: a FakeRunner that answers the xl, ovs-vsctl, ip, tc, ethtool and
selena-tdf commands the xl backend runs, with a fake xenstored behind it and
the REAL guest agent started as a process for each guest when it is
unpaused. The guests have no network devices, so their boot-time network
directives are dropped before their agent starts.

It is a test double only; the lab runs the same lifecycle against real Xen.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fake_runner import FakeRunner
from fake_xenstored import FakeXenstored

from selena.control.xenstore import XenstoreConnection
from selena.runner import CommandResult

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "guest-agent" / "build" / "selena-agent"


@dataclass
class Domain:
    name: str
    domid: int
    memory_mb: int
    paused: bool = True
    agent: subprocess.Popen[bytes] | None = None
    tdf: str = "1"
    net: str = ""           # the boot-time network directives Dom0 wrote
    frozen: bool = False    # selena-tdf freeze
    # The domain's clock as Xen keeps it (ns): virtual = virt0 + (real -
    # real0) / TDF, standing at virt0 while frozen; a new domain reads real
    # time (the fake's real time is time.monotonic_ns()).
    real0: int = field(default_factory=time.monotonic_ns)
    virt0: int = field(init=False)
    cap: int = 0            # xl sched-credit2 -c (percent of a CPU, 0 = none)
    # devid -> Dom0 vif name: the config's vifs numbered in order, as xl does,
    # then those of `xl network-attach`.
    vifs: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.virt0 = self.real0


def virtual_ns(dom: Domain, real_ns: int) -> int:
    """The domain's virtual system time at the fake's real time real_ns."""
    if dom.frozen:
        return dom.virt0
    return dom.virt0 + round((real_ns - dom.real0) / float(dom.tdf))


@dataclass
class FakeXen(FakeRunner):
    """xl and friends over a fake xenstored; `fail` maps an argv prefix to an
    error (returncode, stderr) to inject."""

    store: FakeXenstored | None = None
    dom0: XenstoreConnection | None = None
    domains: dict[str, Domain] = field(default_factory=dict)
    bridges: dict[str, str | None] = field(default_factory=dict)     # name -> tag
    linux_bridges: dict[str, str | None] = field(default_factory=dict)
    fail: dict[tuple[str, ...], tuple[int, str]] = field(default_factory=dict)
    # (domid, TDF text) -> why the hypervisor refuses that `selena-tdf set`;
    # a set of several domains stops there, as the tool does.
    refuse_tdf: dict[tuple[int, str], str] = field(default_factory=dict)
    next_domid: int = 1
    cpus: int = 2
    free_memory_mb: int = 4096
    virt_caps: str = "pv hvm hap shadow"       # xl info's: the guest types Xen runs
    # Share of real time each domain's vCPUs are busy (xl vcpu-list), and
    # packets each shaped vif's qdisc sends per second (tc -s qdisc).
    cpu_share: dict[str, float] = field(default_factory=lambda: {"Domain-0": 0.2})
    vif_packets_per_s: float = 100.0
    root_qdiscs: dict[str, str] = field(default_factory=dict)    # dev -> kind
    started: float = field(default_factory=time.monotonic)
    _host_root: Path | None = None

    @property
    def host_root(self) -> Path:
        """A Dom0's files as the preflight reads them (XlBackend(host_root=)):
        /proc/xen says control_d and xenstored's socket exists."""
        if self._host_root is None:
            root = Path(tempfile.mkdtemp(prefix="fake-dom0-"))
            (root / "proc/xen").mkdir(parents=True)
            (root / "proc/xen/capabilities").write_text("control_d\n")
            (root / "run/xenstored").mkdir(parents=True)
            (root / "run/xenstored/socket").touch()
            self._host_root = root
        return self._host_root

    def run(self, argv: Sequence[str], *, check: bool = True, input: str | None = None,
            timeout: object = None, env: Mapping[str, str] | None = None,
            cwd: str | Path | None = None) -> CommandResult:
        args = tuple(str(a) for a in argv)
        self.calls.append(args)
        if args == ("tc", "-batch", "-"):
            rc, out, err = self._tc_batch(input or "")
        else:
            rc, out, err = self._inject(args) or self._answer_xen(args)
        result = CommandResult(args, rc, out, err, 0.0)
        self._record(result)
        if check and rc != 0:
            from selena.errors import CommandError
            raise CommandError(list(args), rc, err)
        return result

    def _tc_batch(self, text: str) -> tuple[int, str, str]:
        """`tc -batch -`: each line a tc command (recorded in calls after the
        batch's own), stopping at the first failure as tc does."""
        for number, line in enumerate(text.splitlines(), 1):
            args = ("tc", *line.split())
            self.calls.append(args)
            rc, _, err = self._inject(args) or self._answer_xen(args)
            if rc != 0:
                return 1, "", f"{err.rstrip()}\nCommand failed -:{number}\n"
        return 0, "", ""

    def _inject(self, args: tuple[str, ...]) -> tuple[int, str, str] | None:
        for prefix, (rc, err) in self.fail.items():
            if args[:len(prefix)] == prefix:
                return rc, "", err
        return None

    # -- the commands --------------------------------------------------------------

    def _answer_xen(self, args: tuple[str, ...]) -> tuple[int, str, str]:
        if "selena.backends.vif_tap" in args:      # started as a daemon; taps nothing here
            return 0, f"tapping {len(args) - 5} vifs of {args[3]}\n", ""
        handler = {"xl": self._answer_xl, "tc": self._answer_tc,
                   "selena-tdf": self._answer_tdf, "ovs-vsctl": self._answer_ovs,
                   "ip": self._answer_ip}.get(args[0])
        answer = handler(args) if handler else None
        return answer or (0, "", "")        # ip link set up, tc, ethtool, network-attach...

    def _answer_xl(self, args: tuple[str, ...]) -> tuple[int, str, str] | None:
        cmd = args[:2]
        if cmd == ("xl", "create"):
            return self._create(Path(args[-1]))
        if cmd == ("xl", "domid"):
            dom = self.domains.get(args[2])
            if dom is None:     # xl's own words (tools/xl/xl_misc.c, main_domid)
                return 1, "", (f"Can't get domid of domain name '{args[2]}', maybe this "
                               "domain does not exist.\n")
            return 0, f"{dom.domid}\n", ""
        if cmd == ("xl", "unpause"):
            return self._unpause(int(args[2]))
        if cmd == ("xl", "pause"):
            self._by_id(int(args[2])).paused = True
            return 0, "", ""
        if cmd == ("xl", "destroy"):       # by domid or by name, as xl takes either
            dom = self.domains.get(args[2])
            return self._destroy(dom.domid if dom else int(args[2]))
        if cmd == ("xl", "list"):
            lines = ["Name ID Mem VCPUs State Time(s)", "Domain-0 0 1536 2 r----- 1.0"]
            lines += [f"{d.name} {d.domid} {d.memory_mb} 1 {'--p---' if d.paused else '-b----'}"
                      " 1.0" for d in self.domains.values()]
            return 0, "\n".join(lines) + "\n", ""
        if cmd == ("xl", "info"):
            return 0, (f"nr_cpus                : {self.cpus}\n"
                       f"free_memory            : {self.free_memory_mb}\n"
                       f"virt_caps              : {self.virt_caps}\n"), ""
        if cmd == ("xl", "vcpu-list"):
            return 0, self._vcpu_list(), ""
        if cmd == ("xl", "rename"):
            dom = self.domains.pop(args[2])
            dom.name = args[3]
            self.domains[args[3]] = dom
            if self.dom0 is not None:       # libxl renames it in Xenstore too
                self.dom0.write(f"/local/domain/{dom.domid}/name", args[3])
            return 0, "", ""
        if cmd == ("xl", "network-attach"):
            return self._network_attach(args[2], dict(a.split("=", 1) for a in args[3:]))
        if cmd == ("xl", "network-list"):
            return 0, "Idx BE Mac Addr. handle state evt-ch tx-/rx-ring-ref BE-path\n", ""
        if cmd == ("xl", "sched-credit2") and args[2:3] == ("-d",) and args[4:5] == ("-c",):
            self._by_id(int(args[3])).cap = int(args[5])
            return 0, "", ""
        return None

    def _answer_tc(self, args: tuple[str, ...]) -> tuple[int, str, str] | None:
        if args[:5] == ("tc", "-s", "-j", "qdisc", "show"):
            return 0, self._qdisc_stats(), ""
        if args[:3] == ("tc", "qdisc", "replace") and "root" in args:
            return self._replace_root(args)
        return None

    def _answer_tdf(self, args: tuple[str, ...]) -> tuple[int, str, str] | None:
        verb = args[1] if len(args) > 1 else ""
        if args[1:] == ("get", "0"):
            return 0, "1\n", ""            # Dom0 reads its own TDF: the domctl answers
        if verb == "host":
            return 0, (f"nr_cpus : {self.cpus}\nfree_memory : "
                       f"{self.free_memory_mb}\nxen_major : 4\nxen_minor : 17\n"
                       "xen_extra : .5-fake\n"), ""
        now = time.monotonic_ns()
        if verb == "set":
            domids, tdf = [int(d) for d in args[2:-1]], args[-1]
            for i, domid in enumerate(domids):
                why = self.refuse_tdf.get((domid, tdf))
                if why is not None:
                    before = (f"selena-tdf: set {i} of {len(domids)} domain(s) before "
                              f"domain {domid}\n" if i else "")
                    return 1, "", f"{before}selena-tdf: domain {domid}: {why}\n"
                dom = self._by_id(domid)
                dom.virt0, dom.real0 = virtual_ns(dom, now), now
                dom.tdf = tdf
            return 0, "", ""
        if verb == "align":
            ids = {d.domid: d for d in self.domains.values()}
            new, ref = (ids.get(int(d)) for d in args[2:4])
            if ref is None or new is None:
                missing = args[3] if ref is None else args[2]
                return 1, "", f"selena-tdf: no such domain: {missing}\n"
            if new.agent is not None:   # it has run: the hypervisor refuses
                return 1, "", (f"selena-tdf: domain {new.domid}'s clock cannot be moved "
                               "(Device or resource busy)\n")
            new.virt0, new.real0, new.frozen = virtual_ns(ref, now), now, False
            return 0, (f"domain {new.domid} started at domain {ref.domid}'s virtual time, "
                       "+0 ns from it\n"), ""
        if verb == "status":
            dom = self._by_id(int(args[2]))
            return 0, (f"tdf {dom.tdf}\nfrozen {'yes' if dom.frozen else 'no'}\n"
                       f"virtual_ns {virtual_ns(dom, now)}\nreal_ns {now}\n"), ""
        if verb in ("pause", "unpause"):
            return self._pause_many(verb, [int(d) for d in args[2:]])
        if verb in ("freeze", "thaw"):
            for word in args[2:]:      # all at one instant, as the domctl's group
                dom = self._by_id(int(word))
                if dom.frozen != (verb == "freeze"):
                    dom.virt0, dom.real0 = virtual_ns(dom, now), now
                dom.frozen = verb == "freeze"
                if dom.agent is not None:   # a frozen guest runs nothing, heartbeats neither
                    os.killpg(dom.agent.pid, signal.SIGSTOP if dom.frozen else signal.SIGCONT)
            done = "froze" if verb == "freeze" else "thawed"
            out = f"{done} {len(args) - 2} domain(s) at virtual 5000 ns (Xen time 9000 ns)\n"
            return 0, out, ""
        return None

    def _answer_ovs(self, args: tuple[str, ...]) -> tuple[int, str, str] | None:
        verb = args[1] if len(args) > 1 else ""
        if verb == "add-br":
            tag = next((a.split("=", 1)[1] for a in args
                        if a.startswith("external_ids:selena-experiment=")), None)
            self.bridges[args[2]] = tag
            return 0, "", ""
        if verb == "br-get-external-id":
            if args[2] not in self.bridges:
                return 1, "", f"ovs-vsctl: no bridge named {args[2]}\n"
            return 0, (self.bridges[args[2]] or "") + "\n", ""
        if verb == "list-br":
            return 0, "".join(f"{b}\n" for b in self.bridges), ""
        if verb == "--if-exists":
            self.bridges.pop(args[3], None)
            return 0, "", ""
        return None

    def _answer_ip(self, args: tuple[str, ...]) -> tuple[int, str, str] | None:
        if args[:3] == ("ip", "link", "add"):
            self.linux_bridges[args[3]] = None
            return 0, "", ""
        if args[:3] == ("ip", "link", "set") and len(args) > 5 and args[4] == "alias":
            self.linux_bridges[args[3]] = args[5]
            return 0, "", ""
        if args[:3] == ("ip", "link", "del"):
            self.linux_bridges.pop(args[3], None)
            return 0, "", ""
        if args[:3] == ("ip", "-o", "link"):
            shown = [(n, a) for n, a in self.linux_bridges.items()
                     if "dev" not in args or n == args[-1]]
            if "dev" in args and not shown:
                return 1, "", f'Device "{args[-1]}" does not exist.\n'
            return 0, "".join(f"{i}: {n}: <BROADCAST> mtu 1500 state UP"
                              + (f" \\    alias {a}" if a else "") + "\n"
                              for i, (n, a) in enumerate(shown, start=10)), ""
        return None

    def _replace_root(self, args: tuple[str, ...]) -> tuple[int, str, str]:
        # Like the kernel: replacing a root qdisc with one of the same kind is a
        # change, and htb has no change operation.
        dev, kind = args[args.index("dev") + 1], args[args.index("1:") + 1]
        if self.root_qdiscs.get(dev) == kind == "htb":
            return 2, "", "Error: Change operation not supported by specified qdisc.\n"
        self.root_qdiscs[dev] = kind
        return 0, "", ""

    def _vcpu_list(self) -> str:
        up = time.monotonic() - self.started
        lines = ["Name                                ID  VCPU   CPU State   Time(s) "
                 "Affinity (Hard / Soft)"]
        rows = [("Domain-0", 0, 2)] + [(d.name, d.domid, 1) for d in self.domains.values()]
        for name, domid, vcpus in rows:
            seconds = self.cpu_share.get(name, 0.05) * up
            for vcpu in range(vcpus):
                lines.append(f"{name:<35} {domid:>3} {vcpu:>5} {vcpu:>5}   -b-  {seconds:>8.1f}"
                             "  all / all")
        return "\n".join(lines) + "\n"

    def _qdisc_stats(self) -> str:
        import json

        sent = int(self.vif_packets_per_s * (time.monotonic() - self.started))
        shaped = {c[c.index("dev") + 1] for c in self.calls
                  if c[:2] == ("tc", "qdisc") and "dev" in c[:-1]}
        # Light traffic: the queue is empty whenever tc looks.
        return json.dumps([{"kind": "htb", "handle": "1:", "dev": dev, "packets": sent,
                            "bytes": sent * 1000, "drops": 0, "overlimits": sent // 10,
                            "backlog": 0, "qlen": 0}
                           for dev in sorted(shaped)])

    def _create(self, cfg: Path) -> tuple[int, str, str]:
        text = cfg.read_text()
        name = re.search(r'^name = "(.*)"$', text, re.M)
        memory = re.search(r"^memory = (\d+)$", text, re.M)
        if not name or not memory:
            return 1, "", f"cannot parse {cfg}"
        if name.group(1) in self.domains:
            return 1, "", f"domain {name.group(1)} already exists"
        domid = self.next_domid
        self.next_domid += 1
        assert self.store is not None
        self.store.add_domain(domid, name.group(1))
        vif_line = re.search(r"^vif = \[(.*)\]$", text, re.M)
        vifs = re.findall(r"vifname=([^,']+)", vif_line.group(1)) if vif_line else []
        self.domains[name.group(1)] = Domain(name.group(1), domid, int(memory.group(1)),
                                             vifs=dict(enumerate(vifs)))
        return 0, "", ""

    def _network_attach(self, domain: str, spec: dict[str, str]) -> tuple[int, str, str]:
        """libxl's answers: an unknown domain, a devid in use (xl numbers one
        not given after the highest)."""
        dom = self.domains.get(domain) or next(
            (d for d in self.domains.values() if str(d.domid) == domain), None)
        if dom is None:
            return 1, "", f"{domain} is an invalid domain identifier (rc=-6)\n"
        devid = int(spec.get("devid", max(dom.vifs, default=-1) + 1))
        if devid in dom.vifs:
            return 1, "", (f"libxl: error: libxl_device.c: device vif/{devid} of domain "
                           f"{dom.domid} exists\n")
        dom.vifs[devid] = spec.get("vifname", f"vif{dom.domid}.{devid}")
        return 0, "", ""

    def _pause_many(self, verb: str, domids: list[int]) -> tuple[int, str, str]:
        for domid in domids:
            if domid not in {d.domid for d in self.domains.values()}:
                return 1, "", f"selena-tdf: cannot {verb} domain {domid}: No such process"
        for domid in domids:
            if verb == "pause":
                self._by_id(domid).paused = True
            else:
                self._unpause(domid)
        return 0, "", ""

    def _unpause(self, domid: int) -> tuple[int, str, str]:
        dom = self._by_id(domid)
        dom.paused = False
        if dom.agent is None:
            assert self.store is not None and self.dom0 is not None
            # No network devices in these guests: nothing to configure.
            net = self.dom0.read_or_none(f"/local/domain/{domid}/selena/net")
            if net is not None:
                dom.net = net.decode()
                self.dom0.write(f"/local/domain/{domid}/selena/net", "")
            dom.agent = subprocess.Popen([str(AGENT), "--device", self.store.listen(domid)],
                                         start_new_session=True)
        return 0, "", ""

    def _destroy(self, domid: int) -> tuple[int, str, str]:
        dom = self._by_id(domid)
        if dom.agent is not None:
            _stop(dom.agent)
        assert self.store is not None
        self.store.remove_domain(domid)
        del self.domains[dom.name]
        for vif in dom.vifs.values():   # vifs and their qdiscs go with their domain
            self.root_qdiscs.pop(vif, None)
        if not self.domains:
            self.root_qdiscs.clear()
        return 0, "", ""

    def _by_id(self, domid: int) -> Domain:
        return next(d for d in self.domains.values() if d.domid == domid)

    def shutdown(self) -> None:
        for dom in list(self.domains.values()):
            if dom.agent is not None:
                _stop(dom.agent)
        if self._host_root is not None:
            shutil.rmtree(self._host_root, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The agent and everything it started: its commands run in their own
    process groups, which a destroyed domain takes with it. The agent goes
    first, as with a destroyed domain: it must not report its commands' end."""
    groups = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == proc.pid:          # ppid: a command of this agent
            groups.append(int(fields[2]))
    try:
        proc.send_signal(signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
