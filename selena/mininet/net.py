"""Mininet's `Mininet` object for scripts (`from selena.mininet import
Mininet`), on selena's one lifecycle: `net.start()` deploys through an
`Experiment`, `net.stop()` tears it down (also at exit, or on an exception,
if the script forgot), and pingAll/iperf are selena.session's.

    from selena.mininet import Mininet, TCLink
    from selena.mininet.topo import SingleSwitchTopo

    net = Mininet(topo=SingleSwitchTopo(2), link=TCLink)
    net.start()
    h1, h2 = net.get("h1", "h2")
    print(h1.cmd("ping -c1 %s" % h2.IP()))
    net.pingAll()
    net.stop()
"""

from __future__ import annotations

import atexit
import signal
import weakref
from collections.abc import Iterator
from typing import Any

from selena.errors import ArgumentError, ExperimentError, ScenarioError
from selena.mininet import node as mn_node
from selena.mininet.link import Link, TCLink
from selena.mininet.log import error, output, warn
from selena.mininet.process import Popen, SentCommand, argv_of
from selena.mininet.topo import (
    Customized,
    Topo,
    _host_options,
    _switch_options,
    link_options,
    natural,
    to_topology,
    with_class_params,
)
from selena.model import caller_location
from selena.model.cpus import checked_share
from selena.relay import OutputFollower, TextPieces

# Mininet's constructor options that selena cannot honour without changing
# what the script means: refused, one line each, with what to do instead.
REFUSED = {
    "xterms": "selena's guests have no X terminals: use h.cmd(...)",
    "autoPinCpus": "pin a guest's vCPUs with addHost(..., cpus='2-3')",
}
# Accepted and ignored: selena's guests are VMs with their own namespaces,
# its switches standalone learning bridges (what Mininet's default
# controller makes of them), its links always shaped as TCLink shapes them.
IGNORED = ("inNamespace", "cleanup", "listenPort", "waitConnected", "intf", "build_timeout")
# Passed to selena's Experiment as they are.
SELENA = ("tdf", "out", "backend", "strict", "ready_timeout", "command_timeout", "monitor",
          "shaping", "bridge", "warm", "replace", "progress", "runner", "xenstore",
          "templates", "keep", "output_cap")

# Nets started and not stopped: stopped at exit, so no guest outlives the script.
_LIVE: weakref.WeakSet[Mininet] = weakref.WeakSet()


@atexit.register
def _stop_forgotten() -> None:
    # Said on the console, as Mininet's own messages are (selena.mininet.log).
    for net in list(_LIVE):
        warn(f"*** net {net.name} was not stopped: stopping it at exit\n")
        try:
            net.stop()
        except Exception as exc:  # noqa: BLE001 - at exit, say it and go on
            error(f"*** stopping net {net.name} at exit failed: {exc}\n")


class NotInSelenaMininet(ArgumentError, AttributeError):
    """A name of Mininet's API that selena's does not have: one line at the
    user's call naming what there is (an AttributeError too, so that
    hasattr() and getattr(..., default) keep their meaning)."""


def _missing(owner: str, name: str, have: type) -> NotInSelenaMininet:
    names = sorted(n for n in dir(have) if not n.startswith("_"))
    return NotInSelenaMininet(caller_location(), f"{owner}.{name}: not in selena's Mininet API "
                                                 f"(it has {', '.join(names)}; "
                                                 "docs/topologies.md)")


def _printer() -> OutputFollower:
    """A command's output printed as it comes (Mininet's verbose), the two
    streams merged as Mininet's shell merges them."""
    texts = TextPieces()

    def show(stream: int, data: bytes) -> None:
        text = texts.text(stream, data)
        if text:
            output(text)
    return show


