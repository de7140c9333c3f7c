"""Snapshots of `selena plan` (issue 35 item 7): a change meant to change no
behaviour leaves the plan of every shipped scenario as it was.

Every scenario in scenarios/ is either planned here (CASES, with the
arguments its plan needs, plus variants covering each option that changes a
plan, and a few --topo specs) and compared with its committed copy under
tests/data/plans/<name>.sh, or listed in UNPLANNABLE with the reason and the
error it fails with today.

What a plan would otherwise take from the machine is pinned (`pinned()`):
the host `selena-tdf host` describes (a FakeRunner answers it; nothing else
may be run), the guest templates installed (the shipped ones, laid out as
/usr/share/selena/templates), the CPU count the Mininet backend reads, SELENA_*
environment variables (removed), and the paths of this checkout and of the
Python interpreter (replaced by <root> and <python> in the text).

When a change to a plan is meant, regenerate the copies with one command,
which runs exactly `snapshot()` below: `make plan-snapshots`
(scripts/update-plan-snapshots), and commit them with the change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from fake_runner import FakeRunner

import selena
import selena.cli.experiment
import selena.model.topology
import selena.plan
from selena.cli import main
from selena.experiment import Experiment
from selena.templates import TemplateSpec, read_spec, variant_disk

ROOT = Path(__file__).resolve().parents[1]
PLANS = ROOT / "tests" / "data" / "plans"
SCENARIOS = ROOT / "scenarios"
REGENERATE = "make plan-snapshots"

# What `selena-tdf host` says on the pinned host (the fields of `xl info`
# selena reads). Four CPUs: the 2-core lab's figure would fold every CPU
# mask of paper_listing1.py, a large server's none; four folds one of its two.
HOST_CPUS = 4
HOST_ANSWER = (f"nr_cpus : {HOST_CPUS}\nfree_memory : 16384\nxen_major : 4\n"
               "xen_minor : 17\nxen_extra : .5-snapshot\n")
SHIPPED_TEMPLATES = ROOT / "guest-templates"


@dataclass(frozen=True)
class Case:
    """One `selena plan ARGS` whose output is committed as <name>.sh."""

    name: str
    args: tuple[str, ...]


def scenario(file: str, *options: str, name: str | None = None) -> Case:
    """A shipped scenario file (scenarios/<file>.py) with plan options."""
    suffix = "".join(f"_{o.lstrip('-').replace('=', '-').replace(',', '-')}"
                     for o in options)
    return Case(name or f"{file}{suffix}", (f"scenarios/{file}.py", *options))


def topo(spec: str, *options: str, name: str) -> Case:
    return Case(name, ("--topo", spec, *options))


CASES: tuple[Case, ...] = (
    # Every shipped scenario as its docstring runs it (the TDF its usage
    # line gives, where that is not the scenario's own).
    scenario("agent_commands"),
    scenario("cpu_time"),
    scenario("debian_listing"),
    scenario("debian_memcached"),
    scenario("dilation_demo", "--tdf", "10", name="dilation_demo_tdf10"),
    scenario("fat_tree_fct"),
    scenario("first_run"),
    scenario("ipv6_pair"),
    scenario("link_fidelity"),
    scenario("paper_listing1"),
    scenario("ping_pair"),
    scenario("pvh_pair"),
    scenario("debian_pvh"),
    scenario("qjump_memcached"),
    scenario("qjump_ping", "--tdf", "20", name="qjump_ping_tdf20"),
    scenario("qjump_ptpd", "--tdf", "10", name="qjump_ptpd_tdf10"),
    scenario("standalone_switch"),
    scenario("star_throughput"),
    scenario("held_out_star"),
    scenario("adaptive_phases"),
    # It runs its own Experiment; plan captures the topology it is given.
    scenario("script_experiment"),
    scenario("static_routes"),
    scenario("switch_model_fct"),
    scenario("tdf_change"),
    scenario("link_change"),
    scenario("node_restart"),
    scenario("two_hosts"),
    # --param and --tdf as the scenarios' usage lines give them.
    scenario("dilation_demo", "--tdf", "1", "--param", "rate_mbit=20", "--param",
             "delay_ms=2", name="dilation_demo_tdf1_rate20_delay2"),
    scenario("link_fidelity", "--tdf", "10", "--param", "rate_mbit=20", "--param",
             "delay_ms=50", name="link_fidelity_tdf10_rate20_delay50"),
    scenario("qjump_ping", "--tdf", "20", "--param", "prio=1",
             name="qjump_ping_tdf20_prio"),
    scenario("qjump_memcached", "--param", "prio=1", name="qjump_memcached_prio"),
    scenario("qjump_memcached", "--param", "cpu=real", name="qjump_memcached_cpu_real"),
    scenario("star_throughput", "--tdf", "5", "--param", "clients=2",
             name="star_throughput_tdf5_clients2"),
    # The reproductions of issue 34 item 4 (deploy_scale at 4 guests: 52 is
    # the same plan, 13 times longer).
    scenario("deploy_scale", "--param", "hosts=4", name="deploy_scale_hosts4"),
    scenario("qjump_mflops", "--param", "cpu=real", name="qjump_mflops_cpu_real"),
    scenario("qjump_mflops"),
    scenario("spacing_ccdf", "--tdf", "10", "--param", "rate_mbit=80",
             name="spacing_ccdf_tdf10_rate80"),
    scenario("star_throughput", "--tdf", "20", "--param", "clients=8", "--param",
             "stagger_s=0", "--param", "last_s=5", name="star_throughput_tdf20_clients8"),
    # The deploy options that change a plan, each once (and together).
    scenario("two_hosts", "--shaping", "guest"),
    scenario("two_hosts", "--bridge", "linux"),
    scenario("two_hosts", "--offload"),
    scenario("two_hosts", "--link", "tc,bw=5,delay=2ms,jitter=1ms,loss=1,max_queue_size=50",
             name="two_hosts_link"),
    scenario("two_hosts", "--backend", "mininet"),
    scenario("static_routes", "--shaping", "guest", "--bridge", "linux"),
    scenario("standalone_switch", "--backend", "mininet"),
    scenario("paper_listing1", "--shaping", "guest"),
    # Mininet-style topologies (selena/specs.py), given as --topo and as
    # the scenario argument.
    topo("minimal", name="topo_minimal"),
    topo("single,3", name="topo_single_3"),
    topo("reversed,3", name="topo_reversed_3"),
    topo("linear,4", "--tdf", "5", name="topo_linear_4_tdf5"),
    topo("tree,depth=2,fanout=2", "--link", "tc,bw=10,delay=5ms",
         name="topo_tree_depth2_fanout2_link"),
    topo("torus,3,3", name="topo_torus_3_3"),
    topo("star,3", "--bridge", "linux", name="topo_star_3_bridge_linux"),
    Case("spec_linear_3", ("linear,3",)),
)


@dataclass(frozen=True)
class Unplannable:
    """A shipped file `selena plan` refuses today: why, and the error it gives
    (its stderr, normalised), so that the day it plans the test says to add it."""

    file: str
    reason: str
    error: str


UNPLANNABLE: tuple[Unplannable, ...] = (
    Unplannable(
        "bench_plan",
        "a benchmark, not a scenario: it builds a k=16 fat tree itself and times "
        "validate, plan and render (tests/test_plan.py runs it); as a scenario file it "
        "defines no topology",
        "selena: error: scenarios/bench_plan.py: no topology found: declare `topology = "
        "Topology(...)`, a build() that returns one, or construct an Experiment "
        "(docs/experiments.md); a script that is no scenario runs with python3\n"),
)


# -- the pinned machine --------------------------------------------------------


def shipped_templates(root: Path) -> dict[str, TemplateSpec]:
    """The templates of guest-templates/ as if installed under `root`, as
    the lab installs them: each template.yaml with its files beside it; a
    derived template (base: debian) boots its base's kernel and initramfs
    from its base's disk image with its packages added."""
    specs: dict[str, TemplateSpec] = {}
    for path in sorted(SHIPPED_TEMPLATES.glob("*/template.yaml")):
        spec = read_spec(path, name=path.parent.name)
        here = root / spec.name

        def moved(file: Path | None, here: Path = here) -> Path | None:
            return None if file is None else here / file.name

        specs[spec.name] = dataclasses.replace(
            spec, kernel=here / spec.kernel.name, ramdisk=here / spec.ramdisk.name,
            disk=moved(spec.disk))
    for name, spec in specs.items():
        base = specs.get(spec.base) if spec.base else None
        if base is not None and base.disk is not None:
            specs[name] = dataclasses.replace(
                spec, kernel=base.kernel, ramdisk=base.ramdisk, cmdline=base.cmdline,
                disk=variant_disk(base.disk, spec.packages))
    return specs


