"""End to end in the lab: `selena host export` packs the templates the lab's
Dom0 has installed, `selena host setup` installs them from that bundle into
a temporary root (a dry run first, which changes nothing; a second run,
which has nothing to do), and `selena host doctor` passes on what it
installed. Uses the shared boot; about half a minute of lab time (the
bundle is the four initramfs templates, about 45 MB)."""

import re

import pytest

pytestmark = pytest.mark.lab

SCRIPT = r"""
d=/tmp/host-setup-e2e
rm -rf $d; mkdir -p $d
selena host export $d/bundle.tar --installed; echo "export-rc=$?"
selena host setup --dry-run --from $d/bundle.tar --root $d/root; echo "dry-rc=$?"
selena host setup --dry-run --without analysis --from $d/bundle.tar --root $d/root \
    | grep '^\[1/5\]'; echo "dry-without-rc=$?"
echo "after-dry=$(ls -A $d/root 2>/dev/null | wc -l)"
selena host setup --from $d/bundle.tar --root $d/root; echo "setup-rc=$?"
selena host setup --from $d/bundle.tar --root $d/root; echo "again-rc=$?"
selena host doctor --root $d/root; echo "doctor-rc=$?"
t=$d/root/usr/share/selena/templates
cmp $t/tiny-host/initrd.gz /usr/share/selena/templates/tiny-host/initrd.gz && echo same-initrd
cmp $t/ovs-switch/vmlinuz /usr/share/selena/templates/ovs-switch/vmlinuz && echo same-kernel
echo "modules-load=$(wc -l < $d/root/etc/modules-load.d/selena.conf)"
selena host setup --from $d/nothing.tar --root $d/root; echo "missing-rc=$?"
rm -rf $d
"""


def test_host_setup_installs_an_exported_bundle_and_the_doctor_passes(lab):
    result = lab.run(["sh", "-c", SCRIPT], timeout=600)
    out = result.output
    for rc in ("export", "dry", "setup", "again", "doctor"):
        assert f"{rc}-rc=0" in out, (rc, out)
    assert re.search(r"^export: 4 templates \(of-controller, ovs-switch, tiny-host, tools-host\)",
                     out, re.M), out
    # The dry run said every step and changed nothing.
    dry = out.split("dry-rc=0")[0].split("export-rc=0")[1]
    assert "[5/5] guest templates: would" in dry and "install tiny-host into" in dry, dry
    assert "[3/5] modules at boot: would" in dry and "dry run, nothing was changed" in dry, dry
    assert "after-dry=0" in out, out
    setup = out.split("setup-rc=0")[0].split("after-dry=0")[1]
    assert "installed tiny-host" in setup and "host setup: done" in setup, setup
    # Open vSwitch runs in the lab's Dom0 and the modules are loaded: nothing to do.
    assert "[4/5] Open vSwitch: nothing to do" in setup, setup
    assert "[2/5] kernel modules: nothing to do" in setup, setup
    again = out.split("again-rc=0")[0].split("setup-rc=0")[1]
    assert "host setup: nothing to do, this host is set up" in again, again
    assert re.search(r"^ok   templates: of-controller, ovs-switch, tiny-host, tools-host "
                     r"installed; not built \(optional\): debian, qjump-host", out, re.M), out
    assert re.search(r"^ok   agent-protocol: protocol \d+ ", out, re.M), out
    assert "same-initrd" in out and "same-kernel" in out, out
    assert re.search(r"^modules-load=2\d$", out, re.M), out
    assert "missing-rc=1" in out and "selena: error: bundle /tmp/host-setup-e2e/nothing.tar: " \
        "no such file" in out, out
    # The lab's Dom0 has the analysis extra (its read-only share: selena/lab/
    # build.py), as a set-up host does; --without leaves the step out.
    assert "[1/5] analysis (scipy, matplotlib): nothing to do (scipy and matplotlib import)" \
        in dry, dry
    assert "[1/5] analysis (scipy, matplotlib): nothing to do (left out (--without analysis))" \
        in out and "dry-without-rc=0" in out, out
