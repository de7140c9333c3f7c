#!/usr/bin/env bash
# Apply the series patch by patch to the lab's pinned source (SOURCE) and
# build the x86 hypervisor after each one that changes code, with Debian's
# configuration: every patch must build on its own, not only the whole
# series; and the whole series again with the option off.  Incremental
# builds after a first full one; about 15 minutes on
# two cores.  Cached by the hash of its inputs, so a second run of the same
# series is instant.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pin="$here/SOURCE"
cache_root=${SELENA_CACHE:-$HOME/.cache/selena}
key=$( (cat "$pin"; cd "$here" && cat series $(cat series) scripts/check-each-patch.sh) \
        | sha256sum | cut -c1-16)
stamp="$cache_root/each-patch/$key"
if [ -f "$stamp" ]; then
    echo "every patch builds on its own and tools/tests/time-dilation passes: cached ($stamp)"
    exit 0
fi
start=$(date +%s)
"$here/scripts/fetch-source.sh" "$pin" "$cache_root/src/xen"
work="$here/build/each-patch"
src="$work/xen-src"
rm -rf "$work"
mkdir -p "$work"
dpkg-source -x "$cache_root/src/xen/$(awk '$1=="sha256" && $3 ~ /\.dsc$/ {print $3}' "$pin")" \
    "$src" >/dev/null 2>&1
args=(XEN_TARGET_ARCH=x86_64)
cp "$src/debian/xen-kconfig" "$src/xen/.config"
make -s -C "$src/xen" "${args[@]}" olddefconfig >/dev/null
n=0
while read -r p; do
    [ -n "$p" ] || continue
    n=$((n + 1))
    patch -d "$src" -p1 -F0 --quiet --forward < "$here/$p"
    # A patch that changes nothing under xen/ (documentation, tests) needs
    # no build of the hypervisor.
    if ! grep -q '^+++ b/xen/' "$here/$p"; then
        echo "$p: nothing under xen/"
        continue
    fi
    # The series' option on, as every build of ours has it, from the patch
    # that adds it (before it, kconfig would drop the unknown symbol).
    if grep -q '^config TIME_DILATION$' "$src/xen/common/Kconfig" &&
       ! grep -qx CONFIG_TIME_DILATION=y "$src/xen/.config"; then
        echo CONFIG_TIME_DILATION=y >> "$src/xen/.config"
        make -s -C "$src/xen" "${args[@]}" olddefconfig >/dev/null
    fi
    t=$(date +%s)
    if ! make -s -C "$src/xen" "${args[@]}" -j2 > "$work/build-$n.log" 2>&1; then
        tail -30 "$work/build-$n.log" >&2
        echo "$p does not build on its own (log: $work/build-$n.log)" >&2
        exit 1
    fi
    echo "$p: builds ($(( $(date +%s) - t )) s)"
done < "$here/series"
grep -qx CONFIG_TIME_DILATION=y "$src/xen/.config" || {
    echo "the last build did not have CONFIG_TIME_DILATION on" >&2
    exit 1
}
test -f "$src/xen/common/time_dilation.o" || { echo "time_dilation.o not built" >&2; exit 1; }
# The series' user-space tests in the patched tree, as their Makefile runs
# them. They need nothing ./configure finds (and Debian's source has no
# configure script): an empty config/Tools.mk stands in for its output.
touch "$src/config/Tools.mk"
if ! make -s -C "$src/tools/tests/time-dilation" run > "$work/unit.log" 2>&1 ||
   [ "$(grep -c 'all checks passed' "$work/unit.log")" != 2 ]; then
    tail -30 "$work/unit.log" >&2
    echo "tools/tests/time-dilation fails in the patched tree (log: $work/unit.log)" >&2
    exit 1
fi
rm "$src/config/Tools.mk"
# And the whole series with the option off (upstream's default): the stubs
# of <xen/tdf.h> must build, and the dilation code must not be linked.
sed -i 's/^CONFIG_TIME_DILATION=y$/# CONFIG_TIME_DILATION is not set/' "$src/xen/.config"
make -s -C "$src/xen" "${args[@]}" olddefconfig >/dev/null
t=$(date +%s)
if ! make -s -C "$src/xen" "${args[@]}" -j2 > "$work/build-off.log" 2>&1; then
    tail -30 "$work/build-off.log" >&2
    echo "the series does not build with CONFIG_TIME_DILATION off (log: $work/build-off.log)" >&2
    exit 1
fi
if nm "$src/xen/xen-syms" | grep -qw domain_set_tdf; then
    echo "CONFIG_TIME_DILATION off, but the dilation code is linked in" >&2
    exit 1
fi
echo "the series with CONFIG_TIME_DILATION off: builds ($(( $(date +%s) - t )) s)"
mkdir -p "$(dirname "$stamp")"
touch "$stamp"
echo "every patch builds on its own and tools/tests/time-dilation passes, in $(( $(date +%s) - start )) s"