class NodeHandle:
    """A node of a started net, as Mininet's Node: `cmd` returns the output
    (stdout then stderr) as a string, `IP()` its first address."""

    def __init__(self, net: Mininet, name: str):
        self.net = net
        self.name = name

    def cmd(self, *args: object, **kwargs: object) -> str:
        """Run a shell command in the guest and return its output, as
        Mininet does (`h1.cmd('ping -c1', h2.IP())`: words joined by spaces).
        verbose=True prints the output as it comes (Mininet's log output),
        as cmdPrint does; `timeout=` is in virtual seconds."""
        verbose = bool(kwargs.pop("verbose", False))
        timeout = kwargs.pop("timeout", None)
        if kwargs:
            raise ArgumentError(caller_location(), f"{self.name}.cmd: unknown option(s) "
                                                   f"{', '.join(kwargs)}")
        command = self._command(args, "cmd")
        exp = self.net._started(f"{self.name}.cmd")
        result = exp.cmd(self.name, command, timeout=timeout,
                         on_output=_printer() if verbose else None)
        return (result.stdout + result.stderr).decode(errors="replace")

    def sendCmd(self, *args: object, **kwargs: object) -> None:  # noqa: N802
        """Start a shell command in the guest and return at once (Mininet's
        sendCmd); waitOutput() waits for it and returns its output,
        sendInt() interrupts it. One at a time per node, as in Mininet."""
        kwargs.pop("printPid", None)
        if kwargs:
            raise ArgumentError(caller_location(), f"{self.name}.sendCmd: unknown option(s) "
                                                   f"{', '.join(kwargs)}")
        command = self._command(args, "sendCmd")
        exp = self.net._started(f"{self.name}.sendCmd")
        if self.name in self.net.sent:
            raise ArgumentError(caller_location(), f"{self.name}.sendCmd: {self.name} is "
                                                   "running a command already (waitOutput() "
                                                   "first)")
        self.net.sent[self.name] = SentCommand(exp.start(self.name, command))

    @property
    def waiting(self) -> bool:
        """A command from sendCmd has not ended and been read to its end
        (Mininet's waiting)."""
        return self.name in self.net.sent

    def monitor(self, timeoutms: float | None = None, findPid: bool = True) -> str:  # noqa: N803
        """What sendCmd's command printed since the last look (stdout and
        stderr as they came, as Mininet's shell merges them), waiting up to
        timeoutms real ms for something (None: until something comes); ''
        when nothing did or none was sent. Once the command has ended and
        its output is read, `waiting` is False (Mininet's monitor)."""
        sent = self.net.sent.get(self.name)
        if sent is None:
            return ""
        text = sent.take(None if timeoutms is None else max(0.0, timeoutms / 1000))
        if sent.ended:
            try:
                self.net._started(f"{self.name}.monitor").wait(sent.handle)   # recorded
            finally:
                del self.net.sent[self.name]
        return text

    def waitOutput(self, verbose: bool = False) -> str:  # noqa: N802
        """Wait for sendCmd's command; its output not read by monitor()
        yet, '' when none was sent, as Mininet's (verbose: printed as it
        comes)."""
        texts = []
        while self.waiting:
            text = self.monitor()
            if verbose and text:
                output(text)
            texts.append(text)
        return "".join(texts)

    def sendInt(self, intr: str = "\x03") -> None:  # noqa: N802
        """Interrupt sendCmd's command (SIGINT, as Ctrl-C in Mininet's shell);
        waitOutput() then returns what it printed."""
        sent = self.net.sent.get(self.name)
        if sent is not None and not sent.handle.done:
            self.net._started(f"{self.name}.sendInt").kill(sent.handle, signal.SIGINT)

    def popen(self, *args: object, shell: bool = False, **kwargs: object) -> Popen:
        """Start a command in the guest and return a subprocess.Popen-like
        object (Mininet's popen): a string is split into words unless
        shell=True, a list is the argv (selena.mininet.process). Mininet's
        stdout=, stderr= and mncmd= are accepted (the output is always kept)."""
        for ignored in ("stdin", "stdout", "stderr", "mncmd", "cwd"):
            kwargs.pop(ignored, None)
        if kwargs:
            raise ArgumentError(caller_location(), f"{self.name}.popen: unknown option(s) "
                                                   f"{', '.join(kwargs)}")
        command = argv_of(args, shell, f"{self.name}.popen")
        return Popen(self.net._started(f"{self.name}.popen"), self.name, command)

    def pexec(self, *args: object, shell: bool = False,
              **kwargs: object) -> tuple[str, str, int]:
        """popen, then its (stdout, stderr, exit status), as Mininet's pexec."""
        process = self.popen(*args, shell=shell, **kwargs)
        out, err = process.communicate()
        return (out.decode(errors="replace"), err.decode(errors="replace"), process.wait())

    def _command(self, args: tuple[object, ...], what: str) -> str:
        if not args:
            raise ArgumentError(caller_location(), f"{self.name}.{what}: give a command")
        if len(args) == 1 and isinstance(args[0], list | tuple):
            args = tuple(args[0])
        return " ".join(str(a) for a in args)

    def cmdPrint(self, *args: object, **kwargs: object) -> str:  # noqa: N802
        """cmd, its output printed as it comes (Mininet's cmdPrint)."""
        kwargs["verbose"] = True
        return self.cmd(*args, **kwargs)

    def IP(self, intf: object = None) -> str | None:  # noqa: N802 - Mininet's name
        node = self.net.topology.nodes[self.name]
        iface = node.interface(0) if intf is None else node.interface(_index(intf))
        return iface.ip.split("/")[0] if iface and iface.ip else None

    def MAC(self, intf: object = None) -> str | None:  # noqa: N802
        node = self.net.topology.nodes[self.name]
        iface = node.interface(0) if intf is None else node.interface(_index(intf))
        return self.net.topology.mac_of(node, iface) if iface else None

    def intf(self, intf: object = None) -> IntfHandle:
        """The node's interface (default its first; 'h1-eth1', 'eth1' or 1),
        Mininet's TCIntf: `h1.intf().config(bw=5)` reshapes its link."""
        index = 0 if intf is None else _index(intf)
        built = self.net._built(f"{self.name}.intf")
        if built.nodes[self.name].interface(index) is None:
            raise ArgumentError(caller_location(), f"{self.name}.intf: {self.name} has no "
                                                   f"interface eth{index}")
        return IntfHandle(self.net, self.name, index)

    def connectionsTo(self, node: object) -> list[tuple[IntfHandle, IntfHandle]]:  # noqa: N802
        """(this node's interface, the other's) for each link between them."""
        other = str(node)
        return [(link.intf1, link.intf2) if link.intf1.node == self.name
                else (link.intf2, link.intf1) for link in self.net.linksBetween(self, other)]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __getattr__(self, name: str) -> Any:
        # Only names found nowhere else: Mininet's beyond selena's (h1.setIP, ...).
        if name.startswith("_") or name in ("net", "name"):
            raise AttributeError(name)
        raise _missing(self.name, name, type(self))


