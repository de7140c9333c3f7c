"""`selena lab bench-control --baseline REV --repeat N`: bench-control's Dom0
CPU per command with REV's control channel (selena/control) and with this
tree's, run after run in one lab boot, interleaved (REV, this tree, REV,
...), and each tree's runs and median side by side. One boot differs from
the next by more than most changes to the channel (docs/benchmarks.md), so a
change is measured against its baseline in the same boot, on the same
guests' images and the rest of this tree.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path

from selena.errors import LabError
from selena.lab.bench_control import CPU_MARKER
from selena.lab.qemu import Lab
from selena.runner import Runner

THIS_TREE = "this tree"
# What the summary gives per case (bench-control's own names; ms per command).
FIGURES = ("selena", "user", "kernel", "xenstored", "steal", "selena_own", "xenstored_own")


def export_control(runner: Runner, rev: str, root: Path) -> tuple[str, Path]:
    """REV's selena/control, exported under root/build/bench-control/<commit>/
    (inside the tree, so Dom0 sees it under /selena-src): its short commit and
    the directory, relative to root."""
    found = runner.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet",
                        f"{rev}^{{commit}}"], check=False)
    if found.returncode != 0 or not found.stdout.strip():
        raise LabError(f"--baseline {rev}: not a commit of this checkout; give a commit, "
                       f"tag or branch (`git log --oneline` lists them)")
    commit = found.stdout.strip()[:12]
    parent = root / "build" / "bench-control"
    target = parent / commit
    if not (target / "selena" / "control" / "channel.py").is_file():
        # Exported whole or not at all: a directory half written is never taken.
        partial = parent / f"{commit}.partial"
        runner.run(["rm", "-rf", str(partial)])
        partial.mkdir(parents=True)
        archive = parent / f"{commit}.tar"
        exported = runner.run(["git", "-C", str(root), "archive", "-o", str(archive), commit,
                               "selena/control"], check=False)
        if exported.returncode == 0:
            runner.run(["tar", "-x", "-f", str(archive), "-C", str(partial)])
        archive.unlink(missing_ok=True)
        if not (partial / "selena" / "control" / "channel.py").is_file():
            runner.run(["rm", "-rf", str(partial)])
            raise LabError(f"--baseline {rev}: commit {commit} has no selena/control/channel.py "
                           f"(the control channel is older than that file); give a later one")
        partial.rename(target)
    return commit, (target / "selena" / "control").relative_to(root)


def cpu_figures(output: str) -> dict[str, dict[str, float]]:
    """The Dom0 CPU figures bench-control printed last, by case."""
    for line in reversed(output.splitlines()):
        if line.startswith(CPU_MARKER):
            figures: dict[str, dict[str, float]] = json.loads(line[len(CPU_MARKER):])
            return figures
    raise LabError("bench-control printed no Dom0 CPU figures (it failed: see its output above)")


def summary(runs: list[tuple[str, dict[str, dict[str, float]]]], baseline: str) -> list[str]:
    """Each case's runs by tree, their medians and this tree's median over the
    baseline's."""
    cases = list(dict.fromkeys(case for _, figures in runs for case in figures))
    lines = ["selena's Dom0 CPU ms per command, run by run, and the median of each "
             "figure (user + kernel = selena; xenstored and Dom0's stolen time beside; "
             "`own`: stolen time left out)",
             f"  {'case':<28} {'control channel':<15} {'runs (selena)':<30} "
             + " ".join(f"{name:>9}" for name in FIGURES)]
    for case in cases:
        medians = {}
        for label in (baseline, THIS_TREE):
            mine = [figures[case] for tree, figures in runs if tree == label and case in figures]
            if not mine:
                continue
            medians[label] = {name: statistics.median(f[name] for f in mine) for name in FIGURES}
            each = " ".join(f"{f['selena']:.1f}" for f in mine)
            lines.append(f"  {case:<28} {label:<15} {each:<30} "
                         + " ".join(f"{medians[label][name]:>9.1f}" for name in FIGURES))
        if len(medians) == 2 and medians[baseline]["selena"] > 0:
            ratio = medians[THIS_TREE]["selena"] / medians[baseline]["selena"]
            line = f"  {case:<28} {'':<15} this tree / {baseline}: {ratio:.2f}"
            if medians[baseline]["selena_own"] > 0:
                own = medians[THIS_TREE]["selena_own"] / medians[baseline]["selena_own"]
                line += f" (own: {own:.2f})"
            lines.append(line)
    return lines


def run_ab(lab: Lab, runner: Runner, rev: str, bench_args: list[str], repeat: int,
           echo: Callable[[str], None]) -> list[str]:
    """Run bench-control 2 x `repeat` times in one boot, REV's channel first,
    and return the summary's lines."""
    commit, control = export_control(runner, rev, lab.share)
    runs: list[tuple[str, dict[str, dict[str, float]]]] = []
    with lab.session() as session:
        for index in range(repeat):
            for label, prefix in (
                    (commit, ["python3", "-m", "selena.lab.control_from", str(control),
                              "selena.lab.bench_control"]),
                    (THIS_TREE, ["python3", "-m", "selena.lab.bench_control"])):
                echo(f"== run {index + 1} of {repeat}: the control channel of {label}\n")
                result = session.run([*prefix, *bench_args], timeout=3600, on_output=echo)
                if result.returncode != 0:
                    raise LabError(f"bench-control with the control channel of {label} "
                                   f"exited {result.returncode} (its output is above)")
                runs.append((label, cpu_figures(result.output)))
    return summary(runs, commit)
