"""The interface every backend offers, so the experiment lifecycle, the CLI
and tests do not depend on xl.

A backend turns a Plan into running guests, gives the lifecycle a command
channel into them (selena.control.interface.CommandChannel), injects
faults, and removes exactly what it made. How it reaches its guests (Xen's
Xenstore, Mininet's namespaces) is its own business. Backends are chosen
by name (`selena.backends.get_backend("xl")`, `--backend xl`).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from selena.capture import CaptureSource
from selena.control.interface import DEFAULT_OUTPUT_CAP, CommandChannel
from selena.errors import BackendError
from selena.hostinfo import HostInfo
from selena.plan import Plan

if TYPE_CHECKING:
    from selena.model import Link

Progress = Callable[[str], None]
CAPTURE_REFUSED = ("the {name} backend cannot capture links (exp.capture, --capture); "
                   "run tcpdump -w inside a host instead")


@dataclass
class Deployment:
    """A running experiment as the lifecycle sees it."""

    experiment: str
    tdf: float
    domids: dict[str, int] = field(default_factory=dict)     # node -> domain id
    backend: str = ""


@dataclass
class QdiscStats:
    """Counters of the Dom0-side shaping qdiscs of one vif (summed over its
    qdiscs; backlog is the current queue)."""

    sent_packets: int = 0
    drops: int = 0
    overlimits: int = 0
    backlog_bytes: int = 0
    sent_bytes: int = 0         # bytes sent (the throughput signal)


@dataclass
class LoadSample:
    """One look at how busy the host is, for the fidelity monitor: cumulative
    CPU seconds of every Dom0 vCPU and of each guest's vCPUs (real time, as
    the hypervisor counts it), and the shaping qdiscs of every shaped vif."""

    real: float                                         # time.monotonic()
    dom0_vcpu_s: list[float] = field(default_factory=list)
    guest_vcpu_s: dict[str, list[float]] = field(default_factory=dict)     # node -> per vCPU
    qdiscs: dict[str, QdiscStats] = field(default_factory=dict)            # vif -> counters
    vif_nodes: dict[str, str] = field(default_factory=dict)                # vif -> node
    # vif -> its rate limit in real time (the link's rate / the TDF now)
    rates_bps: dict[str, float] = field(default_factory=dict)
    # vif -> its delay in real time (the link's delay x the TDF now)
    delays_s: dict[str, float] = field(default_factory=dict)
    # Taken at a resume: the interval that ends here held a pause (frozen
    # guests, idle Dom0) and is judged by nothing.
    after_pause: bool = False


@dataclass(frozen=True)
class Frame:
    """One frame seen on a Dom0-side interface."""

    t: float        # kernel timestamp, real seconds
    length: int     # bytes of the frame as a qdisc counts them (no FCS)
    key: bytes      # its first bytes: the same frame seen on another interface


@dataclass
class LinkCapture:
    """One window of frames through one shaped direction of a link, for the
    packet-spacing check: the frames that left its rate-limited qdisc, those
    that entered Dom0 toward it, and the shaping's real-time parameters."""

    vif: str
    label: str                  # "h1 eth0 -> h2 eth0"
    rate_bps: float             # the qdisc's real-time rate (link rate / TDF)
    delay_s: float              # its real-time one-way delay (netem below htb)
    departures: list[Frame] = field(default_factory=list)
    arrivals: list[Frame] = field(default_factory=list)
    dropped: int = 0            # frames the capture lost (its buffer was full)
    # Real time from which every arrival was captured: a departure with no
    # arrival in the window arrived before it (a queue longer than the window).
    started: float = 0.0


