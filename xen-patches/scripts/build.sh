#!/usr/bin/env bash
# Build the patched hypervisor and selena-tdf, cached by the hash of their inputs.
#   build.sh OUTDIR [PIN] [flask]
#                             PIN: the source pin (default SOURCE, the lab's;
#                             make deb passes SOURCE.security); flask: also
#                             Flask (XSM) with Xen's policy built in, booted
#                             with `xsm=flask flask=enforcing` by the lab's
#                             XSM check, and two policies to load: Xen's
#                             (xenpolicy) and the same without the time
#                             dilation permissions (xenpolicy-no-tdf)
# Configured and built as Debian's own hypervisor package is (debian/rules:
# debian/xen-kconfig + olddefconfig, the build date from the changelog, file
# paths mapped), so two builds of the same inputs give the same hypervisor.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$1
pin=$(realpath "${2:-$here/SOURCE}")
variant=${3:-}
case "$variant" in
    ""|flask) ;;
    *) echo "build.sh: unknown variant '$variant' (known: flask)" >&2; exit 2 ;;
esac
cache_root=${SELENA_CACHE:-$HOME/.cache/selena}
key=$( (cat "$pin"; echo "$variant"; cd "$here" && cat series $(cat series) deb/revision \
        tool/*.c tool/*.h scripts/build.sh) | sha256sum | cut -c1-16)
cached="$cache_root/xen/$key"

if [ -f "$cached/.complete" ]; then
    echo "patched Xen: cached ($cached)"
else
    start=$(date +%s)
    "$here/scripts/fetch-source.sh" "$pin" "$cache_root/src/xen"
    version=$(awk '$1 == "version" {print $2}' "$pin")
    work="$here/build"
    # Not build/xen-src: that is the developer's git tree of the series
    # (make refresh), which an uncached build must not delete.
    src="$work/xen-build"
    rm -rf "$src"
    mkdir -p "$work"
    echo "unpacking the xen $version source"
    # (No Debian keyring here to check the .dsc's signature: the sha256s of
    # all three files were checked against the pin instead.)
    dpkg-source -x "$cache_root/src/xen/$(awk '$1=="sha256" && $3 ~ /\.dsc$/ {print $3}' "$pin")" \
        "$src" 2>&1 >/dev/null | { grep -vE "cannot verify inline signature|^gpgv:" || :; } >&2
    # Without fuzz: a patch that no longer fits a new Debian source stops the
    # build instead of landing somewhere near (README.md, "When Debian updates xen").
    echo "applying $(wc -l < "$here/series") patches"
    while read -r p; do
        [ -n "$p" ] || continue
        patch -d "$src" -p1 -F0 --quiet --forward < "$here/$p"
    done < "$here/series"
    # What Debian's build passes (debian/rules): the version and maintainer
    # the boot banner shows (Debian's patch 0003), dates from the changelog,
    # and fixed names instead of this machine's user, host and paths.
    epoch=$(dpkg-parsechangelog -l "$src/debian/changelog" -STimestamp)
    export DEB_VERSION="$version+$(cat "$here/deb/revision")"
    export DEB_MAINTAINER="$(cat "$here/deb/maintainer")"
    export XEN_BUILD_DATE XEN_BUILD_TIME
    XEN_BUILD_DATE=$(LC_ALL=C date -u -d "@$epoch")
    XEN_BUILD_TIME=$(LC_ALL=C date -u -d "@$epoch" +%T)
    export XEN_WHOAMI=selena XEN_DOMAIN=selena XEN_BUILD_HOST=selena
    make_args=(XEN_TARGET_ARCH=x86_64
               "EXTRA_CFLAGS_XEN_CORE=-ffile-prefix-map=$src=. -fdebug-prefix-map=$src=.")
    echo "building the hypervisor (make -j2, about a minute)"
    cp "$src/debian/xen-kconfig" "$src/xen/.config"
    # The series' option is off by default (as upstream would have it).
    echo CONFIG_TIME_DILATION=y >> "$src/xen/.config"
    if [ "$variant" = flask ]; then
        # Dummy stays the default module: the boot chooses Flask (xsm=flask).
        printf '%s\n' CONFIG_XSM=y CONFIG_XSM_FLASK=y CONFIG_XSM_FLASK_POLICY=y \
            CONFIG_XSM_DUMMY_DEFAULT=y >> "$src/xen/.config"
    fi
    make -s -C "$src/xen" "${make_args[@]}" olddefconfig >/dev/null
    grep -qx CONFIG_TIME_DILATION=y "$src/xen/.config" || {
        echo "CONFIG_TIME_DILATION is not on in the hypervisor's configuration" >&2
        exit 1
    }
    make -s -C "$src/xen" "${make_args[@]}" -j2 > "$work/xen-build.log" 2>&1 || {
        tail -30 "$work/xen-build.log" >&2
        exit 1
    }
    test -f "$src/xen/common/time_dilation.o" || {
        echo "the hypervisor was built without the time dilation code" >&2
        exit 1
    }
    if [ "$variant" = flask ]; then
        grep -qx CONFIG_XSM_FLASK_POLICY=y "$src/xen/.config" || {
            echo "no built-in Flask policy (is checkpolicy installed?)" >&2
            exit 1
        }
        # The policy to load beside Xen's: the same sources without the
        # permissions the series adds (same depth: Makefile.common finds
        # the hypervisor's access vectors by a relative path).
        cp -r "$src/tools/flask/policy" "$src/tools/flask/policy-no-tdf"
        sed -i 's/ gettdf settdf//' "$src/tools/flask/policy-no-tdf/modules/xen.if"
        if grep -q tdf "$src/tools/flask/policy-no-tdf/modules/xen.if"; then
            echo "xen.if still grants a time dilation permission" >&2
            exit 1
        fi
        for dir in policy policy-no-tdf; do
            rm -rf "$work/flask-$dir" && mkdir -p "$work/flask-$dir"
            make -s -f Makefile.common -C "$src/tools/flask/$dir" \
                FLASK_BUILD_DIR="$work/flask-$dir" \
                POLICY_FILENAME="$work/flask-$dir/xenpolicy" >/dev/null
        done
    fi
    echo "building selena-tdf"
    mkdir -p "$work/tool"
    # Debian's hardening flags, all of them as debian/rules asks for Xen's
    # tools (what lintian expects of a packaged binary).
    export DEB_BUILD_MAINT_OPTIONS=hardening=+all
    (cd "$here" && cc $(dpkg-buildflags --get CPPFLAGS) $(dpkg-buildflags --get CFLAGS) \
        -Wall -Wextra -Werror $(dpkg-buildflags --get LDFLAGS) \
        -o "$work/tool/selena-tdf" tool/selena-tdf.c -lxenctrl)
    tmp="$cached.tmp.$$"
    mkdir -p "$tmp"
    cp "$src/xen/xen" "$src/xen/xen.gz" "$work/tool/selena-tdf" "$tmp/"
    cp "$src/xen/.config" "$tmp/xen.config"
    if [ "$variant" = flask ]; then
        cp "$work/flask-policy/xenpolicy" "$tmp/xenpolicy"
        cp "$work/flask-policy-no-tdf/xenpolicy" "$tmp/xenpolicy-no-tdf"
    fi
    echo "$version" > "$tmp/source-version"
    echo "$epoch" > "$tmp/source-date-epoch"
    echo "$(( $(date +%s) - start ))" > "$tmp/build-seconds"
    touch "$tmp/.complete"
    rm -rf "$cached"
    mv "$tmp" "$cached"
    echo "patched Xen built in $(cat "$cached/build-seconds") s"
fi
mkdir -p "$out"
cp "$cached/xen" "$cached/xen.gz" "$cached/xen.config" "$cached/selena-tdf" \
   "$cached/source-version" "$cached/source-date-epoch" "$cached/build-seconds" "$out/"
if [ "$variant" = flask ]; then
    cp "$cached/xenpolicy" "$cached/xenpolicy-no-tdf" "$out/"
fi
