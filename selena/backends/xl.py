"""The xl backend: creates a plan's guests paused, sets their TDF, wires and
shapes their links in Dom0, then unpauses them all together.

Everything created is tagged: domains by the `selena-` name prefix and the
Xenstore marker /local/domain/<domid>/selena/experiment, OVS bridges by
external_ids:selena-experiment, Linux bridges by the state file. Each object is
recorded in the experiment's state file as soon as it exists, so a deploy that
fails (or is interrupted) is rolled back, and `destroy`/`clean` remove exactly
what selena created and nothing else.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from selena.backends.base import Backend
from selena.control.keys import control_keys, key_commands
from selena.errors import BackendError, CommandError
from selena.plan import GuestPlan, Plan, pool_key
from selena.runner import Runner

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = Path("/run/selena")
MARKER = "selena/experiment"
# Warm pool (SELENA's warm start): idle guests named selena-pool-<key>-<n>,
# paused, with no vifs, still tagged so `clean` removes them.
POOL_PREFIX = "selena-pool-"
POOL_MARKER = "pool"
OFFLOADS = ("tso", "gso", "gro", "tx", "rx", "sg")


@dataclass
class DeployState:
    experiment: str
    tdf: float
    domains: dict[str, int] = field(default_factory=dict)     # domain name -> domid
    bridges: dict[str, str] = field(default_factory=dict)     # bridge -> "ovs" | "linux"
    pool_keys: dict[str, str] = field(default_factory=dict)   # domain name -> plan.pool_key

    @classmethod
    def load(cls, path: Path) -> DeployState:
        data = json.loads(path.read_text())
        return cls(data["experiment"], data["tdf"], dict(data["domains"]),
                   dict(data["bridges"]), dict(data.get("pool_keys", {})))


class XlBackend(Backend):
    def __init__(self, runner: Runner | None = None, state_dir: Path = DEFAULT_STATE_DIR,
                 offloads: bool = False):
        self.runner = runner or Runner()
        self.state_dir = state_dir
        self.offloads = offloads

    # -- deploy --------------------------------------------------------------------

    def deploy(self, plan: Plan, progress: Callable[[str], None] | None = None,
               warm: bool = False) -> DeployState:
        """warm: reuse guests of the same template, memory and vCPUs from the
        pool; their interfaces and bridges are rebuilt like new ones."""
        say = progress or (lambda msg: log.info("%s", msg))
        pool = self._pooled() if warm else {}
        if self._state_path(plan.experiment).exists():
            say(f"experiment {plan.experiment} exists: destroying it first")
            self.destroy(plan.experiment)
        state = DeployState(plan.experiment, plan.tdf)
        self._save(state)
        try:
            for seg in plan.segments:
                self._create_bridge(state, seg.bridge, seg.kind)
            for n, guest in enumerate(plan.guests, start=1):
                idle = pool.get(pool_key(guest), [])
                if idle:
                    self._reuse_guest(state, plan, guest, *idle.pop())
                    say(f"reused a pooled guest as {guest.domain_name} "
                        f"({n} of {len(plan.guests)}, paused)")
                else:
                    self._create_guest(state, plan, guest)
                    say(f"created {guest.domain_name} ({n} of {len(plan.guests)}, paused)")
            for command in plan.shaping:
                self.runner.run(command)
            if not self.offloads:
                for guest in plan.guests:
                    for vif in guest.vifs:
                        self.runner.run(["ethtool", "-K", vif.name,
                                         *[x for o in OFFLOADS for x in (o, "off")]],
                                        check=False)
            for domid in state.domains.values():
                self.runner.run(["xl", "unpause", str(domid)])
            say(f"{len(state.domains)} of {len(plan.guests)} guests running at TDF {plan.tdf:g}")
        except BaseException:
            say(f"deploy of {plan.experiment} failed: removing what it created")
            self._teardown(state)
            raise
        return state

    def _create_bridge(self, state: DeployState, bridge: str, kind: str) -> None:
        if kind == "ovs":
            self.runner.run(["ovs-vsctl", "add-br", bridge, "--", "set", "bridge", bridge,
                             f"external_ids:selena-experiment={state.experiment}"])
        else:
            self.runner.run(["ip", "link", "add", bridge, "type", "bridge"])
            self.runner.run(["ip", "link", "set", bridge, "up"])
        state.bridges[bridge] = kind
        self._save(state)

    def _create_guest(self, state: DeployState, plan: Plan, guest: GuestPlan) -> None:
        cfg = self.state_dir / plan.experiment / f"{guest.node}.cfg"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(plan.xl_config(guest))
        self.runner.run(["xl", "create", "-p", "-q", str(cfg)])
        out = self.runner.run(["xl", "domid", guest.domain_name]).stdout.strip()
        try:
            domid = int(out)
        except ValueError:
            raise BackendError(f"xl domid {guest.domain_name} printed {out!r}") from None
        state.domains[guest.domain_name] = domid
        state.pool_keys[guest.domain_name] = pool_key(guest)
        self._save(state)
        self._prepare(state, plan, guest, domid)

    def _prepare(self, state: DeployState, plan: Plan, guest: GuestPlan, domid: int) -> None:
        # The experiment marker and the agent's control keys, before it runs.
        for command in key_commands(control_keys(domid, state.experiment, guest.net)):
            self.runner.run(command)
        self.runner.run(["selena-tdf", "set", str(domid), f"{plan.tdf:g}"])

    def _reuse_guest(self, state: DeployState, plan: Plan, guest: GuestPlan,
                     pooled_name: str, domid: int) -> None:
        """A pooled guest (paused, no vifs) becomes this plan's guest."""
        self.runner.run(["xl", "rename", pooled_name, guest.domain_name])
        state.domains[guest.domain_name] = domid
        state.pool_keys[guest.domain_name] = pool_key(guest)
        self._save(state)
        for vif in guest.vifs:
            self.runner.run(["xl", "network-attach", str(domid), f"mac={vif.mac}",
                             f"bridge={vif.bridge}", f"script={vif.script}",
                             f"vifname={vif.name}"])
        if guest.cpus:
            self.runner.run(["xl", "vcpu-pin", str(domid), "all", guest.cpus])
        self._prepare(state, plan, guest, domid)

    def _pooled(self) -> dict[str, list[tuple[str, int]]]:
        """Idle pooled guests by pool key: [(domain name, domid)]."""
        pool: dict[str, list[tuple[str, int]]] = {}
        for name, domid in self._tagged_domains().items():
            if name.startswith(POOL_PREFIX):
                key = name[len(POOL_PREFIX):].rsplit("-", 1)[0]
                pool.setdefault(key, []).append((name, domid))
        for idle in pool.values():
            idle.sort(reverse=True)     # pop() takes the lowest-numbered
        return pool

    # -- boot progress -------------------------------------------------------------

    def wait_up(self, state: DeployState, timeout: float,
                progress: Callable[[str], None] | None = None, poll: float = 1.0,
                clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> list[str]:
        """Wait until every guest's kernel has connected its first vif.

        The netfront driver setting its Xenstore state to 4 (Connected) is the
        earliest sign, visible from Dom0 for any guest OS and without the guest
        agent, that a guest has booted. Returns the guests not up by the timeout.
        """
        say = progress or (lambda msg: log.info("%s", msg))
        pending = dict(state.domains)
        total = len(pending)
        deadline = clock() + timeout
        while pending:
            for name, domid in list(pending.items()):
                out = self.runner.run(
                    ["xenstore-read", f"/local/domain/{domid}/device/vif/0/state"],
                    check=False)
                if out.returncode == 0 and out.stdout.strip() == "4":
                    del pending[name]
                    say(f"{name} up ({total - len(pending)} of {total} up)")
            if not pending or clock() >= deadline:
                break
            sleep(poll)
        return sorted(pending)

    # -- freeze / thaw -------------------------------------------------------------

    def freeze(self, state: DeployState) -> None:
        """Stop the virtual time of every guest of the experiment at one instant
        (one `selena-tdf freeze` of them all): they are paused, their clocks and
        timers stand still, and `xl unpause` cannot run them."""
        self.runner.run(["selena-tdf", "freeze", *self._own_domids(state)])

    def thaw(self, state: DeployState) -> None:
        """Restart the virtual time of every guest at one instant: no virtual
        time is lost, and the guests stay as far apart in time as they were."""
        self.runner.run(["selena-tdf", "thaw", *self._own_domids(state)])

    def _own_domids(self, state: DeployState) -> list[str]:
        domids = [str(d) for name, d in sorted(state.domains.items())
                  if self._is_ours(name, d, state.experiment)]
        if not domids:
            raise BackendError(f"experiment {state.experiment} has no running guests")
        return domids

    def load(self, experiment: str) -> DeployState:
        """The recorded state of a deployed experiment."""
        path = self._state_path(experiment)
        if not path.exists():
            raise BackendError(f"no experiment named {experiment!r} is deployed")
        return DeployState.load(path)

    # -- teardown ------------------------------------------------------------------

    def destroy(self, experiment: str, pool: bool = False) -> None:
        """Remove an experiment; with pool=True its guests go to the warm pool
        (vifs detached, control keys removed, paused) instead of being destroyed."""
        path = self._state_path(experiment)
        if not path.exists():
            raise BackendError(f"no experiment named {experiment!r} is deployed")
        self._teardown(DeployState.load(path), pool=pool)

    def clean(self) -> list[str]:
        """Remove every selena-tagged object on this host; returns what was removed."""
        removed: list[str] = []
        experiments = {p.stem for p in self.state_dir.glob("*.json")}
        for exp in sorted(experiments):
            state = DeployState.load(self._state_path(exp))
            removed += list(state.domains) + list(state.bridges)
            self._teardown(state)
        # Objects whose state file was lost (crash): trust only the tags.
        for name, domid in self._tagged_domains().items():
            self._destroy_domain(name, domid, None)
            removed.append(name)
        for bridge in self._tagged_ovs_bridges():
            self.runner.run(["ovs-vsctl", "--if-exists", "del-br", bridge])
            removed.append(bridge)
        return removed

    def _teardown(self, state: DeployState, pool: bool = False) -> None:
        errors: list[str] = []
        for name, domid in list(state.domains.items()):
            try:
                key = state.pool_keys.get(name)
                if pool and key and self._is_ours(name, domid, state.experiment):
                    self._release_to_pool(name, domid, key)
                else:
                    self._destroy_domain(name, domid, state.experiment)
                del state.domains[name]
            except CommandError as exc:
                errors.append(str(exc))
        for bridge, kind in list(state.bridges.items()):
            try:
                if kind == "ovs":
                    if self._ovs_tag(bridge) == state.experiment:
                        self.runner.run(["ovs-vsctl", "--if-exists", "del-br", bridge])
                else:
                    self.runner.run(["ip", "link", "del", bridge], check=False)
                del state.bridges[bridge]
            except CommandError as exc:
                errors.append(str(exc))
        if errors:
            # Keep what could not be removed on record, so destroy can be retried.
            self._save(state)
            raise BackendError("cleanup incomplete:\n  " + "\n  ".join(errors))
        self._state_path(state.experiment).unlink(missing_ok=True)

    def _is_ours(self, name: str, domid: int, experiment: str | None) -> bool:
        """Is the domain still the one selena created (name, domid and marker)?"""
        if not name.startswith("selena-"):
            return False
        found = self.runner.run(["xl", "domid", name], check=False)
        if found.returncode != 0 or found.stdout.strip() != str(domid):
            return False  # gone, or the name now belongs to another domain
        marker = self.runner.run(["xenstore-read", f"/local/domain/{domid}/{MARKER}"],
                                 check=False)
        if marker.returncode != 0:
            return False
        return experiment is None or marker.stdout.strip() == experiment

    def _destroy_domain(self, name: str, domid: int, experiment: str | None) -> None:
        """Destroy a domain only if it still is the one selena created."""
        if self._is_ours(name, domid, experiment):
            self.runner.run(["xl", "destroy", str(domid)])

    def _release_to_pool(self, name: str, domid: int, key: str) -> None:
        # Detach while the guest runs: its netfront must acknowledge the removal.
        listing = self.runner.run(["xl", "network-list", str(domid)]).stdout.splitlines()
        for line in listing[1:]:
            devid = line.split()[0] if line.split() else ""
            if devid.isdigit():
                self.runner.run(["xl", "network-detach", str(domid), devid])
        self.runner.run(["xenstore-rm", f"/local/domain/{domid}/selena"])
        self.runner.run(["xenstore-write", f"/local/domain/{domid}/{MARKER}", POOL_MARKER])
        self.runner.run(["xl", "pause", str(domid)])
        taken = {n for n in self._tagged_domains() if n.startswith(f"{POOL_PREFIX}{key}-")}
        index = next(i for i in range(len(taken) + 1) if f"{POOL_PREFIX}{key}-{i}" not in taken)
        self.runner.run(["xl", "rename", name, f"{POOL_PREFIX}{key}-{index}"])

    def _tagged_domains(self) -> dict[str, int]:
        listing = self.runner.run(["xl", "list"]).stdout.splitlines()[1:]
        tagged = {}
        for line in listing:
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("selena-") and parts[1].isdigit():
                domid = int(parts[1])
                marker = self.runner.run(["xenstore-read", f"/local/domain/{domid}/{MARKER}"],
                                         check=False)
                if marker.returncode == 0:
                    tagged[parts[0]] = domid
        return tagged

    def _tagged_ovs_bridges(self) -> list[str]:
        # Ask each bridge for its tag rather than trusting `find` semantics for
        # a missing map key: a foreign bridge must never look tagged.
        out = self.runner.run(["ovs-vsctl", "list-br"], check=False)
        if out.returncode != 0:
            return []
        return [br for br in (ln.strip() for ln in out.stdout.splitlines())
                if br and self._ovs_tag(br) is not None]

    def _ovs_tag(self, bridge: str) -> str | None:
        out = self.runner.run(["ovs-vsctl", "br-get-external-id", bridge,
                               "selena-experiment"], check=False)
        text = out.stdout.strip().strip('"') if out.returncode == 0 else ""
        return text or None

    # -- status --------------------------------------------------------------------

    def host_free_mb(self) -> int | None:
        """`xl info` free_memory (MB); None when xl is missing or does not say."""
        try:
            info = self.runner.run(["xl", "info"], check=False).stdout
        except CommandError:
            return None  # no xl on this host: nothing to check against
        for line in info.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "free_memory" and value.strip().isdigit():
                return int(value.strip())
        return None

    def status(self) -> list[dict[str, object]]:
        return [asdict(DeployState.load(p)) for p in sorted(self.state_dir.glob("*.json"))]

    def _state_path(self, experiment: str) -> Path:
        return self.state_dir / f"{experiment}.json"

    def _save(self, state: DeployState) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_path(state.experiment).with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=1))
        tmp.replace(self._state_path(state.experiment))
