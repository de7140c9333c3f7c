"""Backends that turn a plan into running guests, chosen by name: `xl` now;
another (XenAPI) plugs in by adding an entry here, without touching the CLI,
the lifecycle or the engine."""

from __future__ import annotations

import importlib
from typing import Any

from selena.backends.base import Backend, Deployment
from selena.errors import BackendError

BACKENDS = {"xl": "selena.backends.xl:XlBackend",
            "mininet": "selena.backends.mininet:MininetBackend"}
DEFAULT_BACKEND = "xl"


def get_backend(name: str = DEFAULT_BACKEND, **options: Any) -> Backend:
    """A backend by name; options go to its constructor (runner, xenstore, ...)."""
    target = BACKENDS.get(name)
    if target is None:
        raise BackendError(f"unknown backend {name!r} (have: {', '.join(sorted(BACKENDS))})")
    module, _, cls = target.partition(":")
    backend = getattr(importlib.import_module(module), cls)(**options)
    assert isinstance(backend, Backend)
    return backend


__all__ = ["BACKENDS", "DEFAULT_BACKEND", "Backend", "Deployment", "get_backend"]
