#!/usr/bin/env bash
# The GPU proof run (docs/gpu-runs.md, docs/performance.md), in two steps:
#
#   scripts/gpu_run.sh prepare BUILD_DIR   here (build machine): builds the sm_90+sm_90a store,
#       the sm_90 archive alone (also built one nvcc per specialisation, to compare the first
#       gets of both build modes), a PTX-only compute_80 store and the dist directory with
#       BUILD_DIR/kiln, and copies the
#       binaries and the shared libraries they need (not glibc/libstdc++/libgcc, not libcuda)
#       into .carry/ (git-ignored; carried to the device machine).
#   scripts/gpu_run.sh run                 on the GPU machine, from the repository root: runs
#       every GPU test and the load-path benchmark; logs go to $OUT (or /tmp/kiln-gpu-out).
#
# Exit status of `run`: the GPU tests' status, or the benchmark's when the tests passed.
set -uo pipefail
CARRY=.carry/ops  # inside the git-ignored .carry/, which others may use too

# lazy_libs KILN: the libraries libkiln dlopens on first use, which ldd does not list.
source "$(dirname "${BASH_SOURCE[0]}")/lazy_libs.sh"

prepare() {
  local build=${1:?usage: gpu_run.sh prepare BUILD_DIR}
  set -e
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/lib"
  git check-ignore -q "$CARRY" || { echo "$CARRY is not git-ignored" >&2; exit 1; }
  local kiln="$build/kiln"
  "$kiln" build --targets sm_90,sm_90a --out "$build/gpu-store-build" --dist "$CARRY/dist"
  "$kiln" install "$CARRY"/dist/*-index.json --dest "$CARRY/store-sm90"
  "$kiln" install "$CARRY"/dist/*-sm_90.tar.zst --dest "$CARRY/store-sm90-only"
  # The same sm_90 archive built one nvcc per specialisation: the first get of a grouped build's
  # artifact against the per-specialisation one (issue 37: loading unchanged).
  "$kiln" build --targets sm_90 --one-nvcc-per-specialisation --out "$build/gpu-perspec-build" \
    --dist "$build/gpu-perspec-dist"
  "$kiln" install "$build"/gpu-perspec-dist/*-sm_90.tar.zst --dest "$CARRY/store-sm90-per-spec"
  "$kiln" build --targets compute_80 --out "$build/gpu-ptx-build" --dist "$build/gpu-ptx-dist"
  "$kiln" install "$build"/gpu-ptx-dist/*-index.json --dest "$CARRY/store-ptx"
  cp "$kiln" "$build/tests/kiln_gpu_tests" "$build/bench/kiln_load_bench" "$CARRY/bin/"
  strip --strip-debug "$CARRY"/bin/*
  cp -L "$build"/libkiln.so.*.*.* "$build"/libkiln-kernels.so.*.*.* "$CARRY/lib/"
  (cd "$CARRY/lib" && for f in libkiln.so.*.*.*; do ln -sf "$f" "${f%.*}"; ln -sf "$f" libkiln.so; done
   for f in libkiln-kernels.so.*.*.*; do ln -sf "$f" "${f%.*}"; ln -sf "$f" libkiln-kernels.so; done)
  # Every non-system library the binaries need, resolved here.
  local lazy
  lazy=$(lazy_libs "$kiln")
  { ldd "$CARRY"/bin/* "$build"/libkiln.so $lazy | awk '/=> \// {print $3}'; for l in $lazy; do echo "$l"; done; } | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libkiln-kernels)\.so' |
    while read -r lib; do cp -L "$lib" "$CARRY/lib/"; done
  strip --strip-debug "$CARRY"/lib/libkiln.so* "$CARRY"/lib/libkiln-kernels.so*
  # The libraries go as one tar.gz (libarchive's libxml2 brings ICU's 31 MB data file, and the
  # whole carried tree must stay under 64 MiB); `run` unpacks it.
  tar -czf "$CARRY/lib.tgz" -C "$CARRY" lib && rm -rf "$CARRY/lib"
  du -sh "$CARRY" "$CARRY"/*
}

run() {
  local out=${OUT:-/tmp/kiln-gpu-out}
  mkdir -p "$out"
  local root=$PWD
  [ -f "$CARRY/lib.tgz" ] && tar -xzf "$CARRY/lib.tgz" -C "$CARRY"
  export LD_LIBRARY_PATH="$root/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # NVRTC for the JIT tier (libkiln dlopens libnvrtc.so.13 by name)
  [ -d /usr/local/cuda/lib64 ] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
  export KILN_TEST_GPU_STORE="$root/$CARRY/store-sm90"
  export KILN_TEST_GPU_PTX_STORE="$root/$CARRY/store-ptx"
  export KILN_TEST_GPU_SM90_ONLY_STORE="$root/$CARRY/store-sm90-only"
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
    nvidia-smi -L
  } 2>&1 | tee "$out/device.txt"
  if ldd "$CARRY"/bin/kiln_gpu_tests "$CARRY"/bin/kiln_load_bench | grep 'not found'; then
    echo "missing shared libraries (above): add them in 'prepare'" | tee -a "$out/device.txt"
  fi
  "$CARRY/bin/kiln_gpu_tests" --gtest_output="xml:$out/gpu-tests.xml" 2>&1 | tee "$out/gpu-tests.log"
  local tests_rc=${PIPESTATUS[0]}

  # Mirror row: the dist directory served by Python's static server on loopback (no nginx there).
  local port=18431
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$CARRY/dist" >"$out/http.log" 2>&1 &
  local server=$!
  sleep 1
  "$CARRY/bin/kiln_load_bench" --store "$KILN_TEST_GPU_SM90_ONLY_STORE" --mirror "http://127.0.0.1:$port" \
    --index "$(ls "$CARRY"/dist/*-index.json | head -1)" --out "$out/bench.md" 2>&1 | tee "$out/bench.log"
  local bench_rc=${PIPESTATUS[0]}
  kill "$server" 2>/dev/null
  # Cold gets of the grouped build's artifacts against the per-specialisation build's, back to back.
  local mode
  for mode in grouped per-spec grouped per-spec; do
    local store=$KILN_TEST_GPU_SM90_ONLY_STORE
    [ "$mode" = per-spec ] && store="$root/$CARRY/store-sm90-per-spec"
    [ -d "$store" ] || continue
    echo "== cold gets, $mode build" | tee -a "$out/bench-build-modes.log"
    "$CARRY/bin/kiln_load_bench" --store "$store" --cold-only 2>&1 | tee -a "$out/bench-build-modes.log"
  done
  echo "gpu tests exit $tests_rc, benchmark exit $bench_rc" | tee -a "$out/device.txt"
  [ "$tests_rc" -ne 0 ] && return "$tests_rc"
  return "$bench_rc"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: $0 prepare BUILD_DIR | run" >&2; exit 2 ;;
esac
