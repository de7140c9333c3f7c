#!/usr/bin/env bash
# build-kernel.sh SOURCE_DEB FRAGMENT OUT
# Builds a bzImage from Debian's linux-source package: `make tinyconfig`, then
# the fragment, then olddefconfig. Fails if any `=y` line of the fragment did
# not stick (a dependency missing), so the image never silently lacks a driver.
# Writes OUT and OUT.config. CPU-heavy steps run under nice.
set -euo pipefail
deb=$(realpath "$1")
fragment=$(realpath "$2")
out=$3
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "$(dirname "$out")/kbuild.XXXXXX")
trap 'rm -rf "$work"' EXIT

dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" --wildcards './usr/src/linux-source-*.tar.xz'
nice -n 19 tar -xJf "$work"/usr/src/linux-source-*.tar.xz -C "$work"
cd "$work"/linux-source-*/

make -s ARCH=x86_64 tinyconfig
scripts/kconfig/merge_config.sh -m .config "$fragment" >/dev/null
make -s ARCH=x86_64 olddefconfig
missing=0
while IFS= read -r line; do
    case "$line" in
        CONFIG_*=*)
            if ! grep -qx "$line" .config; then
                echo "guest kernel: $line did not stick" >&2
                missing=1
            fi ;;
    esac
done < "$fragment"
[ "$missing" = 0 ] || exit 1

nice -n 19 make -s -j"$(nproc)" ARCH=x86_64 bzImage
cp .config "$out.config"
cp arch/x86/boot/bzImage "$out.tmp"
mv "$out.tmp" "$out"