class HostHandle(NodeHandle):
    def setCPUFrac(self, f: float, sched: str | None = None) -> None:  # noqa: N802
        """CPULimitedHost's: cap the host at fraction `f` of the machine's
        CPUs (-1: no cap), as selena's cpu_share, per virtual second at any
        TDF; before start() the net's topology takes it, after it the run
        (Experiment.set_cpu_share)."""
        where = caller_location()
        if sched not in (None, "cfs"):
            raise ArgumentError(where, f"{self.name}.setCPUFrac: sched={sched!r} is not "
                                       "supported: Xen's credit2 cap is what cpu= gives "
                                       "(Mininet's 'cfs'); drop sched=")
        try:
            share = None if f == -1 else checked_share(f)
        except ValueError as exc:
            raise ArgumentError(where, f"{self.name}.setCPUFrac: {exc}") from None
        if self.net.session is None:
            self.net.topology.nodes[self.name].cpu_share = share
        else:
            self.net.exp.set_cpu_share(self.name, share)


class SwitchHandle(NodeHandle):
    pass


class IntfHandle:
    """One end of a link of the net, as Mininet's TCIntf (`h1.intf()`,
    `link.intf1`): its name, node and addresses, and config() on a started
    net. selena shapes a link alike in both directions, so either end's
    config() changes the whole link (and every link between the same two
    nodes), in virtual terms at any TDF; Mininet's changes that end's
    sending side only."""

    def __init__(self, net: Mininet, node: str, index: int):
        self.net = net
        self.node = node
        self.index = index

    @property
    def name(self) -> str:
        return f"{self.node}-eth{self.index}"

    @property
    def link(self) -> NetLink:
        built = self.net._built(f"{self.name}.link")
        for link in built.links:
            for end, other in ((link.a, link.b), (link.b, link.a)):
                if (end.node, end.iface) == (self.node, self.index):
                    return NetLink(self.net, end.node, other.node, end.iface, other.iface)
        raise ArgumentError(caller_location(), f"{self.name}: on no point-to-point link")

    def config(self, bw: object = None, delay: object = None, jitter: object = None,
               loss: object = None, max_queue_size: object = None,
               **params: object) -> dict[str, object]:
        """TCIntf.config: new bw (Mbit/s), delay, jitter (tc times), loss
        (percent) or max_queue_size (packets) for the link on this interface
        of a started net; what is not given keeps its value. Mininet's other
        parameters (use_htb, enable_ecn, ...) as addLink takes them. Returns
        the values applied, in selena's terms."""
        call = f"{self.name}.config"
        given = {k: v for k, v in {"bw": bw, "delay": delay, "jitter": jitter, "loss": loss,
                                   "max_queue_size": max_queue_size, **params}.items()
                 if v is not None}
        values = dict(link_options(given, call))
        if bw == 0:
            values["rate"] = None       # Mininet's bw=0: no rate limit
        if loss == 0:
            values["loss"] = 0.0
        self.net._started(call)
        other = self.link.other(self.node)
        if values:
            self.net.exp.link(self.node, other).set(**values)
        return values

    def IP(self) -> str | None:  # noqa: N802 - Mininet's name
        return self.net[self.node].IP(self.index)

    def MAC(self) -> str | None:  # noqa: N802
        return self.net[self.node].MAC(self.index)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class NetLink:
    """A link of the net, as Mininet's Link: `intf1` and `intf2`, its
    ends (addLink's node1 and node2), each with config()."""

    def __init__(self, net: Mininet, node1: str, node2: str, index1: int, index2: int):
        self.intf1 = IntfHandle(net, node1, index1)
        self.intf2 = IntfHandle(net, node2, index2)

    def other(self, node: str) -> str:
        return self.intf2.node if node == self.intf1.node else self.intf1.node

    def __str__(self) -> str:
        return f"{self.intf1.name}<->{self.intf2.name}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


