#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) with clang and address+undefined
# sanitizers. Each target first replays every checked-in input of fuzz/corpus/<target>/ (seeds
# and regressions, each run once, no mutation), then explores from them for a bounded time.
# Any finding (crash, sanitizer report, leak, timeout, out-of-memory, an input that exceeds
# the target's bounds), in the replay or the exploration, fails the script; an exploration's
# input is kept as <build>/fuzz-run/<target>/crash-* and printed, a replayed one is named.
# Every target runs even after a finding, so one run reports them all.
#
#   scripts/fuzz.sh [target ...]        default: every target
#   KILN_FUZZ_SECONDS=45                exploration time per target (0: replay only)
#   KILN_FUZZ_BUILD=build-fuzz          build directory (clang, -DKILN_FUZZ=ON)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${KILN_FUZZ_SECONDS:-45}"
build="${KILN_FUZZ_BUILD:-build-fuzz}"
all=(index manifest manifest_entry scan_record fatbin archive checksums wheel wheel_record
  retry_after package_description action_result tuf_metadata bundle shard_manifest)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

# -max_len per target: above every seed, small enough that a run explores rather than grows.
declare -A max_len=([index]=16384 [manifest]=16384 [manifest_entry]=16384 [scan_record]=8192
  [fatbin]=65536 [archive]=65536 [checksums]=8192 [wheel]=65536 [wheel_record]=8192
  [retry_after]=256 [package_description]=65536 [action_result]=4096 [tuf_metadata]=16384
  [bundle]=131072 [shard_manifest]=16384)

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DKILN_FUZZ=ON -DKILN_SHARED=OFF \
  -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON >/dev/null
ninja -C "$build" -j"$(nproc)" "${targets[@]/%/_fuzz}"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# The wheel targets write one file per input; keep it off the disk where possible.
[ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm

# The first line of a target's output that says what went wrong.
reason() {
  grep -m1 -E 'kiln fuzz finding|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error' "$1" || true
}

# replay TARGET RUN: runs every file of fuzz/corpus/TARGET once, in one process while none fails
# (libFuzzer runs file arguments one by one, no mutation); after a failure the inputs after the
# failing one go on in a new process. Sets replayed (inputs run) and replay_bad (failing inputs,
# each with its reason).
replay() {
  local t=$1 run=$2 bin="$build/fuzz/$1_fuzz" log="$2/replay.log" bad
  local -a files
  mapfile -t files < <(find "fuzz/corpus/$t" -maxdepth 1 -type f | LC_ALL=C sort)
  replayed=${#files[@]}
  replay_bad=()
  while ((${#files[@]})); do
    if "$bin" -rss_limit_mb=2048 -timeout=10 "${files[@]}" >"$log" 2>&1; then
      return 0
    fi
    bad=$(sed -n 's/^Running: //p' "$log" | tail -1)
    replay_bad+=("${bad:-?}: $(reason "$log")")
    cp "$log" "$run/replay-$(basename "${bad:-unknown}").log"
    # Go on after the failing input (all done when it cannot be told).
    local i=0
    while ((i < ${#files[@]})) && [ "${files[i]}" != "$bad" ]; do i=$((i + 1)); done
    files=("${files[@]:i+1}")
  done
}

failed=()
summary=()
for t in "${targets[@]}"; do
  len="${max_len[$t]:?unknown fuzz target $t}"
  run="$build/fuzz-run/$t"
  rm -rf "$run"
  mkdir -p "$run/corpus"
  # 1. Replay: every checked-in input, once. A regression that comes back fails here, whatever
  # the exploration time.
  start=$(date +%s%N)
  replay "$t" "$run"
  ms=$((($(date +%s%N) - start) / 1000000))
  replay_secs="$((ms / 1000)).$((ms % 1000 / 100))"
  printf 'fuzz: %s: replayed %d checked-in inputs in %s s, %d failed\n' "$t" "$replayed" \
    "$replay_secs" "${#replay_bad[@]}"
  if ((${#replay_bad[@]})); then
    failed+=("$t")
    printf 'fuzz: %s: replayed input failed: %s\n' "$t" "${replay_bad[@]}" >&2
  fi
  replay_note=$(printf 'replayed=%-3s (%5s s)' "$replayed" "$replay_secs")
  if ((secs == 0)); then
    summary+=("$(printf '%-19s %s replay failures=%s' "$t" "$replay_note" "${#replay_bad[@]}")")
    continue
  fi
  # 2. Explore for $secs seconds from the same inputs.
  # New inputs go to $run/corpus; the checked-in seeds (regressions included) are read only.
  dict=()
  case "$t" in
  index | manifest | manifest_entry | package_description | tuf_metadata | shard_manifest)
    dict=(-dict=fuzz/json.dict)
    ;;
  esac
  # -fork=1 with -ignore_*: a finding does not end the run, so one known bug does not hide the
  # next one; every distinct input is kept and the exit status says whether there was any.
  set +e
  "$build/fuzz/${t}_fuzz" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$secs" -max_len="$len" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$run/" "${dict[@]}" "$run/corpus" "fuzz/corpus/$t" \
    >"$run/log" 2>&1
  rc=$?
  set -e
  # Executions: the fork driver's last "#N: cov:" line (libFuzzer 14 prints no final stats in
  # fork mode); a plain run's stat::number_of_executed_runs (or _units, as libFuzzer 14 says).
  runs=$({
    grep -oE '^#[0-9]+: cov' "$run/log" | tr -dc '0-9\n'
    sed -nE 's/^stat::number_of_executed_(runs|units): *//p' "$run/log"
  } | tail -1)
  shopt -s nullglob
  kept=("$run"/crash-* "$run"/leak-* "$run"/timeout-* "$run"/oom-* "$run"/slow-unit-*)
  shopt -u nullglob
  summary+=("$(printf '%-19s %s replay failures=%s executions=%-9s findings=%s' "$t" \
    "$replay_note" "${#replay_bad[@]}" "${runs:-?}" "${#kept[@]}")")
  if ((rc != 0 || ${#kept[@]})); then
    [[ " ${failed[*]} " == *" $t "* ]] || failed+=("$t")
    echo "fuzz: $t: ${#kept[@]} finding(s) (exit $rc)" >&2
    ((${#kept[@]})) || tail -20 "$run/log" >&2
    # Replay each kept input for the line that says what went wrong; print each distinct
    # reason once (digits folded), with how many inputs gave it and the smallest of them.
    declare -A count=() smallest=()
    for f in "${kept[@]}"; do
      "$build/fuzz/${t}_fuzz" -rss_limit_mb=2048 -timeout=10 "$f" >"$run/why.log" 2>&1 || true
      why=$(reason "$run/why.log")
      key=$(printf '%s' "${why:-see $run/log}" | sed -E "s/'[^']*'/'...'/g; s/[0-9]+/N/g")
      count[$key]=$((${count[$key]:-0} + 1))
      if [ -z "${smallest[$key]:-}" ] || (($(stat -c %s "$f") < $(stat -c %s "${smallest[$key]}"))); then
        smallest[$key]="$f"
      fi
    done
    for key in "${!count[@]}"; do
      echo "fuzz: $t: ${count[$key]} input(s): $key; smallest: ${smallest[$key]}" >&2
    done
    unset count smallest
  fi
done

printf 'fuzz: %s\n' "${summary[@]}"
if ((${#failed[@]})); then
  echo "fuzz: findings in: ${failed[*]} (docs/fuzzing.md: how to reproduce and keep them)" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, checked-in inputs replayed, then ${secs} s of exploration each, no findings"
