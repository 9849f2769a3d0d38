#!/usr/bin/env bash
# The CUDA 12.9 archives that NVRTC builds (kiln build --toolkits nvrtc:DIR), proven on a GPU:
# every reference specialisation loaded from them and checked against its CPU reference.
#
#   scripts/gpu_nvrtc_check.sh prepare KILN [TARGETS]   here: lays out the NVRTC 12.9 toolkit
#       (scripts/nvrtc_toolkit.sh, build/nvrtc-12.9), builds kiln-kernels with it for TARGETS
#       (default sm_90a,compute_80: the H100/H200's SASS and the PTX fallback) with the kiln
#       executable KILN, and installs the archives into the store .carry/nvrtc/store
#       (git-ignored; about 0.5 MB, within what the GPU call carries).
#   scripts/gpu_nvrtc_check.sh run                      on the GPU machine, from the repository
#       root, with what scripts/gpu_run.sh prepare carried (.carry/ops: kiln_gpu_tests and its
#       libraries): ReleaseFromEnvironment (tests/gpu/release_env_gpu_test.cpp) with the store
#       as the only source (offline, JIT disabled), and each specialisation must have been loaded
#       from it. Logs to $OUT (or /tmp/kiln-gpu-out). Exit 0 only when every check passed.
# Here: scripts/gpu_run.sh prepare build && scripts/gpu_nvrtc_check.sh prepare build/kiln; then
# carry .carry to the GPU machine and run scripts/gpu_nvrtc_check.sh run there.
set -euo pipefail
cd "$(dirname "$0")/.."
carry=.carry/nvrtc
case "${1:-}" in
  prepare)
    kiln="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
    targets="${3:-sm_90a,compute_80}"
    toolkit="$(scripts/nvrtc_toolkit.sh build/nvrtc-12.9)"
    rm -rf "$carry"
    mkdir -p "$carry"
    "$kiln" build --toolkits "nvrtc:$toolkit" --targets "$targets" --out "$carry/work" \
      --dist "$carry/dist"
    "$kiln" install "$carry"/dist/kiln-kernels-*-index.json --dest "$carry/store"
    rm -rf "$carry/work"
    du -sh "$carry"
    ;;
  run)
    out="${OUT:-/tmp/kiln-gpu-out}"
    ops=.carry/ops
    mkdir -p "$out"
    [ -d "$carry/store" ] || { echo "no $carry/store: run 'prepare' first and carry $carry" >&2; exit 2; }
    [ -x "$ops/bin/kiln_gpu_tests" ] || { echo "no $ops/bin/kiln_gpu_tests: run scripts/gpu_run.sh prepare BUILD_DIR first and carry $ops" >&2; exit 2; }
    [ -d "$ops/lib" ] || tar -xzf "$ops/lib.tgz" -C "$ops"
    export LD_LIBRARY_PATH="$PWD/$ops/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    tests="$ops/bin/kiln_gpu_tests"
    store="$(cd "$carry/store" && pwd)"
    work="$(mktemp -d)"
    set +e
    KILN_TEST_RELEASE_ENV=1 KILN_TEST_RELEASE_ORIGINS="$work/origins" KILN_ARTIFACT_PATH="$store" \
      KILN_OFFLINE=1 KILN_DISABLE_JIT=1 KILN_CACHE_DIR="$work/cache" \
      "$tests" --gtest_filter='ReleaseFromEnvironment.*' >"$out/nvrtc-store.log" 2>&1
    st=$?
    set -e
    tail -n 5 "$out/nvrtc-store.log"
    [ "$st" = 0 ] || { echo "FAILED: ReleaseFromEnvironment on the NVRTC 12.9 store (exit $st)"; exit 1; }
    [ -s "$work/origins" ] || { echo "FAILED: no specialisation was loaded"; exit 1; }
    wrong=$(awk -v p="$store" '{ sub(/^memory:/, "", $2) } index($2, p) != 1' "$work/origins" | head -n 3)
    [ -z "$wrong" ] || { echo "FAILED: loaded from elsewhere than $store: $wrong"; exit 1; }
    echo "every one of $(wc -l <"$work/origins") specialisations loaded from the CUDA 12.9 (NVRTC) store and correct"
    ;;
  *)
    sed -n '2,18p' "$0"
    exit 2
    ;;
esac
