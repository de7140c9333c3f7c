#!/usr/bin/env bash
# Build the patched hypervisor and selena-tdf, cached by the hash of their inputs.
#   build.sh OUTDIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$1
cache_root=${SELENA_CACHE:-$HOME/.cache/selena}
key=$(cd "$here" && cat SOURCE series $(cat series) tool/*.c tool/*.h scripts/build.sh \
      | sha256sum | cut -c1-16)
cached="$cache_root/xen/$key"

if [ -f "$cached/.complete" ]; then
    echo "patched Xen: cached ($cached)"
else
    start=$(date +%s)
    "$here/scripts/fetch-source.sh" "$cache_root/src/xen"
    work="$here/build"
    rm -rf "$work/xen-src"
    mkdir -p "$work"
    echo "unpacking the xen source"
    dpkg-source -x "$cache_root/src/xen/$(awk '$1=="sha256" && $3 ~ /\.dsc$/ {print $3}' "$here/SOURCE")" \
        "$work/xen-src" >/dev/null
    echo "applying $(wc -l < "$here/series") patches"
    while read -r p; do
        [ -n "$p" ] || continue
        patch -d "$work/xen-src" -p1 --quiet --forward < "$here/$p"
    done < "$here/series"
    echo "building the hypervisor (make -j2, about a minute)"
    make -s -C "$work/xen-src/xen" olddefconfig >/dev/null
    make -s -C "$work/xen-src/xen" -j2 > "$work/xen-build.log" 2>&1 || {
        tail -30 "$work/xen-build.log" >&2
        exit 1
    }
    echo "building selena-tdf"
    mkdir -p "$work/tool"
    cc -O2 -Wall -Wextra -Werror -o "$work/tool/selena-tdf" "$here/tool/selena-tdf.c" -lxenctrl
    tmp="$cached.tmp.$$"
    mkdir -p "$tmp"
    cp "$work/xen-src/xen/xen" "$work/xen-src/xen/xen.gz" "$work/tool/selena-tdf" "$tmp/"
    echo "$(( $(date +%s) - start ))" > "$tmp/build-seconds"
    touch "$tmp/.complete"
    rm -rf "$cached"
    mv "$tmp" "$cached"
    echo "patched Xen built in $(cat "$cached/build-seconds") s"
fi
mkdir -p "$out"
cp "$cached/xen" "$cached/xen.gz" "$cached/selena-tdf" "$cached/build-seconds" "$out/"
