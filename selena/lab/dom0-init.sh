#!/bin/sh
# /init of the lab's Dom0 (an initramfs under Xen in QEMU).
# Kernel command line: selena.run=ID runs /selena-src/build/lab-run/ID/cmd.sh
# and powers off; without it an interactive shell is started on the console.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/xen-4.17/bin
export HOME=/root LANG=C.UTF-8

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
# devtmpfs has no /dev/fd or /dev/std* (udev makes them elsewhere); Xen's
# block hotplug script locks through /dev/stdin and without it loops until
# libxl kills it ("async_exec_timeout ... /etc/xen/scripts/block add").
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mkdir -p /dev/pts /dev/shm /run /tmp /var/run
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
ln -sf /run /var/run 2>/dev/null
hostname selena-lab-dom0

# Minbase has no init system: busybox powers off (Xen then stops, QEMU exits).
off() { sync; busybox poweroff -f; sleep 30; }
fail() { echo "SELENA-LAB-FAIL $*"; off; }

# The build writes the list (selena/lab/build.py's DOM0_MODULES), so the
# modules in the image and the modules loaded are one list.
for m in $(cat /etc/selena/dom0-modules); do
    modprobe "$m" || echo "selena-lab: modprobe $m failed"
done
mount -t xenfs xenfs /proc/xen || fail "cannot mount xenfs (not running under Xen?)"

mkdir -p /var/run/xen /var/log/xen/console /var/lib/xen /var/run/xenstored
oxenstored --pid-file /run/xenstored.pid || xenstored --pid-file /run/xenstored.pid \
    || fail "cannot start xenstored"
xen-init-dom0 || fail "xen-init-dom0 failed"
xenconsoled --log=guest --log-dir=/var/log/xen/console --timestamp=guest &

# Open vSwitch with the kernel datapath.
mkdir -p /etc/openvswitch /var/run/openvswitch /var/log/openvswitch
ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server --remote=punix:/var/run/openvswitch/db.sock --pidfile --detach \
    --log-file=/var/log/openvswitch/ovsdb-server.log
ovs-vsctl --no-wait init
ovs-vswitchd --pidfile --detach --log-file=/var/log/openvswitch/ovs-vswitchd.log
ip link set lo up

mkdir -p /selena-src
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 selena /selena-src \
    || echo "selena-lab: no project share (9p) mounted"
# Disk images and kernels of the debian templates (read-only).
mkdir -p /var/lib/selena/images
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro selena-images \
    /var/lib/selena/images 2>/dev/null || echo "selena-lab: no images share (9p) mounted"
# scipy and matplotlib (read-only; selena-analysis.pth puts them on the path).
mkdir -p /usr/local/lib/selena-analysis
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro selena-analysis \
    /usr/local/lib/selena-analysis 2>/dev/null \
    || echo "selena-lab: no analysis share (9p) mounted"

run_id=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        selena.run=*) run_id="${arg#selena.run=}" ;;
    esac
done

if [ -n "$run_id" ]; then
    # Jobs: build/lab-run/ID/jobs/NNNN.sh, run in order until `stop` exists
    # and none is left. Between jobs, whatever a job left behind goes.
    dir="/selena-src/build/lab-run/$run_id"
    [ -d "$dir/jobs" ] || fail "no job directory $dir/jobs"
    echo "SELENA-LAB-READY"
    while :; do
        job=$(ls "$dir"/jobs/*.sh 2>/dev/null | head -n 1)
        if [ -z "$job" ]; then
            [ -e "$dir/stop" ] && break
            sleep 0.2
            continue
        fi
        name=$(basename "$job" .sh)
        mv "$job" "$dir/jobs/$name.run"
        cd /selena-src
        echo "SELENA-LAB-BEGIN $name"
        sh "$dir/jobs/$name.run" </dev/null
        rc=$?
        echo "$rc" > "$dir/jobs/$name.status"
        sync
        echo "SELENA-LAB-EXIT $name $rc"
        selena clean >/dev/null 2>&1
        for d in $(xl list 2>/dev/null | awk 'NR > 2 {print $1}'); do xl destroy "$d"; done
    done
else
    echo "SELENA-LAB-SHELL (exit the shell to power off)"
    cd /selena-src 2>/dev/null || cd /
    setsid sh -c 'exec sh -i </dev/hvc0 >/dev/hvc0 2>&1'
fi
# Leave no guest running, then power off (Xen stops and QEMU exits).
for d in $(xl list 2>/dev/null | awk 'NR > 2 {print $1}'); do xl destroy "$d"; done
off
