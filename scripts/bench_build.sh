#!/usr/bin/env bash
# Benchmark of `kiln build` (not a test): full builds of the whole registry for the default
# targets (ci/targets.txt) into fresh directories, side by side in one run: the grouped build
# (one front-end pass per family group and target, a back end per specialisation; the default)
# and the one-nvcc-per-specialisation build (--one-nvcc-per-specialisation), RUNS times each,
# alternating; then a no-op rebuild, and archive sizes with and without the outer zstd.
# Usage: scripts/bench_build.sh [KILN_BINARY] [OUT_DIR] [extra kiln build args...]
# e.g. scripts/bench_build.sh build/kiln /tmp/kiln-bench --only 'rmsnorm*'   (a subset)
# RUNS (default 3) sets the runs per mode; the medians are compared.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kiln="${1:-$root/build/kiln}"
out="${2:-/tmp/kiln-bench}"
shift $(( $# > 2 ? 2 : $# ))
runs="${RUNS:-3}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1700000000}"

rm -rf "$out" "$out".*
mkdir -p "$out"
echo "kiln build: $("$kiln" --version | head -1), $(nproc) cores, $(awk '/MemAvailable/ {printf "%.1f GiB available", $2/1048576}' /proc/meminfo)"
echo "targets: $(grep -v '^#' "$root/ci/targets.txt" | tr -d '\n')"

# CPU time (user+sys of kiln, ninja and every nvcc, ptxas and fatbinary: /usr/bin/time counts
# the whole waited-for process tree) is reported beside wall time: on a shared machine the wall
# time says more about the neighbours than about kiln. The load average is printed per run.
one() {  # one MODE RUN: a full build into a fresh directory
  local mode=$1 i=$2 dir="$out/$1.$2" extra=()
  shift 2
  [ "$mode" = per-spec ] && extra=(--one-nvcc-per-specialisation)
  rm -rf "$dir"
  local load t0 t1
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$dir.cpu" "$kiln" build --source "$root" --out "$dir" --json \
    "${extra[@]}" "$@" >"$dir.json" 2>"$dir.log" || { cat "$dir.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t0 $t1 $load" >"$dir.wall"
}
for ((i = 1; i <= runs; i++)); do
  one grouped "$i" "$@"
  one per-spec "$i" "$@"
done
cpu() { /usr/bin/time -f "%U %S" -o "$1" "${@:2}"; }
t1=$(date +%s.%N)
cpu "$out/noop.cpu" "$kiln" build --source "$root" --out "$out/grouped.1" --json "$@" >"$out/noop.json" 2>"$out/noop.log"
t2=$(date +%s.%N)
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$runs" "$t1" "$t2" <<'PY'
import json, statistics, subprocess, sys
out, runs, t1, t2 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
cpu = lambda f: sum(map(float, open(f).read().split()[-2:]))
res = {}
for mode in ("grouped", "per-spec"):
    rows = []
    for i in range(1, runs + 1):
        d = f"{out}/{mode}.{i}"
        j = json.load(open(d + ".json"))
        w0, w1, load = map(float, open(d + ".wall").read().split())
        rows.append((cpu(d + ".cpu"), w1 - w0, load, j))
    res[mode] = rows
    c = statistics.median(r[0] for r in rows)
    w = statistics.median(r[1] for r in rows)
    j = rows[0][3]
    print(f"{mode:>9}: {j['compiled']} of {j['total']} artifacts, {j.get('passes', 0)} front-end passes, "
          f"{j['jobs']} jobs; CPU median {c:.1f} s ({', '.join(f'{r[0]:.1f}' for r in rows)}), "
          f"wall median {w:.1f} s; load average at each start: {', '.join(f'{r[2]:.2f}' for r in rows)}")
g = statistics.median(r[0] for r in res["grouped"])
p = statistics.median(r[0] for r in res["per-spec"])
print(f"grouped / per-spec CPU: {g / p:.2f} (goal <= 0.33)")
same = len({json.dumps([(a['target'], a['sha256']) for a in r[3]['archives']]) for r in res["grouped"]}) == 1
print(f"grouped runs give byte-identical archives: {'yes' if same else 'NO'}")
noop = json.load(open(out + "/noop.json"))
print(f"no-op rebuild (grouped): {noop['compiled']} compiled, {t2 - t1:.2f} s, CPU {cpu(out + '/noop.cpu'):.2f} s")
full = res["grouped"][0][3]
print(f"{'target':<12}{'artifacts':>10}{'tar.zst':>12}{'tar (no zstd)':>15}{'ratio':>8}")
tz = tt = 0
for a in full["archives"]:
    raw = len(subprocess.run(["zstd", "-dc", a["path"]], check=True, capture_output=True).stdout)
    tz += a["size"]; tt += raw
    print(f"{a['target']:<12}{a['artifacts']:>10}{a['size']:>12}{raw:>15}{raw / a['size']:>8.1f}")
print(f"{'total':<12}{'':>10}{tz:>12}{tt:>15}{tt / tz:>8.1f}")
PY
