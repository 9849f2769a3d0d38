#!/usr/bin/env bash
# Benchmark of sharded builds and the shared compile cache (not a test): on this machine,
#   1. the release build as one `kiln build --jobs 2`,
#   2. the same as 2 shards of `--jobs 1` at once, then `kiln merge` (and its time alone),
#   3. a clean build through sccache with a cold cache, then a clean rebuild with it warm,
# each timed with /usr/bin/time -v (wall seconds and peak RSS: the largest process of the
# build, i.e. the heaviest nvcc step of that shard), and checks that every variant gives the
# same archive and index bytes.
#   scripts/bench_shard.sh [KILN] [WORKDIR]
# Environment: TARGETS (default: ci/targets.txt), ONLY (space-separated --only globs, default
# the whole registry), SCCACHE (default: scripts/sccache_tool.sh's sccache). The lead's full
# run: scripts/bench_shard.sh build/kiln. A reduced run: TARGETS=sm_80,sm_90a ONLY='axpy*'.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kiln="$(cd "$(dirname "${1:-$repo/build/kiln}")" && pwd)/$(basename "${1:-$repo/build/kiln}")"
work="${2:-$(mktemp -d /tmp/kiln-bench-shard.XXXXXX)}"
targets="${TARGETS:-$(grep -v '^#' "$repo/ci/targets.txt" | tr -d ' \n')}"
sccache="${SCCACHE:-$("$repo/scripts/sccache_tool.sh")}"
only=()
for g in ${ONLY:-}; do only+=(--only "$g"); done
rm -rf "$work" && mkdir -p "$work"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-315532800}"
unset KILN_COMPILER_LAUNCHER

# timed NAME CMD...: runs CMD under /usr/bin/time -v, records "NAME wall_s peak_MiB".
timed() {
  local name="$1"; shift
  /usr/bin/time -v -o "$work/$name.time" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; return 1; }
  local wall rss
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$work/$name.time")"
  rss="$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$work/$name.time")"
  printf '%-28s %8.1f s wall  %6s MiB peak RSS\n' "$name" "$wall" "$rss" | tee -a "$work/results.txt"
}
build=("$kiln" build --targets "$targets" "${only[@]}")
same() {  # DIR DIR: identical archives and index
  diff -r "$1" "$2" >/dev/null || { echo "DIFFERENT: $1 vs $2" | tee -a "$work/results.txt"; return 1; }
}

echo "kiln bench_shard: targets $targets, only ${ONLY:-(all)}, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee "$work/results.txt"
timed plain-jobs2 "${build[@]}" --jobs 2 --out "$work/plain"
echo "artifacts: $(grep -o 'compiled [0-9]* of [0-9]*' "$work/plain-jobs2.log")" | tee -a "$work/results.txt"

start=$(date +%s.%N)
timed shard1-of-2-jobs1 "${build[@]}" --jobs 1 --shard 1/2 --out "$work/s1" --dist "$work/shards/1" &
p1=$!
timed shard2-of-2-jobs1 "${build[@]}" --jobs 1 --shard 2/2 --out "$work/s2" --dist "$work/shards/2" &
p2=$!
wait $p1
wait $p2
end=$(date +%s.%N)
printf '%-28s %8.1f s wall\n' "2-shards-at-once" "$(echo "$end - $start" | bc)" | tee -a "$work/results.txt"
timed merge "$kiln" merge "$work/shards/1" "$work/shards/2" --dist "$work/merged"
same "$work/plain/dist" "$work/merged"

export SCCACHE_DIR="$work/sccache" SCCACHE_SERVER_PORT=$((20000 + $$ % 20000)) SCCACHE_IDLE_TIMEOUT=0
"$sccache" --start-server >/dev/null
trap '"$sccache" --stop-server >/dev/null 2>&1 || true' EXIT
timed sccache-cold-jobs2 "${build[@]}" --jobs 2 --out "$work/tree" --launcher "$sccache"
mv "$work/tree" "$work/tree-cold"
"$sccache" --zero-stats >/dev/null
timed sccache-warm-jobs2 "${build[@]}" --jobs 2 --out "$work/tree" --launcher "$sccache"
"$sccache" --show-stats | grep -E '^(Cache hits|Cache misses|Cache hits rate) ' | tee -a "$work/results.txt"
same "$work/plain/dist" "$work/tree-cold/dist"
same "$work/plain/dist" "$work/tree/dist"
echo "all variants byte-identical; results in $work/results.txt"
