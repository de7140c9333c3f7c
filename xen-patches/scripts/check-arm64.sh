#!/usr/bin/env bash
# Cross-build the patched hypervisor for arm64 (Debian's gcc-aarch64-linux-gnu):
# the series' common code must build for every architecture.  Prints the time.
# Cached by its inputs (the pin, the series, this script): instant again.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${SELENA_CACHE:-$HOME/.cache/selena}
key=$( (cat "$here/SOURCE"; cd "$here" && cat series $(cat series) scripts/check-arm64.sh) \
        | sha256sum | cut -c1-16)
stamp="$cache_root/arm64/$key"
if [ -f "$stamp" ]; then
    echo "arm64 hypervisor with the series builds: cached ($stamp)"
    exit 0
fi
# .ci/host-deps installs it; a developer's machine may not have it yet.
command -v aarch64-linux-gnu-gcc >/dev/null || {
    echo "installing gcc-aarch64-linux-gnu (apt)" >&2
    apt-get install -y -q gcc-aarch64-linux-gnu >/dev/null
}
start=$(date +%s)
"$here/scripts/fetch-source.sh" "$here/SOURCE" "$cache_root/src/xen"
work="$here/build/arm64"
rm -rf "$work"
mkdir -p "$work"
dpkg-source -x "$cache_root/src/xen/$(awk '$1=="sha256" && $3 ~ /\.dsc$/ {print $3}' "$here/SOURCE")" \
    "$work/xen-src" >/dev/null 2>&1
while read -r p; do
    [ -n "$p" ] || continue
    patch -d "$work/xen-src" -p1 -F0 --quiet --forward < "$here/$p"
done < "$here/series"
args=(XEN_TARGET_ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-)
make -s -C "$work/xen-src/xen" "${args[@]}" defconfig >/dev/null
# The series' option is off by default: the check must compile its code.
echo CONFIG_TIME_DILATION=y >> "$work/xen-src/xen/.config"
make -s -C "$work/xen-src/xen" "${args[@]}" olddefconfig >/dev/null
grep -qx CONFIG_TIME_DILATION=y "$work/xen-src/xen/.config" || {
    echo "CONFIG_TIME_DILATION is not on in the arm64 configuration" >&2
    exit 1
}
# Arm's default has Flask: the series' XSM hook and its Flask side compile.
grep -qx CONFIG_XSM_FLASK=y "$work/xen-src/xen/.config" || {
    echo "no Flask in the arm64 configuration: the XSM hook would go unbuilt" >&2
    exit 1
}
make -s -C "$work/xen-src/xen" "${args[@]}" -j2 > "$work/build.log" 2>&1 || {
    tail -30 "$work/build.log" >&2
    exit 1
}
file "$work/xen-src/xen/xen-syms" | grep -q 'ARM aarch64' || { echo "not an arm64 image" >&2; exit 1; }
test -f "$work/xen-src/xen/common/time_dilation.o" || {
    echo "the arm64 hypervisor was built without the time dilation code" >&2
    exit 1
}
mkdir -p "$(dirname "$stamp")"
touch "$stamp"
rm -rf "$work"
echo "arm64 hypervisor with the series builds: built in $(( $(date +%s) - start )) s"
