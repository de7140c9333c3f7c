"""The interface every backend offers, so the CLI and tests do not depend on xl.

A backend turns a Plan into running guests and removes exactly what it made.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from selena.plan import Plan


class Backend(abc.ABC):
    @abc.abstractmethod
    def deploy(self, plan: Plan, progress: Callable[[str], None] | None = None,
               warm: bool = False) -> Any:
        """Create paused (or reuse pooled guests when warm), set TDF, wire,
        shape, then unpause all; roll back on failure."""

    @abc.abstractmethod
    def destroy(self, experiment: str, pool: bool = False) -> None:
        """Remove one experiment's recorded and still-tagged objects (its guests
        into the warm pool when pool=True)."""

    @abc.abstractmethod
    def clean(self) -> list[str]:
        """Remove every selena-tagged object on this host; return their names."""

    @abc.abstractmethod
    def status(self) -> list[dict[str, object]]:
        """The deployed experiments, as plain data."""

    @abc.abstractmethod
    def host_free_mb(self) -> int | None:
        """Memory the host can still give to guests, or None when unknown."""
