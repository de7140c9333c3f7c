"""End to end in the lab: Dom0's selena (the tree copied into the overlay,
no pip metadata) after the lab was set apart from the product (issue 35 item
4): the CLI works without the lab's entry point, loads the lab only through
it, the moved template builders import under their old and new names, and
the lab's in-Dom0 programs still start as `python3 -m selena.lab.…`."""

import pytest

pytestmark = pytest.mark.lab

PROBE = """
import sys
import selena.cli
parser = selena.cli.build_parser()
plugins = sorted(selena.cli.plugin_modules())
print("plugins", plugins)
print("lab-modules", sorted(m for m in sys.modules if m.startswith("selena.lab")))
import selena.lab.build, selena.lab.images, selena.templates.build, selena.templates.images
print("same-builder", selena.lab.build.GuestContents is selena.templates.build.GuestContents,
      issubclass(selena.lab.build.LabBuilder, selena.templates.build.TemplateBuilder),
      selena.lab.images.DebianImages is selena.templates.images.DebianImages)
"""


def test_dom0_selena_runs_with_the_lab_apart(lab):
    script = f"""
selena --help >/tmp/help.txt; echo "help-rc=$?"
grep -q '^    run ' /tmp/help.txt && echo help-lists-run
python3 -c '{PROBE}'; echo "probe-rc=$?"
python3 -m selena.lab.check_clock --help >/dev/null; echo "check-clock-rc=$?"
"""
    result = lab.run(["sh", "-c", script], timeout=120)
    out = result.output
    assert "help-rc=0" in out and "probe-rc=0" in out, out[-3000:]
    assert "help-lists-run" in out and "check-clock-rc=0" in out
    lines = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in out.splitlines()
             if line.startswith(("plugins ", "lab-modules ", "same-builder "))}
    assert lines["same-builder"] == "True True True"
    # The product's CLI pulls the lab in only as a registered plugin.
    if "'lab'" not in lines["plugins"]:
        assert lines["lab-modules"] == "[]"
