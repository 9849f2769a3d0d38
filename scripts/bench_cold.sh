#!/usr/bin/env bash
# The cold-path benchmarks (docs/performance.md "Cold path at the floor"):
#
#   scripts/bench_cold.sh prepare BUILD_DIR [DIST_DIR]
#       here (build machine, no GPU). The store is the sm_90a archive, as ./ci/release.sh
#       publishes it for the default targets: taken from DIST_DIR (release/dist of a
#       ./ci/release.sh run) when given, else built with BUILD_DIR/kiln for sm_90a alone (the
#       same bytes: an archive depends only on its target). Copies kiln_load_bench,
#       kiln_cold_start, libkiln and the non-system libraries they need into .carry/cold
#       (git-ignored; carried to the device machine). BUILD_DIR needs -DKILN_BUILD_BENCH=ON.
#   scripts/bench_cold.sh run
#       on the GPU machine, from the repository root, in one call: the in-process cold get with
#       its per-phase breakdown (kiln_load_bench --cold-only), then the fresh-process benchmark
#       (kiln_cold_start), then both again without the GPU for comparison with the build
#       machine. Logs, markdown and JSON go to $OUT (or /tmp/kiln-cold-out).
#   scripts/bench_cold.sh local BUILD_DIR [STORE]
#       here: the --no-gpu modes of both benchmarks from BUILD_DIR (STORE: default the one
#       `prepare` made).
#   scripts/bench_cold.sh baseline BASE_BUILD_DIR
#       here, after `prepare`: adds another build's libkiln, libkiln-kernels and kiln_load_bench
#       (a build of the commit to compare against, with -DKILN_BUILD_BENCH=ON) as the baseline
#       of `ab`, in .carry/cold/base.
#   scripts/bench_cold.sh ab [ROUNDS]
#       on the GPU machine: ROUNDS (default 3) rounds of kiln_cold_start --runs 41 over the
#       baseline's libkiln and this build's, alternating, in the same program against the same
#       store; then ROUNDS rounds of kiln_load_bench --cold-only --iterations 300 of each. One
#       machine's floors move by 1.5x from call to call: only the ratios of one call compare.
#
# COLD_CPU=N (run, ab): every kiln_cold_start process on CPU N only (its --cpu), so that where
# the scheduler puts a child does not decide its mode's time.
#
# Exit status: the first benchmark that failed, else 0 (a ratio above its goal is reported, not
# an error).
set -uo pipefail
CARRY=.carry/cold  # inside the git-ignored .carry/, which others may use too
IN_PROCESS_ITERATIONS=200
FRESH_RUNS=15