def _index(intf: object) -> int:
    """An interface as Mininet names it (h1-eth0, eth0, 0) as its index."""
    text = str(intf)
    digits = text.rsplit("eth", 1)[-1]
    try:
        return int(digits)
    except ValueError:
        raise ArgumentError(caller_location(), f"interface {intf!r}: want a name like "
                                               "h1-eth0") from None


class Mininet:
    """Mininet(topo=..., link=TCLink, ...) on selena. Options that would
    change the meaning are refused (REFUSED), harmless ones ignored (IGNORED);
    selena's own (tdf=10, out=...) go to the Experiment."""

    def __init__(self, topo: Topo | None = None, switch: object = None, host: object = None,
                 controller: object = None, link: object = None, build: bool = True,
                 ipBase: str = "10.0.0.0/8", autoSetMacs: bool = False,  # noqa: N803
                 autoStaticArp: bool = False, **options: Any) -> None:  # noqa: N803
        where = caller_location()
        for key in options:
            if key in REFUSED:
                raise ArgumentError(where, f"Mininet({key}=...) is not supported: "
                                           f"{REFUSED[key]}")
            if key not in IGNORED and key not in SELENA:
                raise ArgumentError(where, f"Mininet(): unknown option {key}= (selena takes "
                                           f"Mininet's topo, switch, host, controller, link, "
                                           f"ipBase, autoSetMacs, autoStaticArp, build and "
                                           f"its own "
                                           f"{', '.join(SELENA[:3])}...)")
        if topo is not None and not isinstance(topo, Topo):
            raise ArgumentError(where, f"Mininet(topo=...) must be a Topo, not "
                                       f"{type(topo).__name__}")
        _check_class(switch, mn_node.SWITCHES, "switch", where)
        _check_class(host, mn_node.HOSTS, "host", where)
        _check_class(link, (Link, TCLink), "link", where)
        _check_controller(controller, where)
        # custom(cls, **params)'s params, checked here as the options they become.
        self.classes = {"host": host, "switch": switch, "link": link}
        _check_class_params(self.classes, where)
        self.topo = topo if topo is not None else Topo()
        self.ipBase = ipBase
        self.autoSetMacs = autoSetMacs
        self.autoStaticArp = autoStaticArp
        self.name = type(self.topo).__name__.lower().removesuffix("topo") or "mininet"
        self.options = {k: v for k, v in options.items() if k in SELENA}
        self.where = where
        self.exp: Any = None
        self.session: Any = None
        self.sent: dict[str, SentCommand] = {}    # node -> its sendCmd's command, until read
        self.topology: Any = None
        self.built = False
        # As Mininet's: a net without a topo is built by start() (or build()),
        # after its addHost/addSwitch/addLink calls (Mininet's emptynet.py).
        if build and topo is not None:
            self.build()

    # -- before start --------------------------------------------------------------

    def addHost(self, name: str, **opts: object) -> HostHandle:  # noqa: N802
        self._not_built("addHost")
        self.topo.addHost(name, **opts)
        return HostHandle(self, name)

    def addSwitch(self, name: str, **opts: object) -> SwitchHandle:  # noqa: N802
        self._not_built("addSwitch")
        self.topo.addSwitch(name, **opts)
        return SwitchHandle(self, name)

    def addController(self, *args: object, **opts: object) -> None:  # noqa: N802
        """Accepted: selena's switches are standalone learning bridges, as
        Mininet's default controller makes them."""

    def addLink(self, node1: object, node2: object, port1: int | None = None,  # noqa: N802
                port2: int | None = None, **opts: object) -> NetLink:
        """A link, returned as Mininet returns it: its intf1 and intf2
        (config() them once the net is started)."""
        self._not_built("addLink")
        made = self.topo._links[self.topo.addLink(str(node1), str(node2), port1, port2,
                                                  **opts)]
        # As the topology numbers them: a switch's port p is its interface p-1.
        index1, index2 = (port - 1 if self.topo.isSwitch(end) else port
                          for end, port in ((made.a, made.port1), (made.b, made.port2)))
        return NetLink(self, made.a, made.b, index1, index2)

    def _not_built(self, what: str) -> None:
        if self.built:
            raise ArgumentError(caller_location(), f"{what}: the net is built already; "
                                                   "add nodes to a Mininet(build=False) or "
                                                   "to its Topo before build()")

    def build(self) -> None:
        """The selena Topology and its Experiment (nothing is created yet)."""
        from selena.experiment import Experiment

        if self.built:
            return
        self.topology = to_topology(self.topo, self.name, ip_base=self.ipBase,
                                    auto_macs=self.autoSetMacs, classes=self.classes)
        if self.autoStaticArp:
            self.topology.static_arp_between_hosts()
        self.exp = Experiment(self.topology, **self.options)
        self.built = True

    # -- the lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Validate, deploy and wait for every guest (selena's Experiment)."""
        from selena.session import Session

        self.build()
        if self.session is not None:
            raise ExperimentError(f"net {self.name} is started already")
        output(f"*** Starting {len(self.hosts)} hosts and {len(self.switches)} switches "
               f"(selena, TDF {self.exp.tdf:g})\n")
        self.exp.deploy()
        _LIVE.add(self)
        self.session = Session(self.exp)

    def stop(self) -> None:
        """Tear everything down (and write the results bundle if out= was
        given). Safe to call twice."""
        _LIVE.discard(self)
        if self.exp is not None and self.session is not None:
            output("*** Stopping the experiment\n")
            self.session = None
            self.exp.close()

    def __enter__(self) -> Mininet:
        self.start()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        _LIVE.discard(self)
        if self.exp is not None and self.session is not None:
            self.session = None
            self.exp.close(exc)

    def __getattr__(self, name: str) -> Any:
        # Only names found nowhere else: Mininet's beyond selena's (net.monitor, ...).
        if name.startswith("_"):
            raise AttributeError(name)
        raise _missing("net", name, type(self))

    def _started(self, what: str) -> Any:
        if self.session is None:
            raise ExperimentError(f"{what}: the net is not started (call net.start() first)")
        return self.exp

    def _built(self, what: str) -> Any:
        """The built net's selena Topology (its interfaces are numbered by then)."""
        if not self.built:
            raise ExperimentError(f"{what}: the net is not built yet (net.build() or "
                                  "net.start() first)")
        return self.topology

    def linksBetween(self, node1: object, node2: object) -> list[NetLink]:  # noqa: N802
        """The links joining two nodes, each with node1's end as intf1."""
        a, b = str(node1), str(node2)
        self._handle(a), self._handle(b)    # unknown names: one line naming the nodes
        found = []
        for link in self._built("linksBetween").links:
            if {link.a.node, link.b.node} == {a, b} and a != b:
                ends = (link.a, link.b) if link.a.node == a else (link.b, link.a)
                found.append(NetLink(self, a, b, ends[0].iface, ends[1].iface))
        return found

    # -- nodes ---------------------------------------------------------------------

    def _handle(self, name: str) -> NodeHandle:
        if not isinstance(name, str) or not self.topo._items.get(name):
            have = f"have {', '.join(self.topo.nodes())}" if self.topo.nodes() else \
                "it has no nodes: addHost or addSwitch them before build()"
            raise ScenarioError(f"no node named {name!r} in net {self.name} ({have})")
        return (SwitchHandle if self.topo.isSwitch(name) else HostHandle)(self, name)

    def get(self, *names: str) -> Any:
        """One node for one name, a list for several (Mininet's get)."""
        found = [self._handle(n) for n in names]
        return found[0] if len(found) == 1 else found

    getNodeByName = get  # noqa: N815 - Mininet's name

    def __getitem__(self, name: str) -> NodeHandle:
        return self._handle(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.topo._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.topo.nodes())

    def __len__(self) -> int:
        return len(self.topo.nodes())

    def keys(self) -> list[str]:
        return self.topo.nodes()

    def values(self) -> list[NodeHandle]:
        return [self._handle(n) for n in self.topo.nodes()]

    def items(self) -> list[tuple[str, NodeHandle]]:
        return [(n, self._handle(n)) for n in self.topo.nodes()]

    @property
    def nameToNode(self) -> dict[str, NodeHandle]:  # noqa: N802 - Mininet's name
        return dict(self.items())

    @property
    def hosts(self) -> list[NodeHandle]:
        return [self._handle(n) for n in self.topo.hosts()]

    @property
    def switches(self) -> list[NodeHandle]:
        return [self._handle(n) for n in self.topo.switches()]

    @property
    def controllers(self) -> list[NodeHandle]:
        return []

    # -- tests ---------------------------------------------------------------------

    def pingAll(self, timeout: float | None = None) -> float:  # noqa: N802
        """Every host pings every other once; prints Mininet's lines and
        returns the dropped percentage."""
        return self.ping(None, timeout)

    def pingPair(self) -> float:  # noqa: N802
        """The first two hosts ping each other (Mininet's pingPair)."""
        return self.ping(self.hosts[:2])

    def waitConnected(self, timeout: float | None = None,  # noqa: N802
                      delay: float = 0.5) -> bool:
        """True: start() has waited for every guest and switch already."""
        self._started("waitConnected")
        return True

    def ping(self, hosts: list[NodeHandle] | None = None, timeout: float | None = None) -> float:
        result = self._ping("pingAll", hosts, timeout, full=False)
        output(result.results_line() + "\n")
        return result.dropped_percent

    def pingFull(self, hosts: list[NodeHandle] | None = None,  # noqa: N802
                 timeout: float | None = None) -> list[tuple[NodeHandle, NodeHandle,
                                                               tuple[int, int, float, float,
                                                                     float, float]]]:
        """Mininet's pingFull: each pair's (src, dst, (sent, received, rtt
        min, avg, max, mdev)), one ping each, round trips in the guests'
        virtual ms; prints Mininet's lines."""
        result = self._ping("pingFull", hosts, timeout, full=True)
        for line in result.full_lines():
            output(line + "\n")
        outputs = []
        for src, dst, ok in result.pairs:
            rtt = result.rtt_ms.get((src, dst), 0.0) if ok else 0.0
            outputs.append((self._handle(src), self._handle(dst),
                            (1, int(ok), rtt, rtt, rtt, 0.0)))
        return outputs

    def pingAllFull(self, timeout: float | None = None) -> list[Any]:  # noqa: N802
        return self.pingFull(timeout=timeout)

    def pingPairFull(self) -> list[Any]:  # noqa: N802
        return self.pingFull(self.hosts[:2])

    def _ping(self, what: str, hosts: list[NodeHandle] | None, timeout: float | None,
              full: bool) -> Any:
        from selena.session import PING_HEADER

        self._started(what)
        output(PING_HEADER + "\n")
        result = self.session.pingall(timeout=1.0 if timeout is None else
                                      _seconds(timeout, f"{what}(timeout=...)"),
                                      hosts=None if hosts is None else {str(h) for h in hosts},
                                      full=full)
        for line in result.lines():
            output(line + " \n")
        return result

    def iperf(self, hosts: tuple[NodeHandle, NodeHandle] | list[NodeHandle] | None = None,
              l4Type: str = "TCP", udpBw: str = "10M", fmt: str | None = None,  # noqa: N803
              seconds: float = 5, port: int = 5001) -> list[str]:
        """Throughput from the first host to the second (default: the first
        and last host); returns Mininet's ['server rate', 'client rate'], and
        for l4Type='UDP' (at udpBw) ['udpBw', 'server rate', 'client rate']."""
        self._started("iperf")
        if l4Type not in ("TCP", "UDP"):
            raise ArgumentError(caller_location(), f"iperf(l4Type={l4Type!r}): want 'TCP' "
                                                   "or 'UDP'")
        from selena.session import rate_text, udp_rate

        try:
            udp_bps = udp_rate(udpBw) if l4Type == "UDP" else None
        except ScenarioError:
            raise ArgumentError(caller_location(), f"iperf(udpBw={udpBw!r}): want a rate "
                                                   "above zero such as '10M'") from None
        if hosts is None:
            all_hosts = self.hosts
            if len(all_hosts) < 2:
                raise ScenarioError("iperf: the net needs two hosts")
            hosts = (all_hosts[0], all_hosts[-1])
        client, server = (str(h) for h in hosts)
        output(f"*** Iperf: testing {l4Type} bandwidth between {client} and {server} \n")
        received, sent = self.session.iperf_bps(client, server,
                                                _seconds(seconds, "iperf(seconds=...)"),
                                                udp_bps=udp_bps)
        result = [rate_text(received), rate_text(sent)]
        if udp_bps is not None:
            result.insert(0, udpBw)
        output(f"*** Results: {result}\n")
        return result

    def iperfUdp(self, udpBw: str = "10M") -> list[str]:  # noqa: N802, N803 - Mininet's
        """UDP at udpBw from the first host to the last (mn --test iperfudp)."""
        return self.iperf(l4Type="UDP", udpBw=udpBw)

    def staticArp(self) -> None:  # noqa: N802
        """Every host a permanent ARP entry for every other (Mininet's
        staticArp): before start() set as the guests boot (as
        Mininet(autoStaticArp=True)), on a started net at once in each host."""
        if self.session is not None:
            self.session.static_arp()
        elif not self.autoStaticArp:
            self.autoStaticArp = True
            if self.built:
                self.topology.static_arp_between_hosts()

    def configLinkStatus(self, src: object, dst: object, status: str) -> None:  # noqa: N802
        """Take the link between two nodes 'down' or bring it 'up'."""
        self._started("configLinkStatus")
        if status not in ("up", "down"):
            raise ArgumentError(caller_location(), f"configLinkStatus: status must be 'up' or "
                                                   f"'down', not {status!r}")
        self.session.link(str(src), str(dst), status == "up")

    def interact(self) -> None:
        """Start, open the selena> prompt (Mininet's CLI), stop."""
        from selena.mininet.cli import CLI

        self.start()
        try:
            CLI(self)
        finally:
            self.stop()


