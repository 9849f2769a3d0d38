#!/usr/bin/env bash
# Benchmark of `kiln build` (not a test): full build of the whole registry for the default
# targets (ci/targets.txt) into a fresh directory, a no-op rebuild, and archive sizes with and
# without the outer zstd. Usage: scripts/bench_build.sh [KILN_BINARY] [OUT_DIR] [extra kiln build args...]
# e.g. scripts/bench_build.sh build/kiln /tmp/kiln-bench --only 'rmsnorm*'   (a subset)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
kiln="${1:-$root/build/kiln}"
out="${2:-/tmp/kiln-bench}"
shift $(( $# > 2 ? 2 : $# ))
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-1700000000}"

rm -rf "$out"
echo "kiln build: $("$kiln" --version | head -1), $(nproc) cores, $(awk '/MemAvailable/ {printf "%.1f GiB available", $2/1048576}' /proc/meminfo)"
echo "targets: $(grep -v '^#' "$root/ci/targets.txt" | tr -d '\n')"

# CPU time (user+sys of kiln, ninja and every nvcc) is reported beside wall time: on a shared
# machine the wall time says more about the neighbours than about kiln.
cpu() { /usr/bin/time -f "%U %S" -o "$1" "${@:2}"; }
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
cpu "$out.full.cpu" "$kiln" build --source "$root" --out "$out" --json "$@" >"$out.full.json" 2>"$out.full.log"
t1=$(date +%s.%N)
cpu "$out.noop.cpu" "$kiln" build --source "$root" --out "$out" --json "$@" >"$out.noop.json" 2>"$out.noop.log"
t2=$(date +%s.%N)
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" "$t0" "$t1" "$t2" <<'PY'
import json, subprocess, sys
out, t0, t1, t2 = sys.argv[1], *map(float, sys.argv[2:])
full = json.load(open(out + ".full.json"))
cpu = lambda f: sum(map(float, open(f).read().split()[-2:]))
noop = json.load(open(out + ".noop.json"))
print(f"full build: {full['compiled']} of {full['total']} artifacts compiled in {t1 - t0:.1f} s "
      f"({full['jobs']} jobs), CPU {cpu(out + '.full.cpu'):.1f} s")
print(f"no-op rebuild: {noop['compiled']} compiled, {t2 - t1:.2f} s, CPU {cpu(out + '.noop.cpu'):.2f} s")
print(f"{'target':<12}{'artifacts':>10}{'tar.zst':>12}{'tar (no zstd)':>15}{'ratio':>8}")
tz = tt = 0
for a in full["archives"]:
    raw = len(subprocess.run(["zstd", "-dc", a["path"]], check=True, capture_output=True).stdout)
    tz += a["size"]; tt += raw
    print(f"{a['target']:<12}{a['artifacts']:>10}{a['size']:>12}{raw:>15}{raw / a['size']:>8.1f}")
print(f"{'total':<12}{'':>10}{tz:>12}{tt:>15}{tt / tz:>8.1f}")
PY