prepare() {
  local build=${1:?usage: bench_cold.sh prepare BUILD_DIR [DIST_DIR]} dist=${2:-}
  set -e
  rm -rf "$CARRY"
  mkdir -p "$CARRY/bin" "$CARRY/lib" "$CARRY/dist"
  git check-ignore -q "$CARRY" || { echo "$CARRY is not git-ignored" >&2; exit 1; }
  local kiln="$build/kiln"
  if [ -n "$dist" ]; then
    cp "$dist"/*-sm_90a.tar.zst "$CARRY/dist/"
  else
    "$kiln" build --targets sm_90a --out "$build/cold-bench-build" --dist "$CARRY/dist"
  fi
  "$kiln" install "$CARRY"/dist/*-sm_90a.tar.zst --dest "$CARRY/store"
  cp "$build/bench/kiln_load_bench" "$build/bench/kiln_cold_start" "$CARRY/bin/"
  strip --strip-debug "$CARRY"/bin/kiln_*
  # kiln_cold_start --no-gpu finds its stand-in libcuda.so.1 in bin/stand-in.
  mkdir -p "$CARRY/bin/stand-in"
  cp -L "$build/bench/stand-in/libcuda.so.1" "$CARRY/bin/stand-in/"
  # libkiln and the reference package's description (libkiln-kernels: kiln_cold_start opens both,
  # as an application of kiln's kernels does).
  cp -L "$build"/libkiln.so.*.*.* "$build"/libkiln-kernels.so.*.*.* "$CARRY/lib/"
  (cd "$CARRY/lib" && for f in libkiln.so.*.*.*; do ln -sf "$f" "${f%.*}"; ln -sf "$f" libkiln.so; done
   for f in libkiln-kernels.so.*.*.*; do ln -sf "$f" "${f%.*}"; ln -sf "$f" libkiln-kernels.so; done)
  # Every non-system library the binaries and libkiln need, resolved here; libcrypto too (the
  # floor of kiln_cold_start dlopens it, so both modes load the same one).
  ldd "$CARRY"/bin/kiln_* "$build"/libkiln.so | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$CARRY/lib/"; done
  strip --strip-debug "$CARRY"/lib/libkiln.so* "$CARRY"/lib/libkiln-kernels.so*
  du -sh "$CARRY" "$CARRY"/*  # the whole carried tree must stay under 64 MiB
}

# run_bench NAME CMD...: runs CMD with its output in $out/NAME.log; remembers the first failure.
run_bench() {
  local name=$1
  shift
  echo "== $name: $*" | tee "$out/$name.log"
  "$@" 2>&1 | tee -a "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "== $name exit $rc" | tee -a "$out/$name.log"
  [ "$rc" -ne 0 ] && [ "$first_rc" -eq 0 ] && first_rc=$rc
  return 0
}

# A node's store was installed before its processes start; a store copied to the machine a
# moment ago is not "settled" (core/io/identity_cache.hpp: files changed less than 1 s before a
# read are not remembered, so every cold get would list and parse it again; scan records, which
# the fresh-process benchmark's kiln children keep, want 3 s: core/store/scan_record.hpp). Waits
# until the newest mtime/ctime under STORE is 3.5 s old, and says so.
settle() {
  local newest now
  newest=$(find "$1" -printf '%T@\n%C@\n' | sort -n | tail -1)
  now=$(date +%s.%N)
  python3 -c "import sys, time; w = 3.5 - ($now - $newest); time.sleep(max(0, w)); print(f'store settled: waited {max(0, w):.2f} s')" |
    tee -a "$out/device.txt"
}

run() {
  out=${OUT:-/tmp/kiln-cold-out}
  first_rc=0
  mkdir -p "$out"
  local root=$PWD bin="$PWD/$CARRY/bin" store="$PWD/$CARRY/store"
  export LD_LIBRARY_PATH="$root/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
    nproc
    uptime
  } 2>&1 | tee "$out/device.txt"
  if ldd "$bin"/kiln_* "$CARRY"/lib/libkiln.so | grep 'not found'; then
    echo "missing shared libraries (above): add them in 'prepare'" | tee -a "$out/device.txt"
  fi
  ldd "$CARRY"/lib/libkiln.so | wc -l | sed 's/^/ldd libkiln.so lines: /' | tee -a "$out/device.txt"
  settle "$store"
  run_bench cold-inprocess "$bin/kiln_load_bench" --store "$store" --cold-only \
    --iterations "$IN_PROCESS_ITERATIONS" --out "$out/cold-inprocess.md" --json "$out/cold-inprocess.json"
  run_bench cold-fresh "$bin/kiln_cold_start" --libkiln "$root/$CARRY/lib/libkiln.so" --store "$store" \
    --runs "$FRESH_RUNS" ${COLD_CPU:+--cpu "$COLD_CPU"} --out "$out/cold-fresh.md" \
    --json "$out/cold-fresh.json"
  run_bench cold-inprocess-nogpu "$bin/kiln_load_bench" --store "$store" --no-gpu \
    --iterations "$IN_PROCESS_ITERATIONS" --json "$out/cold-inprocess-nogpu.json"
  run_bench cold-fresh-nogpu "$bin/kiln_cold_start" --libkiln "$root/$CARRY/lib/libkiln.so" \
    --store "$store" --no-gpu --runs "$FRESH_RUNS" --json "$out/cold-fresh-nogpu.json"
  echo "cold benchmarks: first failing exit status $first_rc (0: all ran)" | tee -a "$out/device.txt"
  return "$first_rc"
}

run_local() {
  local build=${1:?usage: bench_cold.sh local BUILD_DIR [STORE]} store=${2:-$PWD/$CARRY/store}
  out=${OUT:-/tmp/kiln-cold-out}
  first_rc=0
  mkdir -p "$out"
  run_bench cold-inprocess-nogpu "$build/bench/kiln_load_bench" --store "$store" --no-gpu \
    --iterations "$IN_PROCESS_ITERATIONS" --json "$out/cold-inprocess-nogpu.json"
  run_bench cold-fresh-nogpu "$build/bench/kiln_cold_start" --libkiln "$build/libkiln.so" \
    --store "$store" --no-gpu --runs "$FRESH_RUNS" --json "$out/cold-fresh-nogpu.json"
  return "$first_rc"
}

baseline() {
  local base=${1:?usage: bench_cold.sh baseline BASE_BUILD_DIR}
  set -e
  [ -d "$CARRY/lib" ] || { echo "bench_cold.sh baseline: run 'prepare' first" >&2; exit 2; }
  rm -rf "$CARRY/base"
  mkdir -p "$CARRY/base/lib" "$CARRY/base/bin"
  cp -L "$base"/libkiln.so.*.*.* "$base"/libkiln-kernels.so.*.*.* "$CARRY/base/lib/"
  (cd "$CARRY/base/lib" && for f in libkiln.so.*.*.*; do ln -sf "$f" "${f%.*}"; ln -sf "$f" libkiln.so; done
   for f in libkiln-kernels.so.*.*.*; do ln -sf "$f" "${f%.*}"; ln -sf "$f" libkiln-kernels.so; done)
  cp "$base/bench/kiln_load_bench" "$CARRY/base/bin/"
  strip --strip-debug "$CARRY"/base/lib/*.so.*.*.* "$CARRY/base/bin/kiln_load_bench"
  du -sh "$CARRY" "$CARRY/base"
}

run_ab() {
  local rounds=${1:-3}
  out=${OUT:-/tmp/kiln-cold-out}
  first_rc=0
  mkdir -p "$out"
  local root=$PWD
  [ -d "$root/$CARRY/base" ] || { echo "bench_cold.sh ab: no baseline (bench_cold.sh baseline)" >&2; return 2; }
  export LD_LIBRARY_PATH="$root/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  settle "$root/$CARRY/store"
  local round
  for round in $(seq "$rounds"); do
    run_bench "ab-fresh-base-$round" "$root/$CARRY/bin/kiln_cold_start" \
      --libkiln "$root/$CARRY/base/lib/libkiln.so" --store "$root/$CARRY/store" --runs 41 \
      ${COLD_CPU:+--cpu "$COLD_CPU"} --json "$out/ab-fresh-base-$round.json"
    run_bench "ab-fresh-this-$round" "$root/$CARRY/bin/kiln_cold_start" \
      --libkiln "$root/$CARRY/lib/libkiln.so" --store "$root/$CARRY/store" --runs 41 \
      ${COLD_CPU:+--cpu "$COLD_CPU"} --json "$out/ab-fresh-this-$round.json"
  done
  for round in $(seq "$rounds"); do
    run_bench "ab-inprocess-base-$round" "$root/$CARRY/base/bin/kiln_load_bench" \
      --store "$root/$CARRY/store" --cold-only --iterations 300
    run_bench "ab-inprocess-this-$round" "$root/$CARRY/bin/kiln_load_bench" \
      --store "$root/$CARRY/store" --cold-only --iterations 300
  done
  grep -H "first_result (first\|first_result, 10th" "$out"/ab-fresh-*.log | tee "$out/ab-summary.txt"
  # Every round's processes pooled per libkiln: kiln/floor of the pooled medians and 10th
  # percentiles (kiln_cold_start says why both).
  python3 - "$out" <<'PY' | tee -a "$out/ab-summary.txt"
import glob, json, statistics, sys
for which in ("base", "this"):
    pooled = {"floor": [], "kiln": []}
    for f in sorted(glob.glob(f"{sys.argv[1]}/ab-fresh-{which}-*.json")):
        j = json.load(open(f))
        for m in pooled:
            pooled[m] += j["modes"][m]["first_result"]["samples_us"]
    if not pooled["floor"]:
        continue
    q = {m: statistics.quantiles(v, n=10) for m, v in pooled.items()}
    med = {m: statistics.median(v) for m, v in pooled.items()}
    print(f"{which}: {len(pooled['kiln'])} processes per mode pooled: first_result kiln/floor "
          f"medians {med['kiln'] / med['floor']:.3f}, 10th percentiles "
          f"{q['kiln'][0] / q['floor'][0]:.3f} (floor median {med['floor']:.0f} us)")
PY
  grep -H "cold get (store.*axpy" "$out"/ab-inprocess-*.log | tee -a "$out/ab-summary.txt"
  return "$first_rc"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  local) shift; run_local "$@" ;;
  baseline) shift; baseline "$@" ;;
  ab) shift; run_ab "$@" ;;
  *) echo "usage: $0 prepare BUILD_DIR [DIST_DIR] | run | local BUILD_DIR [STORE] |" \
          "baseline BASE_BUILD_DIR | ab [ROUNDS]" >&2; exit 2 ;;
esac
