"""Exception classes. Every error selena raises derives from SelenaError.

Subsystems add their own subclasses here so callers (and the CLI) can catch
them precisely. Messages must name the offending item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class SelenaError(Exception):
    """Base class of every selena error."""


class CommandError(SelenaError):
    """An external command failed (non-zero exit) or could not be started."""

    def __init__(self, argv: list[str], returncode: int | None, stderr: str, reason: str = ""):
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        shown = " ".join(self.argv)
        if reason:
            msg = f"command `{shown}` {reason}"
        else:
            msg = f"command `{shown}` exited with status {returncode}"
        tail = stderr.strip().splitlines()[-5:]
        if tail:
            msg += ": " + " | ".join(tail)
        super().__init__(msg)


class CommandTimeout(CommandError):
    """An external command did not finish within its time limit."""


class LabError(SelenaError):
    """The QEMU lab could not be built, booted or driven."""


class ValidationError(SelenaError):
    """A topology or scenario is invalid; nothing was created."""


class UnitError(ValidationError):
    """A value with a unit (rate, time, size, ratio) could not be parsed."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or suspicious) in a topology or scenario.

    `kind` groups problems of one sort (a big mistake repeated over a large
    topology is reported as one line with a count); `where` is the file:line
    that declared the offending item, when known."""

    kind: str
    message: str
    where: str | None = None

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


# Problems of one kind shown in full before they are summarised.
GROUP_AFTER = 3
GROUP_EXAMPLES = 3


def group_problems(problems: Sequence[Problem]) -> list[str]:
    """One line per problem, except that a kind with many problems becomes one
    line with its count and a few examples."""
    by_kind: dict[str, list[Problem]] = {}
    for problem in problems:
        by_kind.setdefault(problem.kind, []).append(problem)
    lines = []
    for kind, items in by_kind.items():
        if len(items) <= GROUP_AFTER:
            lines += [str(p) for p in items]
        else:
            examples = "; ".join(str(p) for p in items[:GROUP_EXAMPLES])
            lines.append(f"{len(items)} x {kind}, e.g. {examples}; "
                         f"and {len(items) - GROUP_EXAMPLES} more")
    return lines


class TopologyError(ValidationError):
    """A topology or scenario is invalid; `problems` lists every offending item
    (as text, `file:line: ` first when known; `details` has them as Problems)."""

    def __init__(self, problems: Sequence[Problem | str]):
        self.details = [p if isinstance(p, Problem) else Problem("problem", p)
                        for p in problems]
        self.problems = [str(p) for p in self.details]
        shown = "\n  ".join(group_problems(self.details))
        super().__init__(f"{len(self.details)} problem(s) in the topology:\n  {shown}")


class TemplateError(ValidationError):
    """A guest template is malformed, or an image a node needs (a Debian
    package variant) has not been built; found before anything is created."""


class ImageBuildError(SelenaError):
    """Building a guest template's files failed (a kernel, an initramfs, a
    disk image: e.g. apt could not install a package, a host program is
    missing); the message carries the tool's own words or names the fix."""


class ScenarioError(SelenaError):
    """A scenario or experiment description file is malformed."""


class ScenarioFileError(ScenarioError):
    """A user's scenario file failed while selena ran it: a mistake of the
    user's (NameError, bad unit, unknown NodeType member...). It names the
    file and line; `user_traceback` holds only the frames in the user's own
    files, never selena's."""

    def __init__(self, where: str, message: str, user_traceback: str = ""):
        self.where = where
        self.message = message
        self.user_traceback = user_traceback
        super().__init__(f"{where}: {message}")


class ExperimentError(SelenaError):
    """The experiment lifecycle was used out of order (e.g. a command before
    deploy, or after teardown)."""


class ResultsError(ExperimentError):
    """The results bundle cannot be written where it was asked for (a path
    under a regular file, no permission, a full disk)."""


class BackendError(SelenaError):
    """The virtualization backend could not create, find or remove an object."""


class StateFileError(BackendError):
    """An experiment's state file cannot be read or makes no sense."""


