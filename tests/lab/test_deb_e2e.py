"""End to end in the lab: the lab's Dom0 is set up the way a Debian
server is (issue 29 item 4). `selena lab build` builds the Debian package
of the patched hypervisor from the lab's pin, the Dom0 base image installs
it with dpkg beside Debian's xen-utils-4.17, and QEMU boots the hypervisor
file the package installed. So every lab boot goes through the install
path; this test checks that it did, that the package's selena-tdf answers
the running hypervisor, and that the package removes and installs again
cleanly in the running Dom0. One job of the shared boot, a few seconds."""

import gzip
import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "xen-hypervisor-4.17-selena"
LAB_DEB_DIR = "xen-patches/build/lab-deb"

SCRIPT = rf"""
echo "xen-utils=$(dpkg-query -W -f='${{Version}}' xen-utils-4.17)"
dpkg-query -W -f='status=${{Status}} version=${{Version}}\n' {PACKAGE}
echo "tdf-tool=$(command -v selena-tdf)"
zcat /boot/xen-4.17-selena.gz | cmp - xen-patches/out/xen && echo "same-as-built"
tdf=$(selena-tdf get 0); echo "tdf-rc=$? tdf=$tdf"
dpkg -r {PACKAGE} > /dev/null; echo "remove-rc=$?"
test -e /boot/xen-4.17-selena.gz || echo "boot-file-removed"
test -e /usr/sbin/selena-tdf || echo "tool-removed"
dpkg -i {LAB_DEB_DIR}/*.deb > /dev/null; echo "reinstall-rc=$?"
tdf=$(selena-tdf get 0); echo "again-tdf-rc=$? tdf=$tdf"
"""


def _packaged_hypervisor(deb: Path) -> bytes:
    """The hypervisor a .deb installs, unpacked as the lab build unpacks it."""
    data = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("./boot/xen-4.17-selena.gz")
        assert member is not None
        return gzip.decompress(member.read())


def test_the_lab_boots_the_hypervisor_its_dom0_installed_from_the_package(lab):
    out = lab.run(["sh", "-c", SCRIPT], timeout=300).output
    source = (ROOT / "xen-patches/SOURCE").read_text()
    version = re.search(r"^version (\S+)", source, re.M).group(1)
    assert f"xen-utils={version}" in out, out          # the Dom0 runs the pin's tools
    assert f"status=install ok installed version={version}+selena" in out, out
    assert "tdf-tool=/usr/sbin/selena-tdf" in out, out     # the package's, not a copy
    assert "same-as-built" in out, out
    assert re.search(r"^tdf-rc=0 tdf=\d", out, re.M), out
    assert "remove-rc=0" in out and "boot-file-removed" in out and "tool-removed" in out, out
    assert "reinstall-rc=0" in out and re.search(r"^again-tdf-rc=0 tdf=\d", out, re.M), out
    # What QEMU booted is the file the package installs, byte for byte.
    debs = sorted((ROOT / LAB_DEB_DIR).glob("*.deb"))
    assert len(debs) == 1, debs
    booted = lab.lab.artefacts.xen
    assert booted.read_bytes() == _packaged_hypervisor(debs[0]), booted
