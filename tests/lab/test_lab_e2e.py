"""End to end in the lab: real Xen (patched), real Dom0, real guests."""

import re

import lab_results
import pytest

pytestmark = pytest.mark.lab


def test_dom0_runs_commands_shares_files_and_has_the_tools(lab, tmp_path_factory):
    marker = lab_results.out("lab-e2e-marker.txt")
    script = f"""
set -x
xl list
selena-tdf get 0
selena-tdf get 4242; echo "missing-domain-rc=$?"
selena-tdf set 0 2; echo "self-dilation-rc=$?"
selena-tdf set 1 0.5; echo "range-rc=$?"
xl info | grep -E '^(nr_cpus|free_memory|xen_major|xen_minor|xen_extra) ' | sed 's/^/xl-info /'
selena-tdf host | sed 's/^/tdf-host /'
selena-tdf unpause 4242 4343; echo "unpause-rc=$?"
selena-tdf pause 0; echo "pause-dom0-rc=$?"
ovs-vsctl add-br sl-e2e0 && ip link add sl-e2e-v type veth peer name sl-e2e-p \\
  && tc qdisc add dev sl-e2e-v root netem delay 10ms && tc qdisc show dev sl-e2e-v
python3 -c 'import selena, jinja2, yaml; print("python-ok", selena.__version__)'
echo from-dom0 > {marker}
exit 3
"""
    result = lab.run(["sh", "-c", script], timeout=300)
    out = result.output
    assert result.returncode == 3
    assert re.search(r"^Domain-0\s+0\s", out, re.M)
    assert re.search(r"^1$", out, re.M), "Dom0 runs at TDF 1"
    assert "no such domain: 4242" in out and "missing-domain-rc=1" in out
    assert "self-dilation-rc=1" in out and "not privileged" in out
    assert "TDF out of range: 0.5" in out and "range-rc=2" in out
    # The host facts a deploy checks, read without xl, agree with xl info.
    def fields(prefix: str) -> dict[str, str]:
        return {m[0]: m[1] for m in re.findall(rf"^{prefix} (\w+)\s*: (\S*)", out, re.M)}
    xl_info, tdf_host = fields("xl-info"), fields("tdf-host")
    assert set(tdf_host) == {"nr_cpus", "free_memory", "xen_major", "xen_minor", "xen_extra"}
    assert tdf_host == xl_info, (tdf_host, xl_info)
    # Each domain that cannot be unpaused is named; Dom0 cannot pause itself.
    assert "cannot unpause domain 4242" in out and "cannot unpause domain 4343" in out
    assert "unpause-rc=1" in out and "cannot pause domain 0" in out and "pause-dom0-rc=1" in out
    assert "netem" in out and "delay 10ms" in out
    assert "python-ok" in out
    written = lab.share / marker
    assert written.read_text() == "from-dom0\n"
    written.unlink()



DISK_SCRIPT = r"""
set -e
img=/tmp/sl-disk.img
rm -rf /tmp/sl-disk-root && mkdir -p /tmp/sl-disk-root && echo disk-ok > /tmp/sl-disk-root/marker
mkfs.ext4 -q -F -d /tmp/sl-disk-root -L sldisk "$img" 8M
loop=$(losetup -r -f --show "$img")
echo "loop=$loop"
tpl=/usr/share/selena/templates/tiny-host
cat > /tmp/sl-disk.cfg <<CFG
name = "sl-disk"
type = "pv"
kernel = "$tpl/vmlinuz"
ramdisk = "$tpl/initrd.gz"
memory = 32
disk = [ "phy:$loop,xvda,r" ]
CFG
status=0
timeout 120 xl create -p /tmp/sl-disk.cfg || status=$?
echo "create-rc=$status"
domid=$(xl domid sl-disk 2>/dev/null || true)
be=/local/domain/0/backend/vbd/$domid/51712
echo "hotplug-status=$(xenstore-read $be/hotplug-status 2>/dev/null || true)"
echo "physical-device=$(xenstore-read $be/physical-device 2>/dev/null || true)"
echo "mode=$(xenstore-read $be/mode 2>/dev/null || true)"
echo "loop-dev=$(stat -c '%t:%T' "$loop")"
xl destroy sl-disk 2>/dev/null || true
losetup -d "$loop"
rm -rf "$img" /tmp/sl-disk-root /tmp/sl-disk.cfg
"""


def test_a_read_only_loop_disk_attaches_to_a_guest(lab):
    """Dom0 can hand a disk image to a guest: the loop module is there and
    Xen's block hotplug script completes (it needs /dev/stdin to lock)."""
    result = lab.run(["sh", "-c", DISK_SCRIPT], timeout=300)
    out = result.output
    assert result.returncode == 0, out
    assert re.search(r"^loop=/dev/loop\d+$", out, re.M), out
    assert "create-rc=0" in out, out
    assert "hotplug-status=connected" in out, out
    assert "mode=r" in out, out
    major_minor = re.search(r"^loop-dev=([0-9a-f]+):([0-9a-f]+)$", out, re.M)
    assert major_minor, out
    # The block script records the device it attached, as major:minor in hex.
    assert f"physical-device={major_minor.group(1)}:{major_minor.group(2)}" in out, out
