"""The kernel modules a Dom0 running selena loads: one list for a real host
(`selena host setup` loads them and persists them in modules-load.d) and for
the lab's Dom0 (selena/lab/build.py builds its image with them, plus what
the emulated machine itself needs)."""

from __future__ import annotations

# Xen's backends, bridges, every qdisc, classifier and action selena's shaping
# and capture use, and loop for the disk-image templates. The doctor's lists
# (selena/host/doctor.py) are subsets of this one (a test says so).
HOST_MODULES = (
    "xen-evtchn", "xen-gntdev", "xen-gntalloc", "xen-privcmd", "xenfs",
    "xen-netback", "xen-blkback", "bridge", "openvswitch", "sch_netem",
    "sch_htb", "sch_tbf", "sch_prio", "ifb", "veth",
    "cls_u32", "cls_matchall", "act_mirred", "sch_ingress",
    # libcrc32c (needed by openvswitch) soft-depends on a crc32c implementation.
    "crc32c_generic",
    # Disk images reach guests as read-only loop devices (xl's phy: disks).
    "loop",
)
# Only the lab's emulated machine needs these: its 9p shares over virtio.
LAB_ONLY_MODULES = ("9p", "9pnet_virtio", "virtio_pci")
# Where a host's list persists (systemd-modules-load reads it at boot).
MODULES_LOAD_FILE = "etc/modules-load.d/selena.conf"
