#!/usr/bin/env bash
# Assemble the Debian package of the patched hypervisor.
#   build-deb.sh PIN OUTDIR
# The hypervisor and selena-tdf come from build.sh (cached by its inputs: no
# second Xen build); only the package is assembled here, without root
# (dpkg-deb --root-owner-group) and reproducibly: every date is the source's
# changelog date, gzip -n, fixed modes, one file order. OUTDIR ends up holding
# exactly one .deb.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pin=$(realpath "$1")
outdir=$2
[ "$(dpkg --print-architecture)" = amd64 ] || {
    echo "the package holds an x86_64 hypervisor: build it on amd64, not $(dpkg --print-architecture)" >&2
    exit 1
}
stage=$(mktemp -d "${TMPDIR:-/tmp}/selena-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT

"$here/scripts/build.sh" "$stage/hv" "$pin"
hv="$stage/hv"
srcversion=$(cat "$hv/source-version")
version="$srcversion+$(cat "$here/deb/revision")"
maintainer=$(cat "$here/deb/maintainer")
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(cat "$hv/source-date-epoch")
pkg=xen-hypervisor-4.17-selena
doc=usr/share/doc/$pkg
root="$stage/root"

umask 022
install -d "$root/boot" "$root/usr/sbin" "$root/usr/share/man/man8" "$root/$doc" \
    "$root/etc/default/grub.d" "$root/DEBIAN"
# The name Debian's GRUB script (20_linux_xen) lists, beside xen-4.17-amd64.gz.
gzip -n -9 < "$hv/xen" > "$root/boot/xen-4.17-selena.gz"
install -m 644 "$hv/xen.config" "$root/boot/xen-4.17-selena.config"
install -m 755 "$hv/selena-tdf" "$root/usr/sbin/selena-tdf"
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
    "$root/usr/sbin/selena-tdf"
gzip -n -9 < "$here/deb/selena-tdf.8" > "$root/usr/share/man/man8/selena-tdf.8.gz"
install -m 644 "$here/deb/selena-xen.cfg" "$root/etc/default/grub.d/selena-xen.cfg"
install -m 644 "$here/deb/README.Debian" "$root/$doc/"
# The hypervisor's copyright is that of Debian's xen source package; selena's
# part (the series, selena-tdf) follows.
debian_tar=$(awk '$1 == "sha256" && $3 ~ /\.debian\.tar\./ {print $3}' "$pin")
{ tar -xOf "${SELENA_CACHE:-$HOME/.cache/selena}/src/xen/$debian_tar" debian/copyright
  echo; cat "$here/deb/copyright"; } > "$root/$doc/copyright"
sed -e "s|@VERSION@|$version|g; s|@SRCVERSION@|$srcversion|g" \
    -e "s|@PATCHES@|$(grep -c . "$here/series")|g; s|@MAINTAINER@|$maintainer|g" \
    -e "s|@DATE@|$(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")|g" \
    "$here/deb/changelog.in" | gzip -n -9 > "$root/$doc/changelog.Debian.gz"

install -m 755 "$here/deb/postinst" "$here/deb/postrm" "$root/DEBIAN/"
echo /etc/default/grub.d/selena-xen.cfg > "$root/DEBIAN/conffiles"

# selena-tdf's libraries, as dpkg-shlibdeps finds them (it wants a
# debian/control to read).
mkdir -p "$stage/shlibs/debian"
printf 'Source: selena-xen\n\nPackage: %s\nArchitecture: amd64\n' "$pkg" \
    > "$stage/shlibs/debian/control"
# libxenctrl's lower bound is the source's own version, not that of this
# machine's libxen-dev (which may be newer, as when the lab's base is
# packaged on an up-to-date host): selena-tdf uses only calls that are the
# same across 4.17 (soname libxenctrl.so.4.17), and xen-utils-4.17 (= the
# source version) needs at least that libxenmisc4.17 anyway.
shlibs=$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$root/usr/sbin/selena-tdf" 2>/dev/null \
         | sed -n 's/^shlibs:Depends=//p' \
         | sed -E "s/libxenmisc4\.17 \(>= [^)]*\)/libxenmisc4.17 (>= ${srcversion%-*})/")
# Installed-Size as dpkg-gencontrol counts it: KiB per file, rounded up, plus
# one per directory.
size=$(cd "$root" && find . -path ./DEBIAN -prune -o \( -type f -printf '%s\n' \) \
       -o \( -type d -printf '1024\n' \) | awk '{ t += int(($1 + 1023) / 1024) } END { print t }')
sed -e "s|@VERSION@|$version|g; s|@SRCVERSION@|$srcversion|g; s|@MAINTAINER@|$maintainer|g" \
    -e "s|@SIZE@|$size|g; s|@SHLIBS@|$shlibs|g" "$here/deb/control.in" > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
    | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"
find "$root" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$outdir"
rm -f "$outdir"/*.deb
deb="$outdir/${pkg}_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
