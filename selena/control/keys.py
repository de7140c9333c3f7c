"""The Xenstore keys Dom0 creates for a guest before it first runs
(guest-agent/PROTOCOL.md, "Keys"): values and permissions."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from selena.control.channel import base_path
from selena.control.protocol import FEATURES, PROTOCOL_VERSION

# Bytes of the seed Dom0 gives each guest's random number generator.
SEED_BYTES = 32


@dataclass(frozen=True)
class Key:
    path: str
    value: str
    perms: tuple[str, ...]      # xenstore-chmod / XS_SET_PERMS form: owner first
    # This many fresh random bytes (hex) as the value, drawn when the key is
    # written, never kept in a plan or a log.
    random_bytes: int = 0

    def fresh_value(self) -> str:
        return secrets.token_hex(self.random_bytes) if self.random_bytes else self.value


def control_keys(domid: int | str, experiment: str, net: str = "") -> list[Key]:
    """Dom0-owned keys the guest may only read, then the guest's own two
    directories, which no other unprivileged domain can touch. (`domid` may
    be a shell placeholder when `selena plan` prints the keys.)"""
    base = base_path(domid)
    dom0_owned = ("n0", f"r{domid}")
    guest_owned = (f"n{domid}",)
    # `version` comes last: a running agent (a guest reused from the warm pool)
    # starts its new session when it appears, so everything else must be ready.
    return [
        Key(base, "", dom0_owned),
        Key(f"{base}/experiment", experiment, dom0_owned),
        Key(f"{base}/net", net, dom0_owned),
        # The agent credits it to the kernel's pool (PROTOCOL.md, "Keys").
        Key(f"{base}/seed", "", dom0_owned, random_bytes=SEED_BYTES),
        Key(f"{base}/cmd", "", dom0_owned),
        Key(f"{base}/agent", "", guest_owned),
        Key(f"{base}/out", "", guest_owned),
        Key(f"{base}/features", " ".join(FEATURES), dom0_owned),
        Key(f"{base}/version", str(PROTOCOL_VERSION), dom0_owned),
    ]
