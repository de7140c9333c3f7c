"""The Xenstore keys Dom0 creates for a guest before it first runs
(guest-agent/PROTOCOL.md, "Keys"): values and permissions."""

from __future__ import annotations

from dataclasses import dataclass

from selena.control.channel import base_path
from selena.control.protocol import PROTOCOL_VERSION


@dataclass(frozen=True)
class Key:
    path: str
    value: str
    perms: tuple[str, ...]      # xenstore-chmod / XS_SET_PERMS form: owner first


def control_keys(domid: int, experiment: str, net: str = "") -> list[Key]:
    """Dom0-owned keys the guest may only read, then the guest's own two
    directories, which no other unprivileged domain can touch."""
    base = base_path(domid)
    dom0_owned = ("n0", f"r{domid}")
    guest_owned = (f"n{domid}",)
    # `version` comes last: a running agent (a guest reused from the warm pool)
    # starts its new session when it appears, so everything else must be ready.
    return [
        Key(base, "", dom0_owned),
        Key(f"{base}/experiment", experiment, dom0_owned),
        Key(f"{base}/net", net, dom0_owned),
        Key(f"{base}/cmd", "", dom0_owned),
        Key(f"{base}/agent", "", guest_owned),
        Key(f"{base}/out", "", guest_owned),
        Key(f"{base}/version", str(PROTOCOL_VERSION), dom0_owned),
    ]


def key_commands(keys: list[Key]) -> list[list[str]]:
    """The same keys as xenstore-write/xenstore-chmod commands for the runner,
    the last key written only once all others have their permissions."""
    *rest, last = keys
    write = ["xenstore-write"]
    for key in rest:
        write += [key.path, key.value]
    return ([write] + [["xenstore-chmod", key.path, *key.perms] for key in rest]
            + [["xenstore-write", last.path, last.value],
               ["xenstore-chmod", last.path, *last.perms]])
