#!/bin/sh
# Build the of-controller guest's Python payload into OUTDIR:
#   OUTDIR/site-packages/         os-ken and its runtime closure (requirements.txt)
#   OUTDIR/bin/osken-manager      launcher using that site-packages
#   OUTDIR/apps/selena_learning.py
# The guest needs OUTDIR (as /opt/selena) plus a python3 runtime of the same
# minor version (Debian bookworm: 3.11). Usage: build-site.sh OUTDIR
# PYTHON overrides the interpreter (default /usr/bin/python3).
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
python=${PYTHON:-/usr/bin/python3}

ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$ver" != "3.11" ]; then
    echo "$0: $python is Python $ver; the guest runs bookworm's 3.11" >&2
    exit 1
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
    echo "$0: $python has no pip (apt-get install python3-pip)" >&2
    exit 1
fi

rm -rf "$out/site-packages" "$out/bin" "$out/apps"
mkdir -p "$out/site-packages" "$out/bin" "$out/apps"

# --no-deps: requirements.txt is the complete, pinned closure (see its comments).
"$python" -m pip install --disable-pip-version-check --no-input --quiet \
    --root-user-action=ignore --no-deps --only-binary :all: --no-compile \
    --target "$out/site-packages" -r "$here/requirements.txt"

sp=$out/site-packages
# What a guest never needs: console scripts written for the build host's
# python, C headers and sources, tests, caches; os-ken's services (BGP, VRRP,
# zebra, OVSDB), which need packages deliberately not installed; netaddr's IEEE
# vendor registry (8.9 MB, read only by EUI(...).oui/.iab vendor look-ups).
rm -rf "$sp/bin" "$sp/include" "$sp/os_ken/tests" "$sp/os_ken/services"
rm -f "$sp"/netaddr/eui/oui.txt "$sp"/netaddr/eui/oui.idx \
    "$sp"/netaddr/eui/iab.txt "$sp"/netaddr/eui/iab.idx
find "$sp" -depth \( -name __pycache__ -o -name tests -o -name docs \) -type d \
    -exec rm -rf {} +
find "$sp" \( -name '*.pyc' -o -name '*.pyi' -o -name '*.c' -o -name '*.h' \
    -o -name '*.cpp' -o -name '*.hpp' -o -name 'RECORD' \) -type f -delete

cp "$here/apps/selena_learning.py" "$out/apps/"
cat > "$out/bin/osken-manager" <<'EOF'
#!/bin/sh
# osken-manager from the site-packages beside this directory (build-site.sh).
# No .pyc writes: in the guest they would only take RAM (the root is the initramfs).
top=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$top/site-packages${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1 \
    exec "${PYTHON:-python3}" -m os_ken.cmd.manager "$@"
EOF
chmod 755 "$out/bin/osken-manager"

echo "of-controller site: $(du -sk "$out" | cut -f1) KiB in $out" \
    "($(find "$out" -type f | wc -l) files)"
