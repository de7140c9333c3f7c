#!/usr/bin/env bash
# Cross-build the patched hypervisor for arm64 (Debian's gcc-aarch64-linux-gnu):
# the series' common code must build for every architecture.  Prints the time.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache_root=${SELENA_CACHE:-$HOME/.cache/selena}
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
make -s -C "$work/xen-src/xen" "${args[@]}" -j2 > "$work/build.log" 2>&1 || {
    tail -30 "$work/build.log" >&2
    exit 1
}
file "$work/xen-src/xen/xen-syms" | grep -q 'ARM aarch64' || { echo "not an arm64 image" >&2; exit 1; }
echo "arm64 hypervisor with the series built in $(( $(date +%s) - start )) s"
