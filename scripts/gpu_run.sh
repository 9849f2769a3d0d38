#!/usr/bin/env bash
# The GPU proof run (docs/gpu-runs.md, docs/performance.md), in two steps:
#
#   scripts/gpu_run.sh prepare BUILD_DIR [RELEASE_DIST]   here (build machine): builds the
#       sm_90+sm_90a store, the sm_90 archive alone, the sm_90a archive one nvcc per
#       specialisation (its first gets against the grouped one: RELEASE_DIST's, the dist
#       directory of ./ci/release.sh, else built here), a PTX-only compute_80 store and the
#       dist directory with BUILD_DIR/kiln, and copies the
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
  local build=${1:?usage: gpu_run.sh prepare BUILD_DIR [RELEASE_DIST]}
  local release_dist=${2:-}
  set -e
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/lib"
  git check-ignore -q "$CARRY" || { echo "$CARRY is not git-ignored" >&2; exit 1; }
  local kiln="$build/kiln"
  "$kiln" build --targets sm_90,sm_90a --out "$build/gpu-store-build" --dist "$CARRY/dist"
  "$kiln" install "$CARRY"/dist/*-index.json --dest "$CARRY/store-sm90"
  "$kiln" install "$CARRY"/dist/*-sm_90.tar.zst --dest "$CARRY/store-sm90-only"
  # First gets by build mode (issue 37: loading unchanged): the sm_90a archive (what the H200
  # loads) as the release ships it (RELEASE_DIST, from ./ci/release.sh; else built here, grouped)
  # against the same tree built one nvcc per specialisation.
  if [ -n "$release_dist" ]; then
    "$kiln" install "$release_dist"/*-cuda13.0-sm_90a.tar.zst --dest "$CARRY/store-modes-grouped"
  else
    "$kiln" build --targets sm_90a --out "$build/gpu-grouped-build" --dist "$build/gpu-grouped-dist"
    "$kiln" install "$build"/gpu-grouped-dist/*-sm_90a.tar.zst --dest "$CARRY/store-modes-grouped"
  fi
  "$kiln" build --targets sm_90a --one-nvcc-per-specialisation --out "$build/gpu-perspec-build" \
    --dist "$build/gpu-perspec-dist"
  "$kiln" install "$build"/gpu-perspec-dist/*-sm_90a.tar.zst --dest "$CARRY/store-modes-per-spec"
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
  # Cold gets of the two build modes' sm_90a artifacts: 12 rounds (6 each) in a random order,
  # each round 200 cold gets alternating with the floor (the same file loaded by bare code), so
  # neither mode always runs first or on a warmer machine; bench_build_modes.py summarises.
  local mode i=0
  mkdir -p "$out/build-modes"
  for mode in $(printf 'grouped\nper-spec\n%.0s' 1 2 3 4 5 6 | shuf); do
    i=$((i + 1))
    "$CARRY/bin/kiln_load_bench" --store "$root/$CARRY/store-modes-$mode" --cold-only \
      --iterations 200 --json "$out/build-modes/$i-$mode.json" >>"$out/bench-build-modes.log" 2>&1 ||
      echo "round $i ($mode) failed" | tee -a "$out/bench-build-modes.log"
  done
  python3 "$(dirname "${BASH_SOURCE[0]}")/bench_build_modes.py" "$out/build-modes" 2>&1 |
    tee -a "$out/bench-build-modes.log"
  echo "gpu tests exit $tests_rc, benchmark exit $bench_rc" | tee -a "$out/device.txt"
  [ "$tests_rc" -ne 0 ] && return "$tests_rc"
  return "$bench_rc"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: $0 prepare BUILD_DIR | run" >&2; exit 2 ;;
esac
