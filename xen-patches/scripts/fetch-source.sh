#!/usr/bin/env bash
# Fetch the pinned Debian xen source package into $1 and verify its checksums.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=$1
version=$(awk '$1 == "version" {print $2}' "$here/SOURCE")
mkdir -p "$dest"
cd "$dest"

verify() {
    awk '$1 == "sha256" {print $2 "  " $3}' "$here/SOURCE" | sha256sum --quiet -c - 2>/dev/null
}

if verify; then
    exit 0
fi

# apt-get source needs a deb-src entry for bookworm main; add one only if none exists.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "adding a deb-src entry for bookworm main" >&2
    cat > /etc/apt/sources.list.d/selena-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -q
fi
echo "fetching xen=$version source" >&2
apt-get source --download-only -q "xen=$version" || {
    apt-get update -q && apt-get source --download-only -q "xen=$version"
}
if ! verify; then
    echo "checksum mismatch for the xen source package (see xen-patches/SOURCE)" >&2
    exit 1
fi
