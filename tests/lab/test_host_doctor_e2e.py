"""End to end in the lab: the lab's Dom0 is a host selena can run on, as
`selena host doctor` judges it (its text and its JSON). A Dom0 on Debian's
stock hypervisor, which the doctor and the deploy's preflight refuse, is
tests/lab/test_stock_hypervisor_e2e.py's own boot."""

import re

import pytest

pytestmark = pytest.mark.lab

SCRIPT = r"""
selena host doctor; echo "doctor-rc=$?"
selena host doctor --json > /tmp/doctor.json; echo "json-rc=$?"
python3 -c '
import json
report = json.load(open("/tmp/doctor.json"))
print("json-ok", report["ok"])
for check in report["checks"]:
    print("check", check["name"], check["status"])
'
"""


def test_the_lab_passes_the_doctor(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=600)
    out = result.output
    assert "doctor-rc=0" in out and "json-rc=0" in out and "json-ok True" in out, out
    status = dict(re.findall(r"^check (\S+) (\S+)$", out, re.M))
    for must in ("dom0", "tdf-domctl", "xen-version", "xenstored", "openvswitch",
                 "shaping-modules", "templates", "console-log", "device-model"):
        assert status.get(must) == "ok", (must, status)
