"""Mininet's custom files (`mn --custom FILE --topo NAME,ARGS`), loaded
unchanged by `selena run|validate|plan|advise --custom FILE --topo NAME`.

While a custom file runs, `import mininet` and its submodules give
selena.mininet's (the shim): the file means what selena makes of Mininet's
API whether or not Mininet is installed, and an installed Mininet does not
take over. The previous `mininet` modules (none, or Mininet's own) are put
back afterwards, so nothing else in the process sees the shim.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from selena.errors import ScenarioError, ScenarioFileError
from selena.model import Topology
from selena.user_errors import user_error, user_frames

# mininet's module names and the selena modules that stand for them.
SHIM = {
    "mininet": "selena.mininet",
    "mininet.topo": "selena.mininet.topo",
    "mininet.topolib": "selena.mininet.topolib",
    "mininet.net": "selena.mininet.net",
    "mininet.node": "selena.mininet.node",
    "mininet.link": "selena.mininet.link",
    "mininet.log": "selena.mininet.log",
    "mininet.util": "selena.mininet.util",
    "mininet.cli": "selena.mininet.cli",
}


def _is_mininet(name: str) -> bool:
    return name == "mininet" or name.startswith("mininet.")


@contextlib.contextmanager
def shim() -> Iterator[None]:
    """`import mininet...` gives selena.mininet's modules within this."""
    import importlib

    saved = {name: mod for name, mod in sys.modules.items() if _is_mininet(name)}
    for name in saved:
        del sys.modules[name]
    for name, target in SHIM.items():
        sys.modules[name] = importlib.import_module(target)
    try:
        yield
    finally:
        for name in [n for n in sys.modules if _is_mininet(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def load_custom(paths: Sequence[str | Path]) -> dict[str, Callable[..., object]]:
    """The `topos` of each custom file (a later file's name wins, as in mn).
    A mistake in a file is a ScenarioFileError at the file's own line."""
    topos: dict[str, Callable[..., object]] = {}
    for given in _split(paths):
        path = Path(given)
        if not path.is_file():
            what = "a directory, not a file" if path.is_dir() else "no such file"
            raise ScenarioError(f"--custom {given}: {what}")
        namespace: dict[str, object] = {"__file__": str(path), "__name__": "__selena_custom__",
                                        "__builtins__": __builtins__}
        try:
            code = compile(path.read_text(), str(path), "exec")
        except SyntaxError as exc:
            raise ScenarioError(f"{path}:{exc.lineno}: {exc.msg}") from None
        try:
            with shim():
                exec(code, namespace)  # noqa: S102 - the user's own custom file, as mn runs it
        except ScenarioFileError as exc:
            if exc.where:
                raise
            raise user_error(exc, path) from None
        except Exception as exc:  # the user's own code failed: name their line
            error = user_error(exc, path)
            missing = getattr(exc, "name", None) or ""
            if isinstance(exc, ModuleNotFoundError) and _is_mininet(missing):
                have = ", ".join(SHIM)
                raise ScenarioFileError(error.where, f"selena's Mininet API has no {missing} "
                                                     f"(it has {have})") from None
            raise error from None
        found = namespace.get("topos", {})
        if not isinstance(found, dict):
            raise ScenarioError(f"{path}: `topos` must be a dict of names to Topo classes "
                                f"(topos = {{'mytopo': MyTopo}}), not {type(found).__name__}")
        for name, maker in found.items():
            if not isinstance(name, str) or not callable(maker):
                raise ScenarioError(f"{path}: topos[{name!r}] must map a name to a Topo class "
                                    f"or a function returning one, not {maker!r}")
        topos.update(found)
    return topos


def _split(paths: Sequence[str | Path]) -> list[str]:
    """mn takes --custom a.py,b.py; selena also takes --custom repeated."""
    return [p for given in paths for p in str(given).split(",") if p]


def make_numeric(text: str) -> int | float | str:
    """mn's makeNumeric: an int, else a float, else the string."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            continue
    return text


def split_args(spec: str) -> tuple[str, list[object], dict[str, object]]:
    """mn's splitArgs: `mytopo,3,bw=10` -> ('mytopo', [3], {'bw': 10})."""
    name, *params = spec.split(",")
    args: list[object] = [make_numeric(p) for p in params if "=" not in p]
    kwargs: dict[str, object] = {}
    for p in params:
        if "=" in p:
            key, value = p.split("=", 1)
            kwargs[key] = make_numeric(value)
    return name.strip(), args, kwargs


def custom_names(paths: Sequence[str | Path]) -> list[str]:
    return list(load_custom(paths))


def build_custom(spec: str, topos: dict[str, Callable[..., object]],
                 source: str) -> Topology | None:
    """The Topology for `--topo spec` from the custom topos, or None when
    the name is not a custom one (a built-in may have it)."""
    from selena.mininet.topo import Topo, to_topology

    name, args, kwargs = split_args(spec)
    maker = topos.get(name)
    if maker is None:
        return None
    try:
        with shim():
            topo = maker(*args, **kwargs)
    except ScenarioFileError as exc:
        if exc.where:
            raise
        raise user_error(exc, source) from None
    except Exception as exc:
        if isinstance(exc, TypeError) and not user_frames(exc.__traceback__):
            raise ScenarioError(f"--topo {spec!r}: {exc} (the arguments after the name go to "
                                f"{getattr(maker, '__name__', name)}, as in mn)") from None
        raise user_error(exc, source) from None
    if isinstance(topo, Topology):
        return topo
    if not isinstance(topo, Topo):
        raise ScenarioError(f"{source}: topos[{name!r}] returned {type(topo).__name__}, "
                            "not a Topo")
    return to_topology(topo, name)
