#!/usr/bin/env bash
# The whole crash and I/O-fault sweep (every point of every case, killed and under each fault
# kind: tests/crash/README.md) on a machine with more cores than the build machine, in two steps:
#
#   scripts/crash_sweep.sh prepare BUILD_DIR   here: copies the kiln CLI, the crash injector and
#       helpers, kiln's stripped install tree (the tarball case's input) and the shared libraries
#       they need (not glibc/libstdc++/libgcc) into .carry/crash (git-ignored; carried over).
#   scripts/crash_sweep.sh run                 there, from the repository root: runs
#       tests/crash/crash_points.sh with CRASH_SAMPLE=0 and one job per core; the log and the
#       failures (if any) go to $OUT (or /tmp/kiln-crash-out).
#
# The other machine needs bash, python3, nvcc on PATH or in /usr/local/cuda/bin, and the usual
# coreutils; zstd comes along. Exit status: the sweep's.
set -uo pipefail
CARRY=.carry/crash
source "$(dirname "${BASH_SOURCE[0]}")/lazy_libs.sh"

prepare() {
  local build=${1:?usage: crash_sweep.sh prepare BUILD_DIR}
  set -e
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/lib"
  git check-ignore -q "$CARRY" || { echo "$CARRY is not git-ignored" >&2; exit 1; }
  cmake --install "$build" --prefix "$CARRY/kiln-prefix" --strip >/dev/null
  cp "$build/kiln" "$build/tests/kiln_crash_get" "$build/tests/kiln_crash_compiled_root" \
    "$build/tests/libkiln_crash_injector.so" "$(command -v zstd)" "$CARRY/bin/"
  strip --strip-debug "$CARRY"/bin/*
  local lazy
  lazy=$(lazy_libs "$build/kiln")
  { ldd "$CARRY"/bin/kiln "$CARRY"/bin/kiln_crash_* "$CARRY"/bin/zstd $lazy | awk '/=> \// {print $3}'
    for l in $lazy; do echo "$l"; done; } | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$CARRY/lib/"; done
  tar -czf "$CARRY/lib.tgz" -C "$CARRY" lib && rm -rf "$CARRY/lib"
  du -sh "$CARRY"
}

run() {
  local out=${OUT:-/tmp/kiln-crash-out} root=$PWD
  mkdir -p "$out"
  tar -xzf "$CARRY/lib.tgz" -C "$CARRY"
  export LD_LIBRARY_PATH="$root/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$root/$CARRY/bin:$PATH"
  command -v nvcc >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
  command -v nvcc >/dev/null || { echo "crash_sweep: no nvcc on PATH or in /usr/local/cuda/bin" | tee "$out/sweep.log"; return 2; }
  { date -u +%Y-%m-%dT%H:%M:%SZ; nproc; nvcc --version | tail -1; } | tee "$out/machine.txt"
  local work=${CRASH_WORK:-/tmp/kiln-crash-work}
  CRASH_SAMPLE=0 CRASH_KILN_PREFIX="$root/$CARRY/kiln-prefix" \
    bash tests/crash/crash_points.sh "$CARRY/bin/kiln" "$CARRY/bin/libkiln_crash_injector.so" \
    "$CARRY/bin/kiln_crash_get" "$work" "$@" 2>&1 | tee "$out/sweep.log"
  local rc=${PIPESTATUS[0]}
  [ -f "$work/failures" ] && cp "$work/failures" "$out/"
  echo "crash sweep exit $rc" | tee -a "$out/sweep.log"
  return "$rc"
}

case "${1:-}" in
prepare) shift; prepare "$@" ;;
run) shift; run "$@" ;;
*) echo "usage: $0 prepare BUILD_DIR | run [CASE...]" >&2; exit 2 ;;
esac
