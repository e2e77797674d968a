#!/usr/bin/env bash
# Prints the directory of the bundle's executables, unpacking bundle/bin.tar.xz into bundle/bin
# first when only the archive is there (scripts/make_bundle.sh packs the executables so that the
# bundle stays under the device tool's 64 MiB carry limit). Run on the GPU machine from anywhere.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/bundle/bin
if [ ! -x "$bin/starfact" ] && [ -f "$root/bundle/bin.tar.xz" ]; then
    mkdir -p "$bin"
    tar xJf "$root/bundle/bin.tar.xz" -C "$bin"
fi
echo "$bin"
