"""End to end in the lab: time dilation's own XSM permissions under Flask.
The hypervisor built with Flask and Xen's policy (`make -C xen-patches
flask`: the same series and configuration as the package's, plus Flask),
booted enforcing; Dom0 dilates a guest under Xen's policy and is refused,
with nothing changed and the denials logged, under the same policy without
domain2:gettdf/settdf (selena/lab/check_hv.py, check xsm). A boot of its
own (issue 31 item 6)."""

import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from selena.lab.build import FLASK_XEN_ARGS, LabBuilder
from selena.lab.qemu import Lab

pytestmark = [pytest.mark.lab, pytest.mark.own_lab]

ROOT = Path(__file__).resolve().parents[2]


def test_flask_refuses_time_dilation_without_its_own_permissions(lab, own_lab):
    subprocess.run(["make", "-s", "-C", str(ROOT / "xen-patches"), "tickguest", "tdfrestore"],
                   check=True)
    usual = lab.lab.artefacts
    flask = LabBuilder(lab.lab.runner, lab.lab.progress).flask_hypervisor()
    assert flask != usual.xen and b"settdf" in flask.read_bytes()   # Xen's policy, built in
    script = ("xl info | grep -E '^xen_commandline'; xl getenforce; "
              "python3 -m selena.lab.check_hv xsm; echo check-xsm-rc=$?")
    out = Lab(artefacts=dataclasses.replace(usual, xen=flask, xen_args=FLASK_XEN_ARGS)).run(
        ["sh", "-c", script], timeout=600).output
    assert re.search(r"^xen_commandline\s*:.*\bflask=enforcing\b", out, re.M), out
    assert "check-xsm-rc=0" in out, out
    for argv in ("status", "set", "freeze"):
        assert re.search(rf"^xsm: selena-tdf {argv} \d+.* -> rc 1: .*XSM policy does not allow",
                         out, re.M), (argv, out)
    assert "xsm: restore into a never-run domain without settdf -> errno 13 EACCES" in out, out
    assert "xsm: the same restore under Xen's policy -> ok" in out, out
    print(out)