@dataclass
class Pins:
    """What the pinned inputs were asked, to prove every pin took effect."""

    runner: FakeRunner
    templates_loaded: list[str] = field(default_factory=list)
    cpu_count_calls: int = 0


@contextlib.contextmanager
def pinned() -> Iterator[Pins]:
    """Everything `selena plan` would read from this machine, fixed."""
    runner = FakeRunner()
    runner.respond(["selena-tdf", "host"], stdout=HOST_ANSWER)
    pins = Pins(runner)
    installed: dict[Path, dict[str, TemplateSpec]] = {}
    names = {p.parent.name for p in SHIPPED_TEMPLATES.glob("*/template.yaml")}

    def experiment(*args: Any, **kwargs: Any) -> Experiment:
        return Experiment(*args, runner=runner, templates=names, **kwargs)

    def load_template(root: Path, name: str) -> TemplateSpec:
        specs = installed.setdefault(root, shipped_templates(root))
        pins.templates_loaded.append(name)
        return specs[name]

    def cpu_count() -> int:
        pins.cpu_count_calls += 1
        return HOST_CPUS

    env = {k: v for k, v in os.environ.items() if not k.startswith("SELENA_")}
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(selena.cli.experiment, "Experiment", experiment))
        stack.enter_context(mock.patch.object(selena.plan, "load_template", load_template))
        stack.enter_context(mock.patch.object(os, "cpu_count", cpu_count))
        stack.enter_context(mock.patch.dict(os.environ, env, clear=True))
        # Scenario files are named relative to the working directory (as a
        # user in the checkout sees them), and remembered per process.
        stack.enter_context(contextlib.chdir(ROOT))
        if hasattr(selena.model.topology, "_SHOWN"):
            stack.enter_context(mock.patch.dict(selena.model.topology._SHOWN, clear=True))
        yield pins


