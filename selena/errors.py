"""Exception classes. Every error selena raises derives from SelenaError.

Subsystems add their own subclasses here so callers (and the CLI) can catch
them precisely. Messages must name the offending item.
"""


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


class TopologyError(ValidationError):
    """A topology or scenario is invalid; `problems` lists every offending item."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        shown = "\n  ".join(self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in the topology:\n  {shown}")


class ScenarioError(SelenaError):
    """A scenario or experiment description file is malformed."""


class BackendError(SelenaError):
    """The virtualization backend could not create, find or remove an object."""


class ControlError(SelenaError):
    """The Xenstore control channel to the guest agents failed."""


class XenstoreError(ControlError):
    """Xenstore refused a request; `code` is its error name (ENOENT, EACCES...)."""

    def __init__(self, code: str, op: str, path: str):
        self.code = code
        self.op = op
        self.path = path
        super().__init__(f"xenstore {op} {path}: {code}")


class ProtocolMismatch(ControlError):
    """A guest agent speaks another control-protocol version, or said nonsense."""


class GuestLost(ControlError):
    """A guest died, hung (no heartbeat) or never started its agent."""

    def __init__(self, guest: str, why: str):
        self.guest = guest
        self.why = why
        super().__init__(f"guest {guest} lost: {why}")


class AnalysisError(SelenaError):
    """Results could not be analysed or plotted (bad input, missing plotting library)."""


class FlowCsvError(AnalysisError):
    """A flowgen CSV is malformed; `source` and `line` (1-based) name the offending row."""

    def __init__(self, source: str, line: int, why: str):
        self.source = source
        self.line = line
        self.why = why
        super().__init__(f"{source}, line {line}: {why}")
