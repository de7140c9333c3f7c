"""The host selena runs on: is it ready for a run (`selena host doctor`)."""

from selena.host.doctor import (
    Check,
    HostProbe,
    Status,
    preflight,
    preflight_for_runner,
    run_checks,
)

__all__ = ["Check", "HostProbe", "Status", "preflight", "preflight_for_runner", "run_checks"]
