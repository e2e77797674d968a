#!/usr/bin/env bash
# Builds and runs examples/ against an installed starfact, as a user would: `cmake --install`
# of a build directory (default build/) into a temporary prefix, then each example configured
# with CMAKE_PREFIX_PATH=<prefix> (find_package(starfact)), and once more with the flags of
# `pkg-config starfact`; the programs run on a system NumPy writes, and the installed command
# line solves the same files (examples/batched_posv: `starfact batched` too). Fails on any error.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
export PATH=$PATH:/usr/local/cuda/bin
work=$(mktemp -d /tmp/starfact-examples.XXXXXX)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
export STARPU_HOME=$work/home STARPU_SILENT=1
mkdir -p "$STARPU_HOME"

# A Python with NumPy: the first python3 on PATH may be another installation (pyenv, a virtual
# environment) than Debian's, whose python3-numpy install_deps.sh provides.
py=python3
if ! "$py" -c "import numpy" 2>/dev/null; then
    if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
        py=/usr/bin/python3
    else
        python3 -m pip install -q numpy >&2
    fi
fi

echo "== install $build into a temporary prefix" >&2
cmake --install "$build" --prefix "$prefix" >/dev/null

echo "== examples/solve_from_file with find_package(starfact)" >&2
cmake -S "$root/examples/solve_from_file" -B "$work/solve_from_file" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/solve_from_file" >/dev/null

# A system as a NumPy user has it: C-order float64 A, a 1-D b.
"$py" - "$work" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(20261122)
n = 300
A = rng.uniform(-1, 1, (n, n))
np.save(f"{sys.argv[1]}/A.npy", A)
np.save(f"{sys.argv[1]}/b.npy", rng.uniform(-1, 1, n))
PY
"$work/solve_from_file/solve_from_file" "$work/A.npy" "$work/b.npy" "$work/x.npy"

echo "== the installed starfact on the same files" >&2
"$prefix/bin/starfact" gesv --A "$work/A.npy" --B "$work/b.npy" --X "$work/x_cli.npy" --check --format csv >/dev/null

"$py" - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
A, b = np.load(f"{d}/A.npy"), np.load(f"{d}/b.npy")
ref = np.linalg.solve(A, b)
for name in ("x.npy", "x_cli.npy"):
    x = np.load(f"{d}/{name}").reshape(-1)
    err = np.abs(x - ref).max() / np.abs(ref).max()
    print(f"{name}: max |x - numpy.linalg.solve| / max |x| = {err:.2e}")
    assert err < 1e-8, name
PY

echo "== examples/batched_posv with find_package(starfact)" >&2
cmake -S "$root/examples/batched_posv" -B "$work/batched_posv" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/batched_posv" >/dev/null
"$work/batched_posv/batched_posv"

# A batch as a NumPy user has it: C-order float64 SPD blocks and their right-hand sides.
"$py" - "$work" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(20261122)
count, n, nrhs = 500, 20, 2
G = rng.uniform(-1, 1, (count, n, n))
np.save(f"{sys.argv[1]}/S.npy", G @ G.transpose(0, 2, 1) + n * np.eye(n))
np.save(f"{sys.argv[1]}/SB.npy", rng.uniform(-1, 1, (count, n, nrhs)))
PY
"$work/batched_posv/batched_posv" "$work/S.npy" "$work/SB.npy"

echo "== the installed starfact batched on the same files" >&2
"$prefix/bin/starfact" batched --op potrs --input "$work/S.npy" --rhs "$work/SB.npy" --output "$work/SX.npy" \
    --check --format csv >/dev/null
"$py" - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
S, B, X = np.load(f"{d}/S.npy"), np.load(f"{d}/SB.npy"), np.load(f"{d}/SX.npy")
ref = np.linalg.solve(S, B)
err = np.abs(X - ref).max() / np.abs(ref).max()
print(f"SX.npy {X.shape}: max |X - numpy.linalg.solve| / max |X| = {err:.2e}")
assert X.shape == B.shape and err < 1e-10
PY

echo "== examples/solve_from_file and batched_posv with pkg-config starfact" >&2
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$(sed -n 's/^STARPU_PREFIX:INTERNAL=//p' "$build/CMakeCache.txt")/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
# pkg-config gives no run path: StarPU's library directory is added as one (or use LD_LIBRARY_PATH).
# shellcheck disable=SC2046
c++ -std=c++17 -O1 -o "$work/solve_pc" "$root/examples/solve_from_file/main.cc" $(pkg-config --cflags --libs starfact) \
    -Wl,-rpath,"$(pkg-config --variable=libdir starpu-1.3)"
"$work/solve_pc" "$work/A.npy" "$work/b.npy" >/dev/null
# shellcheck disable=SC2046
c++ -std=c++17 -O1 -o "$work/batched_pc" "$root/examples/batched_posv/main.cc" $(pkg-config --cflags --libs starfact) \
    -Wl,-rpath,"$(pkg-config --variable=libdir starpu-1.3)"
"$work/batched_pc" >/dev/null
echo "examples: ok" >&2
