"""The topology model: plain dataclasses, no I/O, nothing about Xen."""

from selena.model.topology import (
    DEFAULT_TEMPLATES,
    Endpoint,
    Hub,
    Interface,
    Link,
    LinkOptions,
    Node,
    NodeKind,
    StaticArp,
    Topology,
    caller_location,
)

__all__ = ["DEFAULT_TEMPLATES", "Endpoint", "Hub", "Interface", "Link", "LinkOptions", "Node",
           "NodeKind", "StaticArp", "Topology", "caller_location"]
