"""End to end in the lab: the Debian package of the patched hypervisor
installs with dpkg in the lab's Dom0 (a Debian bookworm Dom0 with Debian's
xen-utils-4.17), holds exactly the hypervisor the lab booted, its selena-tdf
answers the running hypervisor, and it removes cleanly. One job of the
shared boot, a few seconds.

The package is built on the host from the lab's pin (XEN_PIN=SOURCE): its
hypervisor is the one `selena lab build` built and QEMU boots
(xen-patches/out/xen), taken from the same cache."""

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "xen-hypervisor-4.17-selena"

SCRIPT = rf"""
deb=$(ls xen-patches/build/deb/*.deb)
echo "xen-utils=$(dpkg-query -W -f='${{Version}}' xen-utils-4.17)"
dpkg -i "$deb"; echo "dpkg-rc=$?"
dpkg-query -W -f='status=${{Status}} version=${{Version}}\n' {PACKAGE}
zcat /boot/xen-4.17-selena.gz | cmp - xen-patches/out/xen && echo "same-as-booted"
test -f /etc/default/grub.d/selena-xen.cfg && echo "grub-snippet"
tdf=$(/usr/sbin/selena-tdf get 0); echo "tdf-rc=$? tdf=$tdf"
dpkg -r {PACKAGE} > /dev/null; echo "remove-rc=$?"
test -e /boot/xen-4.17-selena.gz || echo "boot-file-removed"
"""


def test_the_package_installs_in_the_lab_dom0_and_holds_the_booted_hypervisor(lab):
    subprocess.run(["make", "-s", "-C", str(ROOT / "xen-patches"), "deb", "XEN_PIN=SOURCE"],
                   check=True)
    source = (ROOT / "xen-patches/SOURCE").read_text()
    version = re.search(r"^version (\S+)", source, re.M).group(1)
    out = lab.run(["sh", "-c", SCRIPT], timeout=300).output
    assert f"xen-utils={version}" in out, out          # the Dom0 runs the pin's tools
    assert "dpkg-rc=0" in out, out
    assert f"status=install ok installed version={version}+selena" in out, out
    assert "same-as-booted" in out and "grub-snippet" in out, out
    assert re.search(r"^tdf-rc=0 tdf=\d", out, re.M), out
    assert "remove-rc=0" in out and "boot-file-removed" in out, out
