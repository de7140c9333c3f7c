#!/bin/sh
# Turns a debootstrapped Debian root ($1) into the debian template's root:
# no fstab (the initramfs mounts the overlay root), passwordless root on the
# serial console, the agent started at boot, and the units a lab guest has no
# use for masked (they cost boot time and memory at 128 MB).
set -eu
root=$1
here=$(dirname "$0")
echo selena-guest > "$root/etc/hostname"
: > "$root/etc/machine-id"
printf '# The initramfs mounts the overlay root; nothing else to mount.\n' > "$root/etc/fstab"
chroot "$root" passwd -d root >/dev/null
install -m 644 "$here/selena-agent.service" "$root/etc/systemd/system/selena-agent.service"
ln -sf /etc/systemd/system/selena-agent.service \
    "$root/etc/systemd/system/multi-user.target.wants/selena-agent.service"
# The vifs' driver is loaded early by systemd-modules-load, before the agent
# starts, not whenever udev's coldplug reaches it: with four guests booting
# under emulation that took more than the agent's 10 s wait for each MAC.
echo xen-netfront > "$root/etc/modules-load.d/selena.conf"
# TCP buffers of a normal host, as the tiny templates set them: a small
# guest's memory-scaled defaults cap a window below the bandwidth-delay
# product of the links selena emulates.
cat > "$root/etc/sysctl.d/60-selena.conf" <<'CONF'
net.ipv4.tcp_rmem = 4096 131072 4194304
net.ipv4.tcp_wmem = 4096 16384 4194304
CONF
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
        e2scrub_all.timer e2scrub_reap.service fstrim.timer \
        systemd-tmpfiles-clean.timer getty-static.service getty@.service \
        systemd-journal-flush.service systemd-remount-fs.service \
        sys-kernel-debug.mount sys-kernel-tracing.mount dev-mqueue.mount \
        systemd-random-seed.service proc-sys-fs-binfmt_misc.automount; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
