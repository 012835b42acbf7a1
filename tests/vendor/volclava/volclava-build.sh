#!/usr/bin/env bash
# Build volclava (an LSF-compatible scheduler) from this directory's tarball into
# /opt/volclava, once: a build whose marker names this tarball is reused. Root.
# The packages it needs are OpenPBS's (pbs-up.sh deps) plus libtirpc-dev and libnsl-dev.
#
#   volclava-build.sh [PREFIX]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:-/opt/volclava}
tarball=volclava-2.2.0-beta-b361f5642a5c.tar.gz
build=${VOLCLAVA_BUILD_DIR:-/srv/volclava-build}
export PATH=/usr/sbin:/usr/bin:/sbin:/bin   # keep a pyenv or other shim out of configure

if [ -x "$prefix/bin/bsub" ] && [ "$(cat "$prefix/.mjf-built" 2>/dev/null)" = "$tarball" ]; then
    echo "volclava already built in $prefix"
    exit 0
fi
# Checked before anything of it is unpacked or built as root.
(cd "$here" && sha256sum --quiet -c SHA256SUMS) \
    || { echo "volclava-build.sh: $tarball does not match SHA256SUMS" >&2; exit 1; }
missing=()
for package in gcc make autoconf automake libtool libtirpc-dev libnsl-dev tcl-dev \
               libncurses-dev; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" > /dev/null
fi
rm -rf "$build" && mkdir -p "$build" && cd "$build"
tar xzf "$here/$tarball"
cd volclava-2.2.0-beta
started=$SECONDS
sh bootstrap.sh --prefix="$prefix" > "$build/configure.log" 2>&1 \
    || { tail -30 "$build/configure.log" >&2; exit 1; }
make -j"$(nproc)" > "$build/make.log" 2>&1 || { tail -40 "$build/make.log" >&2; exit 1; }
rm -rf "$prefix"
make install > "$build/install.log" 2>&1 || { tail -30 "$build/install.log" >&2; exit 1; }
echo "$tarball" > "$prefix/.mjf-built"
rm -rf "$build"
echo "volclava built into $prefix in $((SECONDS - started)) s"