class CleanupError(BackendError):
    """Cleanup removed what it could (`removed`) and names each failure."""

    def __init__(self, removed: list[str], failures: list[str]):
        self.removed = list(removed)
        self.failures = list(failures)
        shown = "\n  ".join(self.failures)
        super().__init__(f"cleanup incomplete ({len(self.failures)} failure(s)):\n  {shown}")


class ControlError(SelenaError):
    """The Xenstore control channel to the guest agents failed."""


class XenstoreError(ControlError):
    """Xenstore refused a request; `code` is its error name (ENOENT, EACCES...)."""

    def __init__(self, code: str, op: str, path: str, detail: str = ""):
        self.code = code
        self.op = op
        self.path = path
        super().__init__(f"xenstore {op} {path}: {code}" + (f" ({detail})" if detail else ""))


class ProtocolMismatch(ControlError):
    """A guest agent speaks another control-protocol version, or said nonsense."""


class GuestLost(ControlError):
    """A guest died, hung (no heartbeat) or never started its agent."""

    def __init__(self, guest: str, why: str):
        self.guest = guest
        self.why = why
        super().__init__(f"guest {guest} lost: {why}")


class GuestSetupError(ControlError):
    """A guest's agent could not apply its boot-time network directives.

    `report` is the guest's own agent/net value; `where` and `why` are what
    the control protocol read from it (selena.control.protocol.net_failure),
    already safe to print: this module knows no wire format."""

    def __init__(self, guest: str, report: str, where: str, why: str):
        self.guest = guest
        self.report = report
        super().__init__(f"guest {guest}: network setup failed at {where}: {why}")


class AnalysisError(SelenaError):
    """Results could not be analysed or plotted (bad input, missing plotting library)."""


class FlowCsvError(AnalysisError):
    """A flowgen CSV is malformed; `source` and `line` (1-based) name the offending row."""

    def __init__(self, source: str, line: int, why: str):
        self.source = source
        self.line = line
        self.why = why
        super().__init__(f"{source}, line {line}: {why}")


class ExperimentExists(SelenaError):
    """An experiment of that name is already deployed on this host."""

    def __init__(self, experiment: str, message: str = ""):
        self.experiment = experiment
        super().__init__(message or (
            f"experiment {experiment} is already deployed on this host: "
            f"`selena destroy {experiment}`, or deploy with --replace / replace=True"))


class ExperimentInUse(ExperimentExists):
    """The experiment's run lock is held by a live process (`pid`, None if it
    wrote none): deploy --replace, destroy and clean leave it alone unless forced."""

    def __init__(self, experiment: str, pid: int | None, action: str, fix: str):
        self.pid = pid
        who = f"pid {pid}" if pid is not None else "a process that wrote no pid"
        super().__init__(experiment, f"experiment {experiment}: its run ({who}) is still "
                                     f"alive; not {action} ({fix})")


class HostLockTimeout(BackendError):
    """The host-wide lock of deploy, destroy and clean stayed taken too long."""


class ArgumentError(ScenarioFileError):
    """A call of the topology API with an argument of the wrong type or an
    unreadable value (add_host(1), ip=167772162, queue="100", memory="lots"),
    raised at the call; `where` is the caller's file:line when the caller is
    outside selena."""

    def __init__(self, where: str | None, message: str):
        super().__init__(where or "", message)
        if not where:
            self.args = (message,)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class HostNotReady(SelenaError):
    """This machine cannot run an experiment yet (not a Xen Dom0, the
    hypervisor lacks the TDF domctl, xenstored or the bridge tool missing...).
    The message is one line: what is missing and the command that fixes it;
    `check` names the failed check of `selena host doctor`."""

    def __init__(self, message: str, check: str | None = None):
        self.check = check
        super().__init__(message)


class HostSetupError(SelenaError):
    """`selena host setup` or `selena host export` cannot go on (a bundle
    that is not one, a file whose sha256 differs from its manifest, no
    source tree to build from, a command that failed); one line naming the
    item and the fix. Nothing is left half-installed."""
