#!/usr/bin/env bash
# The release, proven on a GPU (docs/gpu-runs.md): what ci/release.sh published is unpacked on
# the GPU machine and used there as a user would, with no KILN_* variable.
#
#   scripts/gpu_release_check.sh prepare RELEASE_MIRROR BUILD_DIR   here: copies the tarball and
#       wheels of RELEASE_MIRROR (ci/release.sh's release/mirror), BUILD_DIR's kiln_gpu_tests, and
#       the system libraries they need that a bare machine lacks (libarchive, libcurl, ...;
#       never libkiln: that must come from the tarball) into .carry/release (git-ignored).
#   scripts/gpu_release_check.sh run                                 on the GPU machine, from the
#       repository root; logs to $OUT (or /tmp/kiln-gpu-out).
#
# `run` unpacks the tarball, then: `kiln doctor --require-gpu` (the GPU and the store beside
# libkiln), `kiln compat --device auto` on the tarball and wheels (the real device), `kiln
# resolve --device auto`, and every GPU test of each specialisation against its CPU reference
# with libkiln and the store both taken from the unpacked tarball.
set -uo pipefail
CARRY=.carry/release

prepare() {
  local mirror=${1:?usage: gpu_release_check.sh prepare RELEASE_MIRROR BUILD_DIR}
  local build=${2:?usage: gpu_release_check.sh prepare RELEASE_MIRROR BUILD_DIR}
  set -e
  rm -rf "$CARRY"
  mkdir -p "$CARRY/pkg" "$CARRY/bin" "$CARRY/syslib"
  git check-ignore -q "$CARRY" || { echo "$CARRY is not git-ignored" >&2; exit 1; }
  cp "$mirror"/kiln-*-linux-*.tar.zst "$mirror"/*.whl "$CARRY/pkg/"
  cp "$build/tests/kiln_gpu_tests" "$CARRY/bin/"
  # A bare GPU machine may lack zstd (and Python's tarfile reads no zstd before 3.14).
  cp "$(command -v zstd)" "$CARRY/bin/"
  strip --strip-debug "$CARRY/bin/kiln_gpu_tests"
  local tmp
  tmp=$(mktemp -d)
  tar --zstd -xf "$CARRY"/pkg/kiln-*.tar.zst -C "$tmp"
  ldd "$tmp"/kiln-*/bin/kiln "$tmp"/kiln-*/lib/libkiln.so "$CARRY/bin/kiln_gpu_tests" \
    "$CARRY/bin/zstd" |
    awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libkiln)\.so' |
    while read -r lib; do cp -L "$lib" "$CARRY/syslib/"; done
  rm -rf "$tmp"
  du -sh "$CARRY" "$CARRY"/*
}

run() {
  local out=${OUT:-/tmp/kiln-gpu-out}
  mkdir -p "$out"
  local root=$PWD prefix
  prefix=$(mktemp -d /tmp/kiln-release-XXXXXX)
  LD_LIBRARY_PATH="$root/$CARRY/syslib" "$CARRY/bin/zstd" -dc "$CARRY"/pkg/kiln-*.tar.zst |
    tar -xf - -C "$prefix" || { echo "cannot unpack the tarball" >&2; return 1; }
  local tree
  tree=$(echo "$prefix"/kiln-*)
  # System libraries only; libkiln comes from the tarball (RUNPATH $ORIGIN/../lib).
  local env_clean=(env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$root/$CARRY/syslib")
  local rc=0 log="$out/release-check.log"
  step() {  # step TITLE CMD...: runs CMD with a clean environment, logs it, remembers a failure
    local title=$1
    shift
    echo "--- $title" | tee -a "$log"
    "${env_clean[@]}" "$@" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "FAILED: $title" | tee -a "$log"; }
  }
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
    echo "tarball unpacked at $tree"
  } 2>&1 | tee "$log"
  step "kiln doctor --require-gpu" "$tree/bin/kiln" doctor --require-gpu
  step "kiln compat --device auto (tarball, wheels)" "$tree/bin/kiln" compat --device auto \
    "$CARRY"/pkg/*
  step "kiln resolve --device auto --explain" "$tree/bin/kiln" resolve axpy_dtype_f32 \
    --device auto --explain
  # Every specialisation against its CPU reference, libkiln and store from the tarball.
  "${env_clean[@]}" LD_LIBRARY_PATH="$tree/lib:$root/$CARRY/syslib" \
    KILN_TEST_GPU_STORE="$tree/share/kiln/artifacts" \
    "$CARRY/bin/kiln_gpu_tests" --gtest_filter='Registry/EverySpecialisation.*' \
    --gtest_output="xml:$out/release-gpu-tests.xml" 2>&1 | tee "$out/release-gpu-tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  echo "release check exit: $rc" | tee -a "$out/release-check.log"
  return $rc
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: $0 prepare RELEASE_MIRROR BUILD_DIR | run" >&2; exit 2 ;;
esac
