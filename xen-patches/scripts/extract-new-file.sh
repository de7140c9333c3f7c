#!/usr/bin/env bash
# Print the content of a file a patch adds (its '+' lines): extract-new-file.sh PATCH PATH
set -euo pipefail
awk -v path="$2" '
    $0 == "+++ b/" path { grab = 1; next }
    grab && /^@@/ { next }
    grab && /^\+/ { print substr($0, 2); next }
    grab { exit }
' "$1"
