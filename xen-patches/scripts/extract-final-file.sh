#!/usr/bin/env bash
# Print a file as the whole series leaves it, for a file the series adds
# (so no Xen source is needed): extract-final-file.sh PATH
# Applies, in series order, only the parts of each patch that touch PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
while read -r p; do
    [ -n "$p" ] || continue
    awk -v path="$1" '
        /^diff --git / { grab = ($0 ~ (" b/" path "$")) }
        /^-- $/ { grab = 0 }
        grab { print }
    ' "$here/$p" > "$tmp/part.diff"
    if [ -s "$tmp/part.diff" ]; then
        patch -s -d "$tmp" -p1 -F0 < "$tmp/part.diff"
    fi
done < "$here/series"
cat "$tmp/$1"