def _check_class(value: object, allowed: tuple[type, ...], what: str, where: str | None) -> None:
    if value is None:
        return
    cls = value if isinstance(value, type) else (
        value.cls if isinstance(value, Customized) else getattr(value, "func", type(value)))
    if isinstance(cls, type) and issubclass(cls, allowed):
        return
    names = ", ".join(c.__name__ for c in allowed)
    raise ArgumentError(where, f"Mininet({what}={getattr(cls, '__name__', cls)}) is not "
                               f"supported: selena's {what}s behave as {names}")


def _check_class_params(classes: dict[str, object], where: str | None) -> None:
    """The params of custom() (or functools.partial) classes given to
    Mininet(), refused as the node or link options they become would be."""
    checks = {"host": _host_options, "switch": _switch_options}
    for what, cls in classes.items():
        params = with_class_params({}, cls)
        if not params:
            continue
        call = f"Mininet({what}={getattr(cls, '__name__', 'custom(...)')})"
        try:
            if what == "link":
                link_options(params, call)
            else:
                checks[what](params, call)
        except ArgumentError as exc:
            raise ArgumentError(where, exc.message) from None


def _check_controller(value: object, where: str | None) -> None:
    if value is None:
        return
    cls = value if isinstance(value, type) else type(value)
    if isinstance(cls, type) and issubclass(cls, mn_node.RemoteController):
        raise ArgumentError(where, "Mininet(controller=RemoteController) is not supported: "
                                   "selena's switches are standalone learning bridges; "
                                   "for OpenFlow use selena's Topology.add_controller")
    if isinstance(cls, type) and issubclass(cls, mn_node.Controller):
        return
    raise ArgumentError(where, f"Mininet(controller={value!r}) is not supported")


__all__ = ["Mininet", "NodeHandle", "HostHandle", "SwitchHandle", "natural"]


def _seconds(value: object, what: str) -> float:
    """Mininet takes "1" as well as 1; anything else is one line at the
    user's call, not float()'s ValueError."""
    try:
        return float(value)         # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ArgumentError(caller_location(), f"{what}: {value!r} is not a number of "
                                               "seconds") from None
