"""netem: delay, jitter, loss and the queue limit of a link direction."""

from __future__ import annotations


def netem_args(delay_s: float, jitter_s: float, loss: float, limit: int | None) -> list[str]:
    """The netem parameters after `netem`, in tc's units (microseconds, percent)."""
    args: list[str] = []
    if limit is not None:
        args += ["limit", str(limit)]
    if delay_s > 0 or jitter_s > 0:
        args += ["delay", f"{round(delay_s * 1e6)}us"]
        if jitter_s > 0:
            args += [f"{round(jitter_s * 1e6)}us"]
    if loss > 0:
        args += ["loss", f"{loss * 100:.6g}%"]
    return args
