"""End to end in the lab: a Dom0 booted on Debian's stock hypervisor
(bookworm's xen-hypervisor-4.17-amd64, unpatched), with selena and its
hypervisor package's selena-tdf installed as on a server where that
package was installed but never booted. `selena host doctor` names the
stock hypervisor with the fix, and `selena run` refuses in one line before
creating anything (issue 29 item 4). A boot of its own, about two minutes."""

import dataclasses
import re

import pytest

from selena.lab.build import LabBuilder
from selena.lab.qemu import Lab

pytestmark = [pytest.mark.lab, pytest.mark.own_lab]

SCRIPT = r"""
xl info | grep -E '^xen_(version|extra|changeset)'
selena host doctor > /tmp/doctor.txt; echo "doctor-rc=$?"
grep -E '^(FAIL|ok  ) (tdf-domctl|dom0|xenstored)' /tmp/doctor.txt
selena run scenarios/two_hosts.py; echo "run-rc=$?"
echo "domains-after=$(xl list | awk 'NR > 2' | wc -l)"
echo "bridges-after=$(ovs-vsctl list-br | grep -c '^sl')"
"""


def test_a_dom0_on_debians_stock_hypervisor_is_named_by_the_doctor_and_refused(lab, own_lab):
    usual = lab.lab.artefacts
    stock = LabBuilder(lab.lab.runner, lab.lab.progress).stock_hypervisor()
    assert stock != usual.xen and stock.read_bytes() != usual.xen.read_bytes()
    out = Lab(artefacts=dataclasses.replace(usual, xen=stock)).run(
        ["sh", "-c", SCRIPT], timeout=900).output
    assert re.search(r"^xen_version\s*: 4\.17", out, re.M), out
    assert "ok   dom0" in out and "ok   xenstored" in out, out      # Xen runs: only the TDF fails
    assert "doctor-rc=1" in out and "FAIL tdf-domctl: stock hypervisor" in out, out
    assert "run-rc=1" in out, out
    refusal = [ln for ln in out.splitlines() if ln.startswith("selena: error:")]
    assert len(refusal) == 1 and "stock hypervisor" in refusal[0], out
    assert re.search(r"^domains-after=0$", out, re.M), out
    assert re.search(r"^bridges-after=0$", out, re.M), out
