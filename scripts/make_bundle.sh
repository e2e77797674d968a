#!/usr/bin/env bash
# Builds starfact for sm_90 and packs a self-contained bundle for the GPU machine into
# bundle/ (ignored by git): the executables (packed in bin.tar.xz, unpacked there by
# scripts/bundle_bin.sh) and the non-CUDA shared libraries they need that the GPU machine lacks
# (StarPU, fmt). CUDA, OpenBLAS, LAPACKE and hwloc come from that machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(bash "$root/scripts/build.sh" -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual")
prefix=$(bash "$root/scripts/install_deps.sh" 2>/dev/null)
out=$root/bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build"/bin/* "$out/bin/"
cp -L "$prefix/lib/libstarpu-1.3.so.9" "$out/lib/"
for lib in libfmt.so.9; do
    cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$out/lib/"
done
strip --strip-unneeded "$out"/bin/* "$out"/lib/* 2>/dev/null || true
# The libraries the executables need besides these, for the record.
ldd "$out/bin/starfact" | awk '{print $1}' | sort > "$out/needed-libs.txt"
# The executables (about 76 MiB stripped: each embeds its CUDA kernels) travel as one xz archive
# (about 14 MiB); scripts/bundle_bin.sh unpacks it on the GPU machine, and gpu_run.sh,
# gpu_faults.sh and gpu_sanitize.sh call it.
tar cJf "$out/bin.tar.xz" -C "$out/bin" .
rm -rf "$out/bin"
(cd "$root" && git rev-parse HEAD 2>/dev/null || echo unknown) > "$out/commit.txt"
size=$(du -sm "$out" | cut -f1)
echo "bundle: $out (${size} MiB)" >&2
if [ "$size" -gt 60 ]; then echo "bundle is over the 64 MiB carry limit" >&2; exit 1; fi