@dataclass(frozen=True)
class PlanRun:
    status: int
    stdout: str
    stderr: str


def normalise(text: str) -> str:
    """This checkout's and this interpreter's paths as <root> and <python>."""
    if sys.executable:
        text = text.replace(sys.executable, "<python>")
    return text.replace(str(ROOT), "<root>")


def plan(args: tuple[str, ...]) -> tuple[PlanRun, Pins]:
    """`selena plan ARGS` in this process on the pinned machine, in this
    checkout (scenario files relative to it)."""
    if not Path(selena.__file__).resolve().is_relative_to(ROOT):
        raise RuntimeError(f"selena is imported from {Path(selena.__file__).parent}, not "
                           f"from this checkout {ROOT}: run with PYTHONPATH={ROOT}")
    argv = ["plan", *args]
    out, err = io.StringIO(), io.StringIO()
    # Whatever selena logs goes to the captured stderr, under pytest as in a
    # script (main() configures logging once per process).
    handler = logging.StreamHandler(err)
    logger = logging.getLogger("selena")
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        with pinned() as pins, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            status = main(argv)
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    return PlanRun(status, normalise(out.getvalue()), normalise(err.getvalue())), pins


def snapshot(case: Case) -> str:
    """The committed copy's text: what `selena plan` printed on stderr
    (warnings), if anything, as comments, then its stdout byte for byte.
    Raises if the plan fails or a pin did not take effect. The test and
    `make plan-snapshots` both call this."""
    run, pins = plan(case.args)
    if run.status != 0:
        raise AssertionError(f"selena plan {' '.join(case.args)} exited {run.status}:\n"
                             f"{run.stderr}")
    mininet = "mininet" in case.args
    asked = [] if mininet else [("selena-tdf", "host")]
    if pins.runner.calls != asked:
        raise AssertionError(f"selena plan {' '.join(case.args)} asked the runner "
                             f"{pins.runner.calls}, not {asked}: is the runner still pinned, "
                             "and does a plan still run nothing?")
    if mininet and not pins.cpu_count_calls:
        raise AssertionError("the Mininet backend no longer reads os.cpu_count(): pin the "
                             "host's CPU count where it looks")
    if not pins.templates_loaded:
        raise AssertionError("the pinned templates were never loaded: make_plan no longer "
                             "calls selena.plan.load_template; pin templates where it looks")
    if not run.stderr:
        return run.stdout
    return ("# selena plan wrote on stderr:\n"
            + "".join(f"# {line}\n" for line in run.stderr.splitlines())
            + "# and on stdout:\n" + run.stdout)


