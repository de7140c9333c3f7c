#!/usr/bin/env bash
# Fetch the Debian xen source package a pin names into DEST and verify its
# sha256s.
#   fetch-source.sh PIN DEST      (PIN: SOURCE or SOURCE.security)
# apt-get runs with a private sources list and state of its own (under
# $SELENA_CACHE/apt), holding the one deb-src line the pin names: the host's
# /etc/apt is neither read for sources nor changed.
set -euo pipefail
pin=$(realpath "$1")
dest=$2
cache_root=${SELENA_CACHE:-$HOME/.cache/selena}
version=$(awk '$1 == "version" {print $2}' "$pin")
read -r uri suite components < <(awk '$1 == "archive" {$1 = ""; print}' "$pin")
mkdir -p "$dest"
cd "$dest"

verify() {
    awk '$1 == "sha256" {print $2 "  " $3}' "$pin" | sha256sum --quiet -c - >/dev/null 2>&1
}

if verify; then
    exit 0
fi

apt_dir="$cache_root/apt/$suite"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite $components" \
    > "$apt_dir/sources.list"
apt_opts=(
    -o "Dir::Etc::sourcelist=$apt_dir/sources.list"
    -o "Dir::Etc::sourceparts=$apt_dir/parts"
    -o "Dir::State::Lists=$apt_dir/lists"
    -o "Dir::Cache=$apt_dir/cache"
    -o "Dir::Etc::preferencesparts=$apt_dir/parts"
    -q
)
# As root, apt downloads as _apt, which cannot write into a private directory.
[ "$(id -u)" -ne 0 ] || apt_opts+=(-o APT::Sandbox::User=root)

echo "fetching the xen $version source ($suite)" >&2
apt-get "${apt_opts[@]}" update >/dev/null
if ! apt-get "${apt_opts[@]}" source --download-only "xen=$version" >/dev/null 2>"$apt_dir/source.log"; then
    why=$(grep -m1 -oE "[0-9]{3} +[A-Za-z ]*[A-Za-z]" "$apt_dir/source.log" || tail -1 "$apt_dir/source.log")
    echo "cannot download the xen $version source from $uri $suite (HTTP $(echo $why)): check that this machine reaches $uri, or put the files named in $(basename "$pin") into $dest" >&2
    exit 1
fi
if ! verify; then
    echo "checksum mismatch for the xen $version source in $dest: Debian changed it since $(basename "$pin") was written; update the pin (xen-patches/README.md, \"When Debian updates xen\")" >&2
    exit 1
fi
