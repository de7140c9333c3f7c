"""The mininet backend: the real-time baseline on the same Dom0.

The topology is translated by selena/baseline.py and built with Debian's
Mininet (network namespaces, veth pairs, TCLink, Open vSwitch bridges);
commands run in a host's namespaces through `mnexec -a`, one process group
each, with the scenario API of any other backend (cmd, start, wait, kill,
timeouts, results). Everything is real time: the TDF is 1 and cannot
change. Mininet is imported only when a network is built, so the rest of
selena does not need it.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal as signals
import subprocess
import threading
import time
import uuid
from collections.abc import Collection
from typing import IO, Any

from selena.backends.base import Backend, Deployment, LoadSample, Progress
from selena.baseline import MnNet, translate
from selena.control.channel import CommandHandle, CommandResult
from selena.control.interface import DEFAULT_OUTPUT_CAP, CommandChannel
from selena.control.protocol import CommandSpec
from selena.errors import BackendError, ControlError, ExperimentExists, GuestLost
from selena.hostinfo import HostInfo
from selena.model import Link
from selena.plan import Plan

log = logging.getLogger(__name__)

COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _read_capped(pipe: IO[bytes], cap: int, into: list[tuple[bytes, int]]) -> None:
    """Read a pipe to its end, keeping at most `cap` bytes (the rest counted)."""
    kept, dropped = bytearray(), 0
    while chunk := os.read(pipe.fileno(), 65536):
        room = max(0, cap - len(kept))
        kept += chunk[:room]
        dropped += max(0, len(chunk) - room)
    into.append((bytes(kept), dropped))


def _read_both(proc: subprocess.Popen[bytes], cap: int) -> list[tuple[bytes, int]]:
    results: list[list[tuple[bytes, int]]] = [[], []]
    readers = [threading.Thread(target=_read_capped, args=(pipe, cap, into), daemon=True)
               for pipe, into in ((proc.stdout, results[0]), (proc.stderr, results[1]))]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join()
    return [into[0] for into in results]


class NamespaceChannel(CommandChannel):
    """Runs commands in Mininet hosts (the CommandChannel of the mininet
    backend): each through `mnexec -a PID`, one process group each."""

    tdf = 1.0

    def __init__(self, runner_prefix: tuple[str, ...] = ("mnexec", "-a"),
                 output_cap: int = DEFAULT_OUTPUT_CAP) -> None:
        if output_cap < 0:
            raise ValueError(f"output cap {output_cap} is negative")
        self.prefix = runner_prefix
        self.output_cap = output_cap
        self._pids: dict[str, int] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        # Commands kill() signalled: their end is reported as a kill, not
        # as a signal from elsewhere.
        self._killed: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False

    def set_tdf(self, tdf: float) -> None:
        if tdf != 1.0:
            raise ControlError("the Mininet baseline runs in real time (TDF 1)")

    def hold_heartbeats(self, held: bool) -> None:
        """Namespaces have no agents and so no heartbeats to hold."""

    def add_guest(self, name: str, pid: int) -> None:
        self._pids[name] = pid

    def wait_ready(self, timeout: float, nodes: Collection[str] | None = None) -> None:
        for name, pid in self._pids.items():
            if (nodes is None or name in nodes) and not os.path.exists(f"/proc/{pid}"):
                raise GuestLost(name, f"its namespace's shell (pid {pid}) is gone")

    def submit(self, guest_name: str, spec: CommandSpec) -> CommandHandle:
        if self._closed:
            raise ControlError("the command channel is closed")
        spec.encode()                   # the same checks as for a guest
        pid = self._pids.get(guest_name)
        if pid is None:
            raise ControlError(f"no host named {guest_name!r}")
        argv = list(spec.argv) if spec.argv else ["sh", "-c", spec.shell or ""]
        handle = CommandHandle(guest_name, uuid.uuid4().hex[:16], spec, time.time())
        start_ns, began = time.time_ns(), time.monotonic_ns()
        try:
            proc = subprocess.Popen([*self.prefix, str(pid), *argv], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=spec.cwd or "/", start_new_session=True,
                                    env={"PATH": COMMAND_PATH, "HOME": "/root", **spec.env})
        except OSError as exc:
            handle.complete(CommandResult(guest_name, handle.id, spec.describe(), "failed",
                                          reason="exec", detail=str(exc),
                                          submitted=handle.submitted, finished=time.time()))
            return handle
        with self._lock:
            self._procs[handle.id] = proc
        timed_out = threading.Event()
        timer = None
        if spec.timeout_ns:
            def expire() -> None:
                timed_out.set()
                self._signal(proc, signals.SIGKILL)
            timer = threading.Timer(spec.timeout_ns / 1e9, expire)
            timer.daemon = True
            timer.start()

        def collect() -> None:
            (out, out_dropped), (err, err_dropped) = _read_both(proc, self.output_cap)
            proc.wait()
            end_ns, ended = time.time_ns(), time.monotonic_ns()
            if timer is not None:
                timer.cancel()
            with self._lock:
                self._procs.pop(handle.id, None)
                killed = handle.id in self._killed
                self._killed.discard(handle.id)
            code = proc.returncode
            common: dict[str, Any] = dict(start_ns=start_ns, end_ns=end_ns,
                                          dur_ns=ended - began, stdout=out, stderr=err,
                                          submitted=handle.submitted, finished=time.time(),
                                          stdout_dropped=out_dropped,
                                          stderr_dropped=err_dropped)
            if code >= 0:
                result = CommandResult(guest_name, handle.id, spec.describe(), "exited",
                                       exit_code=code, **common)
            else:
                reason = "timeout" if timed_out.is_set() else "kill" if killed else "signal"
                result = CommandResult(guest_name, handle.id, spec.describe(), "killed",
                                       signal=-code, reason=reason, **common)
            handle.complete(result)

        threading.Thread(target=collect, name=f"mn-{guest_name}", daemon=True).start()
        return handle

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)     # the command's whole process group
        except ProcessLookupError:
            pass

    def kill(self, handle: CommandHandle, signal: int = 15) -> None:
        with self._lock:
            proc = self._procs.get(handle.id)
            if proc is None or handle.done:
                return
            self._killed.add(handle.id)
        self._signal(proc, signal)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            self._signal(proc, signals.SIGKILL)


class MininetBackend(Backend):
    """Builds the Mininet translation of a plan (one network at a time)."""

    name = "mininet"
    dilates = False
    guest_agents = False
    crashes_nodes = False

    def __init__(self, **_options: object) -> None:
        self._nets: dict[str, Any] = {}             # experiment -> mininet.net.Mininet
        self._channel: NamespaceChannel | None = None

    def host_info(self) -> HostInfo:
        import platform

        return HostInfo("mininet", cpus=os.cpu_count(), dom0_kernel=platform.release(),
                        hypervisor="none (Mininet, real time)")

    def _translate(self, plan: Plan) -> MnNet:
        if plan.topology is None:
            raise BackendError("the mininet backend needs a plan made from a topology")
        return translate(plan.topology, plan)

    def render(self, plan: Plan) -> str:
        net = self._translate(plan)
        lines = [f"# Mininet baseline of {plan.experiment} (real time, TDF 1)"]
        lines += [f"net.addHost({h!r})" for h in net.hosts]
        lines += [f"net.addSwitch({s!r}, cls=OVSSwitch, failMode='secure')" if s in net.flows
                  else f"net.addSwitch({s!r}, cls=OVSBridge, stp={stp})"
                  for s, stp in net.switches]
        for link in net.links:
            lines.append(f"net.addLink({link.node1!r}, {link.node2!r}, cls=TCLink, "
                         f"intfName1={link.intf1!r}, intfName2={link.intf2!r}"
                         + "".join(f", {k}={v!r}" for k, v in link.tc.items()) + ")")
        for host, commands in net.setup.items():
            lines += [f"# in {host}: {c}" for c in commands]
        for switch, flows in net.flows.items():
            lines += [f"# ovs-ofctl add-flow {switch} {f}" for f in flows]
        return "\n".join(lines) + "\n"

    def deploy(self, plan: Plan, progress: Progress | None = None,
               warm: bool = False, replace: bool = False) -> Deployment:
        say = progress or (lambda msg: log.info("%s", msg))
        spec = self._translate(plan)
        if plan.experiment in self._nets:
            if not replace:
                raise ExperimentExists(plan.experiment)
            # Mininet networks live in this process only: this run owns it.
            say(f"experiment {plan.experiment} exists: destroying it first (replace)")
            self.destroy(plan.experiment)
        taken = sorted(name for name, _ in spec.switches
                       if os.path.exists(f"/sys/class/net/{name}"))
        if taken:
            raise BackendError(f"Dom0 already has interfaces named {', '.join(taken)}; "
                               "Mininet would replace them (rename the switches)")
        try:
            from mininet.link import TCLink
            from mininet.log import setLogLevel
            from mininet.net import Mininet
            from mininet.node import OVSBridge, OVSSwitch
        except ImportError as exc:
            raise BackendError(f"Mininet is not installed here ({exc}); Debian: apt-get "
                               "install mininet") from None
        setLogLevel("error")
        net = Mininet(build=False, controller=None, autoSetMacs=False, autoStaticArp=False,
                      waitConnected=False)
        self._nets[plan.experiment] = net
        try:
            for host in spec.hosts:
                net.addHost(host, ip=None)
            for number, (switch, stp) in enumerate(spec.switches, start=1):
                if switch in spec.flows:     # secure: it forwards by its static flows alone
                    net.addSwitch(switch, cls=OVSSwitch, failMode="secure",
                                  dpid=f"{number:016x}")
                else:                        # OVSBridge: a learning switch
                    net.addSwitch(switch, cls=OVSBridge, stp=stp, failMode="standalone",
                                  dpid=f"{number:016x}")
            for link in spec.links:
                net.addLink(link.node1, link.node2, cls=TCLink, intfName1=link.intf1,
                            intfName2=link.intf2, addr1=link.mac1, addr2=link.mac2,
                            **link.tc)
            net.build()
            net.start()
            say(f"Mininet baseline: {len(spec.hosts)} hosts, {len(spec.switches)} switches, "
                f"{len(spec.links)} links (real time)")
            self._configure(net, spec)
        except BaseException:
            self.destroy(plan.experiment)
            raise
        return Deployment(plan.experiment, 1.0,
                          {host: net.get(host).pid for host in spec.hosts}, self.name)

    @staticmethod
    def _configure(net: Any, spec: MnNet) -> None:
        """The static flows and each host's network setup, in the started net."""
        for switch, flows in spec.flows.items():
            for flow in flows:
                out = net.get(switch).dpctl("add-flow", shlex.quote(flow))
                if out.strip():
                    raise BackendError(f"adding a flow to {switch} in Mininet: "
                                       f"{flow}: {out.strip()}")
        for host, commands in spec.setup.items():
            node = net.get(host)
            for command in commands:
                out = node.cmd(f"{command}; echo selena-rc=$?")
                if "selena-rc=0" not in out:
                    raise BackendError(f"setting up {host} in Mininet: `{command}` "
                                       f"failed: {out.strip()}")

    def wait_up(self, deployment: Deployment, timeout: float,
                progress: Progress | None = None) -> list[str]:
        return []

    def command_channel(self, tdf: float,
                        output_cap: int = DEFAULT_OUTPUT_CAP) -> NamespaceChannel:
        self._channel = NamespaceChannel(output_cap=output_cap)
        return self._channel

    def set_tdf(self, experiment: str, tdf: float,
                progress: Progress | None = None) -> tuple[float, float]:
        raise BackendError("the Mininet baseline runs in real time: its TDF cannot change")

    def freeze(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        raise BackendError("the Mininet baseline cannot freeze time")

    def thaw(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        raise BackendError("the Mininet baseline cannot freeze time")

    def shape_link(self, experiment: str, link: Link,
                   progress: Progress | None = None) -> None:
        """Mininet's own TCIntf.config on both ends of every link between
        the two nodes (real time: the values as they are); Mininet replaces
        the interfaces' qdiscs. With several links between the two nodes,
        all of them change, as with configLinkStatus."""
        from selena.baseline import tc_params

        net = self._nets.get(experiment)
        if net is None:
            raise BackendError(f"no Mininet network {experiment} in this process")
        params = tc_params(link)
        links = net.linksBetween(net.get(link.a.node), net.get(link.b.node))
        if not links:
            raise BackendError(f"{link}: Mininet has no link between {link.a.node} and "
                               f"{link.b.node}")
        for mn_link in links:
            for intf in (mn_link.intf1, mn_link.intf2):
                intf.config(**params)

    def set_link(self, experiment: str, link: Link, up: bool,
                 progress: Progress | None = None) -> None:
        """Mininet's own configLinkStatus (both veth ends down or up; with
        several links between the two nodes, Mininet changes them all)."""
        net = self._nets.get(experiment)
        if net is None:
            raise BackendError(f"no Mininet network {experiment} in this process")
        net.configLinkStatus(link.a.node, link.b.node, "up" if up else "down")

    def crash(self, deployment: Deployment, node: str) -> None:
        raise BackendError("the Mininet baseline cannot crash a node")

    def destroy(self, experiment: str, pool: bool = False, force: bool = False) -> None:
        if self._channel is not None:
            self._channel.close()
        net = self._nets.pop(experiment, None)
        if net is not None:
            net.stop()

    def clean(self, force: bool = False, progress: Progress | None = None) -> list[str]:
        # Mininet's own `mn -c` would remove every Mininet network on the
        # host, not only ours: selena removes what it built, in destroy.
        names = list(self._nets)
        for experiment in names:
            self.destroy(experiment)
        return names

    def status(self) -> list[dict[str, object]]:
        return [{"experiment": name, "backend": self.name} for name in self._nets]

    def load_sample(self, experiment: str) -> LoadSample:
        """Dom0's CPUs from /proc/stat (Mininet hosts run on them)."""
        sample = LoadSample(time.monotonic())
        tick = os.sysconf("SC_CLK_TCK")
        with open("/proc/stat") as stat:
            for line in stat:
                name, *fields = line.split()
                if name.startswith("cpu") and name != "cpu":
                    # busy: everything but idle and iowait
                    values = [int(v) for v in fields[:8]]
                    sample.dom0_vcpu_s.append((sum(values) - values[3] - values[4]) / tick)
        return sample

    def close(self) -> None:
        for experiment in list(self._nets):
            self.destroy(experiment)
