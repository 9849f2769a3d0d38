#!/usr/bin/env bash
# Benchmark of kiln build's result cache (not a test): on this machine, one run each, every
# build from a clean --out, its archives and index compared with the uncached build's:
#   1. the default release (kiln's registry, ci/targets.txt): no cache; cold cache on a remote
#      (nginx with WebDAV PUT on loopback: Bazel's HTTP cache protocol); warm remote; warm
#      local directory (a copy of what the remote holds: the layout is the same);
#   2. the same for a heavy kernel set: a temp project holding kiln's gemm_f16_tc family with
#      its tile list widened to BM, BN in {32, 64, 128, 256} (16 specialisations), for
#      HEAVY_TARGETS;
#   3. two trees of the heavy project at different absolute paths sharing one cache: the second
#      takes every result from the first.
# Each build is timed with /usr/bin/time -v (wall seconds, peak RSS); the cache line of each
# build (hits, misses, bytes) goes into the results.
#   scripts/bench_build_cache.sh [KILN] [WORKDIR]
# Environment: TARGETS (default ci/targets.txt), HEAVY_TARGETS (default sm_80,sm_90), JOBS
# (default 2), SKIP_DEFAULT=1 (only parts 2 and 3). Needs nginx (Debian nginx-light).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kiln="$(cd "$(dirname "${1:-$repo/build/kiln}")" && pwd)/$(basename "${1:-$repo/build/kiln}")"
work="${2:-$(mktemp -d /tmp/kiln-bench-cache.XXXXXX)}"
targets="${TARGETS:-$(grep -v '^#' "$repo/ci/targets.txt" | tr -d ' \n')}"
heavy_targets="${HEAVY_TARGETS:-sm_80,sm_90}"
jobs="${JOBS:-2}"
rm -rf "$work" && mkdir -p "$work"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-315532800}"
unset KILN_COMPILER_LAUNCHER KILN_BUILD_CACHE
results="$work/results.txt"

# nginx serving $work/remote read-write on a free loopback port (WebDAV PUT).
start_nginx() {
  local prefix="$work/nginx"
  mkdir -p "$prefix/logs" "$prefix/tmp" "$work/remote"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  cat > "$prefix/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1;
error_log $prefix/logs/error.log; pid $prefix/logs/nginx.pid;
events { worker_connections 256; }
http {
  access_log off; client_body_temp_path $prefix/tmp/body; proxy_temp_path $prefix/tmp/proxy;
  fastcgi_temp_path $prefix/tmp/fcgi; uwsgi_temp_path $prefix/tmp/uwsgi; scgi_temp_path $prefix/tmp/scgi;
  server {
    listen 127.0.0.1:$port; root $work/remote; client_max_body_size 1g;
    dav_methods PUT; create_full_put_path on;
  }
}
EOF
  nginx -p "$prefix" -c "$prefix/nginx.conf" &
  nginx_pid=$!
  trap 'kill "$nginx_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.05
  done
  remote="http://127.0.0.1:$port"
}

# timed NAME CMD...: runs CMD under /usr/bin/time -v; records wall, peak RSS and its cache line.
timed() {
  local name="$1"; shift
  /usr/bin/time -v -o "$work/$name.time" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; return 1; }
  local wall rss cache
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$work/$name.time")"
  rss="$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2/1024}' "$work/$name.time")"
  cache="$(grep -E '^(cache |compiled |up to date)' "$work/$name.log" | tr '\n' ' ' | sed "s|$work|\$W|g")"
  printf '%-26s %8.2f s wall  %5s MiB  %s\n' "$name" "$wall" "$rss" "$cache" | tee -a "$results"
}
same() {  # DIR DIR: identical archives and index
  diff -r "$1" "$2" >/dev/null || { echo "DIFFERENT: $1 vs $2" | tee -a "$results"; return 1; }
}

# set NAME SOURCE TARGETS: no cache, cold remote, warm remote, warm local; all compared.
set_of_builds() {
  local name="$1" source="$2" tlist="$3"
  local build=("$kiln" build --source "$source" --targets "$tlist" --jobs "$jobs")
  timed "$name-no-cache" "${build[@]}" --out "$work/$name-none"
  timed "$name-cold-remote" "${build[@]}" --out "$work/$name-cold" --cache "$remote"
  timed "$name-warm-remote" "${build[@]}" --out "$work/$name-warm-remote" --cache "$remote"
  rm -rf "$work/local-$name" && cp -r "$work/remote" "$work/local-$name"
  timed "$name-warm-local" "${build[@]}" --out "$work/$name-warm-local" --cache "$work/local-$name"
  for v in cold warm-remote warm-local; do same "$work/$name-none/dist" "$work/$name-$v/dist"; done
}

# The heavy project: kiln's gemm_f16_tc family alone, tiles widened; at path $1.
heavy_project() {
  mkdir -p "$1/registry" "$1/kernels"
  cp "$repo/kernels/"*.cu "$repo/kernels/"*.cuh "$1/kernels/"
  echo "1.0.0" > "$1/VERSION"
  echo '{"format": 1, "name": "heavy-gemm"}' > "$1/registry/package.json"
  cat > "$1/registry/kernels.json" <<'EOF'
{"format": 1, "types": {},
 "families": [{"name": "gemm_f16_tc", "sources": ["gemm_f16_tc.cu"],
   "entries": ["kiln::gemm_f16_tc_kernel<{bm}, {bn}>"],
   "params": [{"name": "bm", "kind": "int", "values": [32, 64, 128, 256]},
              {"name": "bn", "kind": "int", "values": [32, 64, 128, 256]}],
   "targets": ["sm_80+"], "flags": []}]}
EOF
}

echo "kiln bench_build_cache: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), jobs $jobs, $(date -u +%FT%TZ)" | tee "$results"
start_nginx
if [ "${SKIP_DEFAULT:-0}" != 1 ]; then
  echo "default release: targets $targets, kiln's registry" | tee -a "$results"
  set_of_builds release "$repo" "$targets"
  rm -rf "$work/remote"/*
fi
echo "heavy set: gemm_f16_tc, 16 tiles, targets $heavy_targets" | tee -a "$results"
heavy_project "$work/trees/a/heavy"
set_of_builds heavy "$work/trees/a/heavy" "$heavy_targets"
echo "two trees at different paths, one cache (the heavy set's local copy)" | tee -a "$results"
heavy_project "$work/trees/elsewhere/deeper/heavy-copy"
timed heavy-second-tree "$kiln" build --source "$work/trees/elsewhere/deeper/heavy-copy" \
  --targets "$heavy_targets" --jobs "$jobs" --out "$work/heavy-second-tree" --cache "$work/local-heavy"
same "$work/heavy-none/dist" "$work/heavy-second-tree/dist"
echo "every variant byte-identical to its uncached build; results in $results" | tee -a "$results"