def snapshot_path(case: Case, plans: Path = PLANS) -> Path:
    return plans / f"{case.name}.sh"


def shown_path(path: Path) -> Path:
    """`path` relative to the checkout when it is inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def write_snapshots(plans: Path = PLANS) -> list[str]:
    """Regenerate every committed copy (and remove those of cases gone);
    returns what changed. `make plan-snapshots` runs this."""
    texts = {snapshot_path(case, plans): snapshot(case) for case in CASES}  # all, then write
    plans.mkdir(parents=True, exist_ok=True)
    changed = []
    for path, text in texts.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            changed.append(f"wrote {shown_path(path)}")
    for path in sorted(plans.glob("*.sh")):
        if path not in texts:
            path.unlink()
            changed.append(f"removed {shown_path(path)}")
    return changed


# -- the tests -----------------------------------------------------------------


def short_diff(expected: str, actual: str, name: str, lines: int = 40) -> str:
    diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(),
                                     f"committed {name}", "selena plan now", lineterm="", n=2))
    more = f"\n... ({len(diff) - lines} more diff lines)" if len(diff) > lines else ""
    return "\n".join(diff[:lines]) + more


@pytest.fixture(scope="module")
def snapshots() -> dict[str, str]:
    return {case.name: snapshot(case) for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_plan_matches_its_committed_copy(case: Case, snapshots: dict[str, str]) -> None:
    path = snapshot_path(case)
    assert path.exists(), (f"no committed plan for {case.name} ({path.relative_to(ROOT)}): "
                           f"run `{REGENERATE}` and commit it")
    expected = path.read_text()
    actual = snapshots[case.name]
    if actual != expected:
        pytest.fail(f"`selena plan {' '.join(case.args)}` differs from "
                    f"{path.relative_to(ROOT)}:\n{short_diff(expected, actual, path.name)}\n"
                    f"If the change is meant, regenerate the copies with `{REGENERATE}` and "
                    "commit them with it.", pytrace=False)


def test_two_runs_in_one_process_plan_the_same(snapshots: dict[str, str]) -> None:
    again = {case.name: snapshot(case) for case in CASES}
    differ = [name for name in snapshots if again[name] != snapshots[name]]
    assert not differ, ("a second `selena plan` in the same process printed something "
                        f"else for {', '.join(differ)}:\n"
                        + short_diff(snapshots[differ[0]], again[differ[0]], differ[0]))


def test_another_process_with_another_hash_seed_plans_the_same(
        snapshots: dict[str, str]) -> None:
    """Set and dict orders of strings differ between processes: a plan
    depending on them would differ on the next machine."""
    seeds = {"0", "1"} - {os.environ.get("PYTHONHASHSEED", "")}
    code = ("import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[1] + '/tests',"
            " sys.argv[1] + '/tests/support'];"
            "import test_plan_snapshots as t;"
            "print(json.dumps({c.name: t.snapshot(c) for c in t.CASES}))")
    env = {**os.environ, "PYTHONHASHSEED": sorted(seeds)[0],
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT)], capture_output=True,
                          text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    other = json.loads(proc.stdout)
    differ = [name for name in snapshots if other.get(name) != snapshots[name]]
    assert not differ, (f"with PYTHONHASHSEED={env['PYTHONHASHSEED']}, `selena plan` "
                        f"printed something else for {', '.join(differ)}:\n"
                        + short_diff(snapshots[differ[0]], other.get(differ[0], ""),
                                     differ[0]))


def test_every_committed_copy_belongs_to_a_case() -> None:
    names = {c.name for c in CASES}
    stale = sorted(p.name for p in PLANS.glob("*.sh") if p.stem not in names)
    assert not stale, (f"committed plans without a case: {', '.join(stale)}; "
                       f"`{REGENERATE}` removes them")


def test_every_shipped_scenario_is_planned_or_listed_as_unplannable() -> None:
    shipped = {p.stem for p in SCENARIOS.glob("*.py")}
    planned = {Path(a).stem for c in CASES for a in c.args if a.startswith("scenarios/")}
    listed = {u.file for u in UNPLANNABLE}
    assert not planned & listed, f"both planned and unplannable: {planned & listed}"
    missing = sorted(shipped - planned - listed)
    assert not missing, (f"shipped scenarios with no plan snapshot: {', '.join(missing)}: "
                         f"add each to CASES (with the arguments its plan needs) and run "
                         f"`{REGENERATE}`, or to UNPLANNABLE with the reason")
    gone = sorted((planned | listed) - shipped)
    assert not gone, f"listed here but not in scenarios/: {', '.join(gone)}"


def test_names_of_cases_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("entry", UNPLANNABLE, ids=lambda u: u.file)
def test_unplannable_scenarios_still_fail_the_same_way(entry: Unplannable) -> None:
    run, _ = plan((f"scenarios/{entry.file}.py",))
    assert run.status != 0 and run.stdout == "", (
        f"scenarios/{entry.file}.py plans now (it was unplannable: {entry.reason}): move it "
        f"from UNPLANNABLE to CASES in {Path(__file__).name} and run `{REGENERATE}`")
    assert run.stderr == entry.error, (
        f"scenarios/{entry.file}.py fails differently now:\n{run.stderr}"
        f"(it failed with:\n{entry.error}); update UNPLANNABLE if that is meant")


def test_a_changed_plan_fails_with_a_diff_and_the_regeneration_command(
        tmp_path: Path) -> None:
    """The comparison is not vacuous: two_hosts.py with another link rate
    plans differently from two_hosts.sh, and the failure shows the diff and
    names the regeneration command."""
    source = (SCENARIOS / "two_hosts.py").read_text()
    assert 'rate="100Mbit"' in source
    changed = tmp_path / "two_hosts.py"
    changed.write_text(source.replace('rate="100Mbit"', 'rate="50Mbit"'))
    case = Case("two_hosts", (str(changed),))
    with pytest.raises(pytest.fail.Exception) as failure:
        test_plan_matches_its_committed_copy(case, {case.name: snapshot(case)})
    message = str(failure.value)
    assert "-tc class replace dev sv708d0.0 parent 1: classid 1:1 htb rate 10000000bit" \
        in message
    assert "+tc class replace dev sv708d0.0 parent 1: classid 1:1 htb rate 5000000bit" \
        in message
    assert f"regenerate the copies with `{REGENERATE}`" in message


def test_the_regeneration_script_runs_and_writes_what_the_test_compares(
        tmp_path: Path) -> None:
    """`make plan-snapshots` as a maintainer runs it: its own process, its
    own import path (it once failed on FakeRunner's move to tests/support)."""
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "update-plan-snapshots"),
                          "--into", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.endswith(f"{len(CASES)} plans in {tmp_path}: {len(CASES)} changed\n")
    for case in CASES:
        assert snapshot_path(case, tmp_path).read_text() == \
            snapshot_path(case).read_text(), case.name
