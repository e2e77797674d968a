#!/usr/bin/env bash
# Installs everything starfact needs on a Debian 12 machine: Debian's packages, then StarPU
# 1.3.10 built from Debian's source package (with CUDA when nvcc exists), cached outside the
# checkout. Idempotent: a second run takes seconds. Prints nothing on stdout but the StarPU
# prefix, so callers can do `prefix=$(scripts/install_deps.sh)`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { echo "[install_deps] $*" >&2; }

sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi

packages=(build-essential cmake ninja-build pkg-config libopenblas-dev liblapacke-dev
          libhwloc-dev libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev dpkg-dev
          python3-matplotlib python3-numpy xz-utils patchelf)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    "${sudo_cmd[@]}" apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >&2
fi

# ---- StarPU ------------------------------------------------------------------------------
starpu_version=1.3.10
cuda_home=${CUDA_HOME:-/usr/local/cuda}
nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x "$cuda_home/bin/nvcc" ] && nvcc_bin=$cuda_home/bin/nvcc
if [ -n "${STARFACT_NO_CUDA:-}" ]; then nvcc_bin=""; fi

patch_file=$here/patches/starpu-${starpu_version}-cuda13.patch
configure_opts=(--enable-maxcpus=128 --enable-maxcudadev=8 --disable-opencl --disable-fortran
                --disable-socl --disable-starpufft --disable-mpi --disable-build-examples
                --disable-build-tests --disable-build-doc --disable-glpk --disable-openmp
                --disable-hdf5 --disable-fxt --disable-starpurm)
if [ -n "$nvcc_bin" ]; then
    cuda_home=$(cd "$(dirname "$nvcc_bin")/.." && pwd)
    variant=cuda
    configure_opts+=(--with-cuda-dir="$cuda_home")
else
    variant=cpu
    configure_opts+=(--disable-cuda)
fi

# The cache key covers the version, the variant, the patch and the configure options.
key=$( { echo "$starpu_version $variant ${configure_opts[*]}"; cat "$patch_file"; } | sha256sum | cut -c1-12)
cache_root=${STARFACT_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/starfact}
prefix=$cache_root/starpu-$starpu_version-$variant-$key

if [ -f "$prefix/.complete" ]; then
    log "StarPU $starpu_version ($variant) cached at $prefix"
    echo "$prefix"
    exit 0
fi

# Debian's source package needs a deb-src line.
if ! grep -rqs "deb-src\|Types:.*deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    log "adding a deb-src line for bookworm main"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
        "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/starfact-src.sources >/dev/null
    "${sudo_cmd[@]}" apt-get update -qq >&2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/starfact-starpu.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building StarPU $starpu_version ($variant) in $work (about ten minutes on 2 cores)"
(cd "$work" && apt-get source -qq "starpu=${starpu_version}+dfsg-2" >&2 2>&1 ||
               apt-get source -qq starpu >&2 2>&1)
src=$(find "$work" -maxdepth 1 -type d -name "starpu-${starpu_version}*" | head -n1)
[ -n "$src" ] || { log "apt-get source starpu failed"; exit 1; }
if [ "$variant" = cuda ]; then
    log "applying the CUDA 13 patch"
    (cd "$src" && patch -p1 < "$patch_file" >&2)
fi

tmp_prefix=$prefix.partial
rm -rf "$tmp_prefix"
(cd "$src" && ./configure --prefix="$prefix" "${configure_opts[@]}" > "$work/configure.log" 2>&1) || {
    tail -n 40 "$work/configure.log" >&2; exit 1; }
grep -E "CUDA enabled|Maximum number of CPUs|CPUs" "$src/config.log" >/dev/null 2>&1 || true
(cd "$src" && make -j"$(nproc)" > "$work/make.log" 2>&1) || { tail -n 60 "$work/make.log" >&2; exit 1; }
# Install into a staging directory first so an interrupted build never looks complete.
(cd "$src" && make install DESTDIR="$tmp_prefix" > "$work/install.log" 2>&1) || {
    tail -n 40 "$work/install.log" >&2; exit 1; }
mkdir -p "$(dirname "$prefix")"
rm -rf "$prefix"
mv "$tmp_prefix$prefix" "$prefix"
rm -rf "$tmp_prefix"
cp "$work/configure.log" "$prefix/configure.log"
touch "$prefix/.complete"
log "StarPU installed at $prefix"
echo "$prefix"
