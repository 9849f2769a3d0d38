#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) with clang and address+undefined
# sanitizers, then runs each for a bounded time from its seed corpus (fuzz/corpus/<target>/).
# Any finding (crash, sanitizer report, leak, timeout, out-of-memory, an input that exceeds
# the target's bounds) fails the script; the input is kept as <build>/fuzz-run/<target>/crash-*
# and printed. Every target runs even after a finding, so one run reports them all.
#
#   scripts/fuzz.sh [target ...]        default: every target
#   KILN_FUZZ_SECONDS=45                time per target
#   KILN_FUZZ_BUILD=build-fuzz          build directory (clang, -DKILN_FUZZ=ON)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${KILN_FUZZ_SECONDS:-45}"
build="${KILN_FUZZ_BUILD:-build-fuzz}"
all=(index manifest fatbin archive checksums wheel wheel_record retry_after)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

# -max_len per target: above every seed, small enough that a run explores rather than grows.
declare -A max_len=([index]=16384 [manifest]=16384 [fatbin]=65536 [archive]=65536
  [checksums]=8192 [wheel]=65536 [wheel_record]=8192 [retry_after]=256)

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DKILN_FUZZ=ON -DKILN_SHARED=OFF \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" -j"$(nproc)" "${targets[@]/%/_fuzz}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# The wheel targets write one file per input; keep it off the disk where possible.
[ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm

failed=()
summary=()
for t in "${targets[@]}"; do
  len="${max_len[$t]:?unknown fuzz target $t}"
  run="$build/fuzz-run/$t"
  rm -rf "$run"
  mkdir -p "$run/corpus"
  # New inputs go to $run/corpus; the checked-in seeds (regressions included) are read only.
  dict=()
  case "$t" in index | manifest) dict=(-dict=fuzz/json.dict) ;; esac
  set +e
  "$build/fuzz/${t}_fuzz" -max_total_time="$secs" -max_len="$len" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$run/" "${dict[@]}" "$run/corpus" \
    "fuzz/corpus/$t" >"$run/log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_runs: *//p' "$run/log" | tail -1)
  summary+=("$(printf '%-13s rc=%-3s executions=%s' "$t" "$rc" "${runs:-?}")")
  if ((rc != 0)); then
    failed+=("$t")
    echo "fuzz: $t: FINDING (exit $rc); the log ends:" >&2
    tail -40 "$run/log" >&2
    for f in "$run"/crash-* "$run"/leak-* "$run"/timeout-* "$run"/oom-* "$run"/slow-unit-*; do
      [ -e "$f" ] && echo "fuzz: $t: input kept at $f ($(stat -c %s "$f") bytes)" >&2
    done
  fi
done

printf 'fuzz: %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz: findings in: ${failed[*]} (docs/fuzzing.md: how to reproduce and keep them)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs} s each, no findings"
