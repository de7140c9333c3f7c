"""Where experiments come from: a scenario file (clean API or SELENA style)
or a Mininet-style `--topo` spec, with an optional `--link` spec for every
link and a TDF override.

A mistake in a user's file (a NameError, an unknown NodeType member, a bad
unit...) is reported as a ScenarioFileError naming the file and line, with a
traceback of the user's own frames only: never a trace through selena.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from selena import units
from selena.compat import Action, SelenaScript, load_selena_file
from selena.errors import ScenarioError, ScenarioFileError, UnitError
from selena.model import LinkOptions, Topology
from selena.specs import apply_link_spec, parse_link_spec, parse_topo_spec
from selena.user_errors import user_error


@dataclass
class Scenario:
    topology: Topology
    actions: list[Action] = field(default_factory=list)
    run: Callable[..., object] | None = None     # the file's `run(exp)`, if it has one
    source: str = ""                             # the file or the --topo spec
    params: dict[str, object] = field(default_factory=dict)
    # The file drives its own Experiment (a script): its topology was captured
    # where it constructed the Experiment, and only checking it makes sense.
    runs_itself: bool = False


RUNS_ITSELF = ("this file runs its own experiment: run it with python3 in Dom0, or move "
               "the topology into build()")

# Set while a scenario file is loaded: an Experiment constructed then records
# its topology and stops the file (selena.experiment calls intercept()).
_LOADING: contextvars.ContextVar[Path | None] = contextvars.ContextVar("selena_loading",
                                                                      default=None)
# Set by the verbs that only look at a scenario (validate, plan, advise).
_CHECKING: contextvars.ContextVar[bool] = contextvars.ContextVar("selena_checking",
                                                                default=False)


class _ExperimentCaptured(BaseException):
    """Control flow, never seen outside this module: a file being loaded
    constructed an Experiment. A BaseException so that the file's own
    `except Exception` does not swallow it and go on."""

    def __init__(self, scenario: Scenario):
        super().__init__("experiment captured")
        self.scenario = scenario


@contextlib.contextmanager
def checking_only() -> Iterator[None]:
    """Within this, a scenario that runs itself may still be turned into an
    Experiment, to be checked or planned (never deployed: that is the CLI
    verbs' promise)."""
    token = _CHECKING.set(True)
    try:
        yield
    finally:
        _CHECKING.reset(token)


def intercept(topology: object, *, tdf: float | str | None = None,
              params: Mapping[str, object] | None = None,
              link: str | None = None) -> object:
    """Experiment.__init__'s first step. While a scenario file loads, an
    Experiment it constructs is recorded and the file stopped there (so
    nothing after the construction runs); otherwise a scenario file is
    loaded here, and one that runs itself is refused unless only checked."""
    path = _LOADING.get()
    if path is not None:
        if isinstance(topology, Scenario):
            scenario = topology
        elif isinstance(topology, Topology):
            scenario = Scenario(topology, source=str(path), params=dict(params or {}))
        else:
            raise ScenarioError(f"Experiment(...) in a scenario file needs a Topology, got "
                                f"{type(topology).__name__}")
        if tdf is not None:
            try:
                scenario.topology.tdf = units.tdf(tdf)
            except UnitError as exc:
                raise ScenarioError(f"Experiment(tdf=...): {exc}") from None
        if link:
            apply_link_spec(scenario.topology, parse_link_spec(link))
        scenario.runs_itself = True
        raise _ExperimentCaptured(scenario)
    if isinstance(topology, str | Path):
        topology = load_scenario(str(topology), tdf=tdf, link_spec=link, params=params)
    elif link and isinstance(topology, Topology | Scenario):
        # A topology built in Python takes the same defaults a file does.
        target = topology.topology if isinstance(topology, Scenario) else topology
        apply_link_spec(target, parse_link_spec(link))
    if isinstance(topology, Scenario) and topology.runs_itself and not _CHECKING.get():
        raise ScenarioError(f"{topology.source}: {RUNS_ITSELF}")
    return topology


def load_scenario(source: str | None, *, tdf: float | str | None = None,
                  link_spec: str | None = None,
                  params: Mapping[str, object] | None = None,
                  custom: Sequence[str] = ()) -> Scenario:
    """A scenario: topology, SELENA-style actions, and the run function.

    `source` is a .py file or a --topo spec; `params` go to the file's
    `build(**params)` (and are kept for `exp.params`). `custom`: Mininet
    custom files (mn --custom), whose `topos` names a --topo spec may use
    before the built-in ones."""
    link: LinkOptions = parse_link_spec(link_spec) if link_spec else {}
    params = dict(params or {})
    if custom:
        return _custom_scenario(source, custom, link, params, tdf)
    if source is None:
        raise ScenarioError("give a scenario file or --topo NAME[,ARGS] (e.g. --topo linear,3)")
    path = Path(source)
    if path.suffix == ".py":
        if not path.exists():
            raise ScenarioError(f"no such scenario file: {source}")
        scenario = _load_file(path, params)
        apply_link_spec(scenario.topology, link)
    else:
        if "/" in source:               # a path (no --topo spec has one), but not a .py file
            what = ("a directory" if path.is_dir() else "not a .py file" if path.exists()
                    else "no such file")
            raise ScenarioError(f"{source}: {what}: give a scenario file (FILE.py) or a "
                                "--topo spec (e.g. linear,3)")
        if params:
            raise ScenarioError(f"--param {', '.join(params)}: a --topo spec takes no "
                                "parameters (give them in the spec: tree,depth=2)")
        scenario = Scenario(parse_topo_spec(source, link), source=source)
    _apply_tdf(scenario, tdf)
    return scenario


def _apply_tdf(scenario: Scenario, tdf: float | str | None) -> None:
    if tdf is not None:
        try:
            scenario.topology.tdf = units.tdf(tdf)
        except UnitError as exc:
            raise ScenarioError(f"--tdf: {exc}") from None


def _custom_scenario(spec: str | None, custom: Sequence[str], link: LinkOptions,
                     params: dict[str, object], tdf: float | str | None) -> Scenario:
    """--custom FILE --topo NAME[,ARGS]: NAME from FILE's `topos` first, as
    in mn, else a built-in topology."""
    from selena.mininet.custom import build_custom, load_custom

    shown = ",".join(custom)
    if spec is not None and spec.endswith(".py"):
        raise ScenarioError(f"--custom {shown} goes with --topo NAME (a topology its `topos` "
                            f"names), not a scenario file ({spec})")
    topos = load_custom(custom)
    if spec is None:
        names = ", ".join(topos) or "none"
        raise ScenarioError(f"--custom {shown}: name the topology with --topo NAME[,ARGS] "
                            f"(its topos: {names})")
    if params:
        raise ScenarioError(f"--param {', '.join(params)}: a custom topology takes its "
                            "arguments in the spec, as mn does (--topo mytopo,3,bw=10)")
    topology = build_custom(spec, topos, shown)
    if topology is None:
        try:
            topology = parse_topo_spec(spec)
        except ScenarioError as exc:
            mine = ", ".join(topos) or "none"
            raise ScenarioError(f"{exc} (custom topos in {shown}: {mine})") from None
    apply_link_spec(topology, link)
    scenario = Scenario(topology, source=f"{shown} --topo {spec}")
    _apply_tdf(scenario, tdf)
    return scenario


def _load_file(path: Path, params: dict[str, object]) -> Scenario:
    tree = _parsed(path)
    as_main = False
    if tree is not None:            # else load_selena_file reports why
        _refuse_mininet_itself(path, tree)
        as_main = _is_script(tree)
    token = _LOADING.set(path)
    argv = sys.argv
    # A script parses its own arguments: as loaded, it gets none (its defaults).
    sys.argv = [str(path)]
    try:
        loaded = _run_file(path, as_main, params)
        if isinstance(loaded, Scenario):
            return loaded
        script = loaded
        namespace = script.namespace_after_run
        topo = namespace.get("topology")
        build = namespace.get("build")
        if topo is None and callable(build):
            _check_params(build, params, path)
            try:
                topo = build(**params)
            except _ExperimentCaptured as captured:
                return captured.scenario
            except Exception as exc:
                raise user_error(exc, path) from None
            if topo is None:
                line = getattr(getattr(build, "__code__", None), "co_firstlineno", None)
                where = f"{path}:{line}" if line else str(path)
                raise ScenarioError(f"{where}: build() returned None: did build() forget "
                                    "`return topo`?")
        elif params:
            raise ScenarioError(f"{path}: --param {', '.join(params)} needs a "
                                "build(**params) function in the scenario")
    finally:
        sys.argv = argv
        _LOADING.reset(token)
    if topo is None:
        topo = script.topology
        if not topo.nodes:
            _explain_empty(path, namespace, as_main)
    if not isinstance(topo, Topology):
        raise ScenarioError(f"{path}: `topology` must be a selena Topology, "
                            f"got {type(topo).__name__}")
    candidate = namespace.get("run")
    if candidate is not None and not callable(candidate):
        raise ScenarioError(f"{path}: `run` must be a function run(exp)")
    return Scenario(topo, script.actions, candidate, str(path), params)


def _check_params(build: Callable[..., object], params: Mapping[str, object],
                  path: Path) -> None:
    """--param against build()'s signature, before it runs: a misspelt or
    missing name is one line naming build()'s parameters, not a TypeError
    from inside the call."""
    try:
        signature = inspect.signature(build)
    except (TypeError, ValueError):
        return                          # no signature to read: the call will say
    try:
        signature.bind(**params)
    except TypeError as exc:
        names = [p.name for p in signature.parameters.values()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        line = getattr(getattr(build, "__code__", None), "co_firstlineno", None)
        where = f"{path}:{line}" if line else str(path)
        fix = (f"its parameters: {', '.join(names)}; --param NAME=VALUE sets one" if names
               else "it takes none: drop --param")
        raise ScenarioError(f"{where}: --param: build() {exc} ({fix})") from None


def _run_file(path: Path, as_main: bool, params: dict[str, object]) -> SelenaScript | Scenario:
    """Run the file: what it declared, or the Scenario of the Experiment it
    constructed; its errors as the user should see them."""
    try:
        return load_selena_file(path, main=as_main)
    except _ExperimentCaptured as captured:
        if params:
            raise ScenarioError(f"{path}: --param {', '.join(params)} needs a "
                                "build(**params) function in the scenario") from None
        captured.scenario.params = params
        return captured.scenario
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise ScenarioError(f"{path}: the file exited (status {exc.code}) while "
                                "selena loaded it, with no arguments; "
                                f"{RUNS_ITSELF}") from None
        return _exited_script(path)
    except ScenarioError as exc:
        if isinstance(exc, ScenarioFileError) or str(exc).startswith(f"{path}:"):
            raise
        raise user_error(exc, path) from None
    except Exception as exc:  # the user's own code failed: name their line
        raise user_error(exc, path) from None


def _exited_script(path: Path) -> SelenaScript:
    """What is left of a file that called sys.exit(0) while loading: nothing."""
    return SelenaScript(Topology(path.stem.replace("_", "-")))


def _parsed(path: Path) -> ast.Module | None:
    """The file's syntax tree, read without running any of it; None when it
    cannot be read or parsed."""
    try:
        return ast.parse(path.read_text(), str(path))
    except (SyntaxError, ValueError, OSError):
        return None


def _refuse_mininet_itself(path: Path, tree: ast.Module) -> None:
    """A file that imports Mininet itself (`mininet`, not `selena.mininet`)
    is refused before any of it runs: loading it would run Mininet, an
    installed one with its namespaces and switches, not selena. A custom
    file of `topos` means what selena says under --custom (the shim)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        name = next((n for n in names if n == "mininet" or n.startswith("mininet.")), None)
        if name is None:
            continue
        declares_topos = any(isinstance(t, ast.Name) and t.id == "topos"
                             for stmt in tree.body if isinstance(stmt, ast.Assign)
                             for t in stmt.targets)
        fix = (f"its `topos` load with --custom {path} --topo NAME" if declares_topos else
               "for selena, import from selena.mininet (from selena.mininet.net import "
               "Mininet; docs/topologies.md)")
        raise ScenarioError(f"{path}:{node.lineno}: imports {name}, Mininet itself, which "
                            f"loading the file would run instead of selena: {fix}")


def _is_script(tree: ast.Module) -> bool:
    """Whether the file drives an Experiment (or a selena.mininet Mininet)
    itself and declares no `topology` or `build`: then it is loaded as
    `__main__` (its `if __name__ == "__main__":` block runs) so that the
    Experiment it constructs is reached and captured."""
    declares = False
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "build":
            declares = True
        targets = (stmt.targets if isinstance(stmt, ast.Assign)
                   else [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "topology" for t in targets):
            declares = True
    if declares:
        return False
    # selena.mininet's Mininet constructs its Experiment: a script of it too.
    drivers = ("Experiment", "Mininet")
    return any((isinstance(n, ast.Name) and n.id in drivers)
               or (isinstance(n, ast.Attribute) and n.attr in drivers)
               or (isinstance(n, ast.alias) and n.name.endswith(drivers))
               for n in ast.walk(tree))


def _explain_empty(path: Path, namespace: Mapping[str, object], as_main: bool) -> None:
    """A file that described nothing selena found: say why, when it shows."""
    others = [name for name, value in namespace.items()
              if isinstance(value, Topology) and name != "topology"]
    if others:
        shown = ", ".join(f"`{n}`" for n in others)
        raise ScenarioError(f"{path}: no `topology` found, but the file has a Topology "
                            f"named {shown}: name it `topology` (topology = {others[0]}), "
                            "or return it from build()")
    if as_main:
        raise ScenarioError(f"{path}: the file drives an Experiment but constructed none "
                            f"while selena loaded it; {RUNS_ITSELF}")
    # Said here, not by validation's "the topology has no nodes": the file
    # declared no topology at all, so there is none to speak of.
    raise ScenarioError(f"{path}: no topology found: declare `topology = Topology(...)`, "
                        "a build() that returns one, or construct an Experiment "
                        "(docs/experiments.md); a script that is no scenario runs with python3")
