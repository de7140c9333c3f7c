"""End to end in the lab: the lab's Dom0 is a host selena can run on, as
`selena host doctor` judges it, and the deploy's preflight refuses a host
whose hypervisor lacks the TDF domctl without creating anything."""

import re

import pytest

pytestmark = pytest.mark.lab

# A selena-tdf that answers `get` as it does on a stock hypervisor, first on
# the PATH: the doctor and a run must both name it; the run creates nothing.
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
mkdir -p /tmp/stock
cat > /tmp/stock/selena-tdf <<'TOOL'
#!/bin/sh
if [ "$1" = get ]; then
    echo "selena-tdf: the hypervisor is not patched for time dilation" \
         "(XEN_DOMCTL_selena_tdf unknown)" >&2
    exit 1
fi
exec /usr/sbin/selena-tdf "$@"
TOOL
chmod +x /tmp/stock/selena-tdf
PATH=/tmp/stock:$PATH selena host doctor > /tmp/stock.txt; echo "stock-doctor-rc=$?"
grep '^FAIL' /tmp/stock.txt
PATH=/tmp/stock:$PATH selena run scenarios/two_hosts.py; echo "stock-run-rc=$?"
echo "domains-after=$(xl list | awk 'NR > 2' | wc -l)"
echo "bridges-after=$(ovs-vsctl list-br | grep -c '^sl')"
"""


def test_the_lab_passes_the_doctor_and_a_stock_hypervisor_is_refused_cleanly(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=600)
    out = result.output
    assert "doctor-rc=0" in out and "json-rc=0" in out and "json-ok True" in out, out
    status = dict(re.findall(r"^check (\S+) (\S+)$", out, re.M))
    for must in ("dom0", "tdf-domctl", "xen-version", "xenstored", "openvswitch",
                 "shaping-modules", "templates", "console-log"):
        assert status.get(must) == "ok", (must, status)
    assert "stock-doctor-rc=1" in out and "FAIL tdf-domctl: stock hypervisor" in out, out
    assert "stock-run-rc=1" in out, out
    refusal = [ln for ln in out.splitlines() if ln.startswith("selena: error:")]
    assert len(refusal) == 1 and "stock hypervisor" in refusal[0], out
    assert re.search(r"^domains-after=0$", out, re.M), out
    assert re.search(r"^bridges-after=0$", out, re.M), out