class Backend(abc.ABC):
    name: str = "?"
    dilates: bool = True        # guests perceive the TDF (False: real time only)
    guest_agents: bool = True   # nodes run selena's agent (guest shaping, switch set-up)
    captures_links: bool = False  # capture_links works (the packet-spacing check)
    link_capture: bool = False  # capture_source works (exp.capture, --capture)
    restarts_nodes: bool = False  # restart works (exp.node(N).restart(), `node N restart`)
    crashes_nodes: bool = True    # crash works (exp.node(N).crash(), `node N crash`)
    caps_cpu: bool = False        # set_cpu_share works (`node N cpu_share=0.25`)

    @abc.abstractmethod
    def command_channel(self, tdf: float,
                        output_cap: int = DEFAULT_OUTPUT_CAP) -> CommandChannel:
        """A new channel that runs commands in the nodes (closed by the
        caller), for nodes running at `tdf`; `output_cap` bytes of each
        command's stdout and of its stderr are kept."""

    @abc.abstractmethod
    def host_info(self) -> HostInfo:
        """CPUs, free memory and versions of the host (None where unknown)."""

    @abc.abstractmethod
    def render(self, plan: Plan) -> str:
        """Every command and configuration a deploy of `plan` would run or
        write, as a shell script, running none of them (`selena plan`)."""

    def preflight(self, plan: Plan) -> None:
        """Before anything is created: can this host run `plan` at all?
        Raises HostNotReady in one line (what is missing and its fix);
        backends with nothing to check accept every host."""
        return None

    @abc.abstractmethod
    def deploy(self, plan: Plan, progress: Progress | None = None,
               warm: bool = False, replace: bool = False) -> Deployment:
        """Create paused (or reuse pooled guests when warm), set TDF, wire,
        shape, then unpause all; on any failure remove what was created.
        An experiment of that name that exists raises ExperimentExists unless
        replace (then it is destroyed first, if no live run owns it)."""

    @abc.abstractmethod
    def wait_up(self, deployment: Deployment, timeout: float,
                progress: Progress | None = None) -> list[str]:
        """Wait (real seconds) for the guests to boot; return the nodes not up."""

    @abc.abstractmethod
    def set_tdf(self, experiment: str, tdf: float,
                progress: Progress | None = None) -> tuple[float, float]:
        """Change a running experiment's TDF everywhere the backend applies it
        (guests and link shaping), all or nothing; returns the monotonic real
        instants of the first and last guest change."""

    @abc.abstractmethod
    def freeze(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        """Stop every guest's virtual time at one real instant (guests paused,
        clocks and timers standing still); returns (virtual ns, real ns)."""

    @abc.abstractmethod
    def thaw(self, experiment: str, progress: Progress | None = None) -> tuple[int, int]:
        """Restart every guest's virtual time at one real instant, losing
        none; returns (virtual ns, real ns)."""

    def set_link(self, experiment: str, link: Link, up: bool,
                 progress: Progress | None = None) -> None:
        """Take one link of a running experiment down (nothing passes either
        way; its shaping is kept) or bring it back up."""
        raise BackendError(f"the {self.name} backend cannot take links down or up")

    def shape_link(self, experiment: str, link: Link,
                   progress: Progress | None = None) -> None:
        """Give one link of a running experiment the values `link` carries
        (rate, delay, jitter, loss, queue, in virtual terms), both directions,
        scaled by the current TDF and again by every later TDF change."""
        raise BackendError(f"the {self.name} backend cannot change a link's shaping "
                           "during a run")

    def set_cpu_share(self, experiment: str, node: str, share: float | None, vcpus: int,
                      progress: Progress | None = None) -> None:
        """Cap node's guest (of `vcpus` vCPUs) at `share` of the host's CPUs
        per virtual second from now on, following later TDF changes (None:
        lift its cap); refused before anything changes where Xen cannot."""
        raise BackendError(f"the {self.name} backend cannot change a node's CPU share")

    @abc.abstractmethod
    def crash(self, deployment: Deployment, node: str) -> None:
        """Fault injection: stop a node's guest at once, as a power failure would."""

    def restart(self, deployment: Deployment, node: str, plan: Plan,
                progress: Progress | None = None) -> int:
        """Stop a node's guest (if it still runs) and boot it again as
        deployed, at the experiment's current TDF with its links' current
        shaping; returns what the node now maps to (deployment.domids is
        updated). Commands of the old guest are the caller's to end."""
        raise BackendError(f"the {self.name} backend cannot restart a node")

    @abc.abstractmethod
    def destroy(self, experiment: str, pool: bool = False, force: bool = False) -> None:
        """Remove one experiment's recorded and still-tagged objects (its guests
        into the warm pool when pool=True). One whose run is still alive (in
        another process) raises ExperimentInUse unless force."""

    @abc.abstractmethod
    def clean(self, force: bool = False, progress: Progress | None = None) -> list[str]:
        """Remove every selena-tagged object on this host; return their names.
        Experiments whose run is still alive are skipped (said through
        `progress`) unless force. Raises CleanupError naming what could not be
        removed, after trying all."""

    def frozen(self, deployment: Deployment) -> bool:
        """Whether `selena pause` (freeze) left the experiment's guests frozen."""
        return False

    def deployed(self, experiment: str) -> Deployment:
        """A deployed experiment as any process finds it (each node's
        domain, the current TDF): BackendError if there is none."""
        raise BackendError(f"the {self.name} backend keeps no experiment past the process "
                           "that deployed it; use the xl backend")

    @abc.abstractmethod
    def status(self) -> list[dict[str, object]]:
        """The deployed experiments, as plain data (an `error` key for a state
        that cannot be read)."""

    def load_sample(self, experiment: str) -> LoadSample:
        """CPU and queue counters now (the fidelity monitor samples these)."""
        raise BackendError(f"the {self.name} backend cannot sample host load")

    def capture_links(self, experiment: str, seconds: float) -> list[LinkCapture]:
        """Frames through every rate-limited, jitter-free shaped link
        direction during `seconds` real seconds (the packet-spacing check)."""
        raise BackendError(f"the {self.name} backend cannot capture frames on its links")

    def capture_source(self, experiment: str, link: Link, node: str) -> CaptureSource:
        """The Dom0 interface on which `link` is captured at its end on
        `node` (exp.capture): every frame of the link, both ways, passes it."""
        raise BackendError(CAPTURE_REFUSED.format(name=self.name))

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections (the Xenstore connection, if this backend opened
        it) and the run locks of the experiments this object deployed: they
        stay deployed, and another process may now destroy them."""
