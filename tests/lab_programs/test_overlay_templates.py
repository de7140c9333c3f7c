"""The lab's Dom0 image gets its templates the way `selena host setup`
installs them on a real host (issue 29 item 4): its templates step, into
the image's root, with the record of what it installed; the disk-image
templates only as their template.yaml (their images stay on the share)."""

import json

import yaml

from selena.control.protocol import PROTOCOL_VERSION
from selena.host.setup import STATE_UNDER, TEMPLATES_UNDER, HostSetup, installed_set
from selena.lab.build import LabBuilder


def test_the_overlay_templates_are_installed_by_host_setups_step(tmp_path):
    kernel = tmp_path / "vmlinuz-guest"
    kernel.write_bytes(b"kernel bytes")
    initrds = {"tiny-host": tmp_path / "tiny.cpio.gz", "tools-host": tmp_path / "tools.cpio.gz"}
    for name, path in initrds.items():
        path.write_bytes(f"{name} initrd".encode())
    disk_spec = {"name": "debian", "kernel": "/var/lib/selena/images/debian-vmlinuz",
                 "ramdisk": "/var/lib/selena/images/debian-initrd.img",
                 "disk": "/var/lib/selena/images/debian.img"}
    root = tmp_path / "root"
    builder = LabBuilder(root=tmp_path / "cache")
    builder._install_templates(root, kernel, initrds, {"debian": yaml.safe_dump(disk_spec)})

    troot = root / TEMPLATES_UNDER
    assert sorted(p.name for p in troot.iterdir()) == ["debian", "tiny-host", "tools-host"]
    for name, initrd in initrds.items():
        assert (troot / name / "initrd.gz").read_bytes() == initrd.read_bytes()
        assert (troot / name / "vmlinuz").read_bytes() == b"kernel bytes"
        spec = yaml.safe_load((troot / name / "template.yaml").read_text())
        # What the doctor's agent-protocol check reads on a set-up host.
        assert spec["protocol"] == PROTOCOL_VERSION
        assert (spec["kernel"], spec["ramdisk"]) == ("vmlinuz", "initrd.gz")
    # The debian template: its spec, no image copied into the image.
    assert sorted(p.name for p in (troot / "debian").iterdir()) == ["template.yaml"]
    debian = yaml.safe_load((troot / "debian" / "template.yaml").read_text())
    assert debian["disk"] == "/var/lib/selena/images/debian.img"
    assert not list((root / "var/lib/selena/images").iterdir())
    # Recorded as host setup records it: a later setup finds nothing to do.
    state = json.loads((root / STATE_UNDER).read_text())
    assert sorted(state["templates"]) == ["debian", "tiny-host", "tools-host"]
    installed = installed_set(root, with_debian=False)
    assert HostSetup(root=root)._differs(installed) == []
