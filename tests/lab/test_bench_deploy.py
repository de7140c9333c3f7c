"""bench-deploy's breakdown of a deploy's commands by program (the
benchmark itself runs in the lab: `selena lab bench-deploy`)."""

from selena.lab.bench_deploy import breakdown
from selena.runner import CommandResult


def test_commands_are_summed_by_program_and_python_modules_by_name():
    history = [CommandResult(("/usr/sbin/xl", "create", "-p"), 0, "", "", 1.5),
               CommandResult(("xl", "create", "-p"), 0, "", "", 1.0),
               CommandResult(("selena-tdf", "set", "3", "1"), 0, "", "", 0.25),
               CommandResult(("/usr/bin/python3", "-m", "selena.backends.vif_tap", "x"), 0, "",
                             "", 0.0)]
    assert breakdown(history) == {"xl": (2, 2.5), "selena-tdf": (1, 0.25),
                                  "selena.backends.vif_tap": (1, 0.0)}
