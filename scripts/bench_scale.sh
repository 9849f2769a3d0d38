#!/usr/bin/env bash
# The scaling benchmark (docs/performance.md, "Package size"): what kiln costs for a package of
# 10, 1,000 and 20,000 specialisations of one small kernel.
#
#   scripts/bench_scale.sh BUILD_DIR [WORK_DIR]
#
# BUILD_DIR needs kiln, bench/kiln_scale_bench and bench/stand-in (-DKILN_BUILD_BENCH=ON, the
# default). WORK_DIR (default /tmp/kiln-scale) receives the packages, stores and logs; the
# results go to WORK_DIR/results.md (one markdown table) and WORK_DIR/results.jsonl.
#
# How the packages are made: one kernel (scale.cu below) is compiled once with nvcc for sm_90a;
# a project whose registry has one family of N specialisations (parameter i = 0..N-1) is
# generated, and kiln_scale_bench pack plans and packs it through kiln build's own functions
# (plan_build, archive_content, publish_release) for 7 targets, every artifact being that one
# fatbin: nvcc is not run N x 7 times, so "pack" is kiln build after its compiles. The package
# library (the C source `kiln package-source` generates, compiled as kiln_add_kernel_package
# does) and the description file come from the same project, so the loader's source hashes are
# the manifests'.
#
# What is measured (medians of RUNS, default 7, with min and max):
#   - kiln install (the 7 archives into a new store), kiln verify of the store and of the index,
#     kiln mirror verify, kiln compat --device sm_90 of the index, and the pack step, each with
#     its wall time and peak RSS (/usr/bin/time); and sha256sum over the store's files, the
#     baseline of kiln verify;
#   - the gets, by scripts/bench_gets.sh run over the releases made here (WORK_DIR/gets): a
#     fresh process's first get and its further gets of new URIs, PROCS (default 24) processes
#     per state (no scan record, with it, the store beside its library, page cache cold, store
#     just changed), with the spread and the slowest process (that script's header says it
#     all); its table is appended to results.md.
# KILN_SCALE_DRIVER=real leaves the stand-in off LD_LIBRARY_PATH (on a GPU machine: the real
# libcuda loads the fatbin). SIZES (default "10 1000 20000") and RUNS may be set; SLOW_RUNS
# (default RUNS) is used for the CLI commands of the largest size. ONLY=gets measures the gets
# alone, over the releases an earlier run left in WORK_DIR.
#
# Exit status: the first command that failed, else 0 (a figure above its goal is reported, not
# an error).
set -euo pipefail
build=$(realpath "${1:?usage: scripts/bench_scale.sh BUILD_DIR [WORK_DIR]}")
work=$(realpath -m "${2:-/tmp/kiln-scale}")
sizes=${SIZES:-"10 1000 20000"}
runs=${RUNS:-7}
slow_runs=${SLOW_RUNS:-$runs}
targets=sm_80,sm_86,sm_89,sm_90,sm_90a,sm_100,sm_120
kiln=$build/kiln
bench=$build/bench/kiln_scale_bench
nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
kiln_include=$(realpath "$(dirname "$0")/../include")
for f in "$kiln" "$bench"; do
  [ "${ONLY:-}" = build ] && [ "$f" = "$bench" ] && continue
  [ -e "$f" ] || { echo "bench_scale: $f is missing" >&2; exit 2; }
done
mkdir -p "$work"
# nvcc only to make the one fatbin: a GPU machine measuring ONLY=gets over stores made here
# needs none.
[ -s "$work/scale.fatbin" ] || [ -e "$nvcc" ] || { echo "bench_scale: $nvcc is missing" >&2; exit 2; }
results=$work/results.jsonl
[ "${ONLY:-}" = gets ] || : >"$results"
# ONLY=build: the compile rate alone (below), no kiln_scale_bench needed
export SOURCE_DATE_EPOCH=1700000000

# stats: reads numbers, one per line; prints "median min max".
stats() {
  sort -g | awk '{v[NR] = $1} END {
    if (NR == 0) { print "- - -"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.6g %.6g %.6g\n", m, v[1], v[NR] }'
}

# record SIZE WHAT UNIT "median min max" [RSS "median min max"]
record() {
  local size=$1 what=$2 unit=$3 s=($4) r=(${5:-- - -})
  printf '{"size": %s, "what": "%s", "unit": "%s", "median": %s, "min": %s, "max": %s, "rss_kb": "%s"}\n' \
    "$size" "$what" "$unit" "${s[0]}" "${s[1]}" "${s[2]}" "${r[0]}" >>"$results"
  printf '%-8s %-34s %10s %-3s  [%s .. %s]  peak RSS %s KiB\n' "$size" "$what" "${s[0]}" "$unit" \
    "${s[1]}" "${s[2]}" "${r[0]}"
}

# timed SIZE WHAT N CMD...: runs CMD N times under /usr/bin/time; records wall seconds and peak
# RSS. BEFORE (a command) runs before each run, untimed.
timed() {
  local size=$1 what=$2 n=$3 i
  shift 3
  local walls=() rss=()
  for ((i = 0; i < n; i++)); do
    [ -n "${BEFORE:-}" ] && eval "$BEFORE"
    /usr/bin/time -f '%e %M' -o "$work/time.txt" "$@" >"$work/cmd.log" 2>&1 || {
      echo "bench_scale: failed: $*" >&2
      cat "$work/cmd.log" >&2
      exit 1
    }
    read -r w r <"$work/time.txt"
    walls+=("$w")
    rss+=("$r")
  done
  record "$size" "$what" s "$(printf '%s\n' "${walls[@]}" | stats)" \
    "$(printf '%s\n' "${rss[@]}" | stats)"
}

# The kernel, once.
cat >"$work/scale.cu" <<'EOF'
extern "C" __global__ void scale_kernel(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
EOF
[ -s "$work/scale.fatbin" ] ||
  "$nvcc" -fatbin -gencode arch=compute_90a,code=sm_90a -o "$work/scale.fatbin" "$work/scale.cu"

# project DIR N: a kernel project of one family of N specialisations.
project() {
  local dir=$1 n=$2
  mkdir -p "$dir/registry" "$dir/kernels"
  echo 1.0.0 >"$dir/VERSION"
  printf '{\n  "format": 1,\n  "name": "scale-bench"\n}\n' >"$dir/registry/package.json"
  cp "$work/scale.cu" "$dir/kernels/scale.cu"
  python3 - "$n" >"$dir/registry/kernels.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"format": 1, "types": {}, "families": [{
    "name": "scale", "sources": ["scale.cu"], "entries": ["scale_kernel<{i}>"],
    "params": [{"name": "i", "kind": "int", "values": list(range(n))}],
    "targets": ["sm_80+"], "flags": []}]}, indent=2))
EOF
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nproc
  uptime
  "$kiln" --version | head -1
  ls -l "$work/scale.fatbin"
} | tee "$work/machine.txt"

# cli SIZE: makes the package and measures the CLI commands (sets p, lib, store).
cli() {
  local n=$1 cr=$runs
  local dist=$work/dist$n mirror=$work/mirror$n desc=$work/scale-bench-1.0.0.package.json.$n
  rm -rf "$p" "$dist" "$store" "$mirror"
  project "$p" "$n"
  # The package library an application links (what kiln_add_kernel_package builds).
  "$kiln" package-source --source "$p" --symbol scale_bench_package --output "$work/pkg$n.c" \
    --description "$desc" >/dev/null
  cc -O2 -shared -fPIC -I"$kiln_include" -o "$lib" "$work/pkg$n.c"
  [ "$n" = "${sizes##* }" ] && cr=$slow_runs
  BEFORE="rm -rf '$dist'" timed "$n" "pack (plan, archives, index)" "$cr" \
    "$bench" pack --project "$p" --fatbin "$work/scale.fatbin" --targets "$targets" --dist "$dist"
  index=$dist/scale-bench-1.0.0-index.json
  BEFORE="rm -rf '$store'" timed "$n" "kiln install (7 archives)" "$cr" \
    "$kiln" install --source "$p" "$dist"/*.tar.zst --dest "$store"
  timed "$n" "kiln verify STORE" "$cr" "$kiln" verify --source "$p" "$store"
  timed "$n" "sha256sum of the store's files" "$cr" \
    sh -c "find '$store' -type f -print0 | xargs -0 sha256sum >/dev/null"
  timed "$n" "kiln verify INDEX" "$cr" "$kiln" verify --source "$p" "$index"
  "$kiln" mirror stage --source "$p" "$dist" --to "$mirror" >/dev/null
  timed "$n" "kiln mirror verify" "$cr" "$kiln" mirror verify --source "$p" "$mirror"
  timed "$n" "kiln compat --device sm_90 INDEX" "$cr" \
    "$kiln" compat --device sm_90 --source "$p" "$index"
}

# The compile rate (issue 37): `kiln build` of a project of N specialisations of one templated
# kernel (build_project below; nvcc really runs) for BUILD_TARGETS (default sm_90a), grouped
# (the default) and one nvcc per specialisation, BUILD_RUNS (default 1) times each, fresh --out
# every time. Recorded in specialisations per second of wall time and CPU seconds (user+sys of
# the whole process tree), with the load average at the start. BUILD_SIZES (default "1000";
# "" skips it); ONLY=build measures only this.
build_project() {
  local dir=$1 n=$2
  mkdir -p "$dir/registry" "$dir/kernels"
  echo 1.0.0 >"$dir/VERSION"
  printf '{\n  "format": 1,\n  "name": "scale-build-bench"\n}\n' >"$dir/registry/package.json"
  cat >"$dir/kernels/scale.cu" <<'CU'
template <int I>
__global__ void scale_kernel(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * a + static_cast<float>(I);
}
CU
  python3 - "$n" >"$dir/registry/kernels.json" <<'PY'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"format": 1, "types": {}, "families": [{
    "name": "scale", "sources": ["scale.cu"], "entries": ["scale_kernel<{i}>"],
    "params": [{"name": "i", "kind": "int", "values": list(range(n))}],
    "targets": ["sm_80+"], "flags": []}]}, indent=2))
PY
}
build_rate() {
  local n=$1 mode=$2 extra=() i load cpu rate rates=() cpus=()
  [ "$mode" = "one nvcc per spec" ] && extra=(--one-nvcc-per-specialisation)
  local targets=${BUILD_TARGETS:-sm_90a}
  local arts=$((n * $(echo "$targets" | tr ',' '\n' | wc -l)))
  for ((i = 0; i < ${BUILD_RUNS:-1}; i++)); do
    rm -rf "$work/build$n"
    load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f '%e %U %S' -o "$work/time.txt" "$kiln" build --source "$work/bp$n" \
      --out "$work/build$n" --targets "$targets" "${extra[@]}" >"$work/cmd.log" 2>&1 || {
      echo "bench_scale: kiln build failed" >&2
      tail -20 "$work/cmd.log" >&2
      exit 1
    }
    read -r w u s <"$work/time.txt"
    rates+=("$(awk -v a="$arts" -v w="$w" 'BEGIN {printf "%.2f", a / w}')")
    cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN {printf "%.1f", u + s}')")
    echo "  ($mode, $n x $targets, run ${#cpus[@]}: ${w} s wall, CPU ${cpus[-1]} s, load average $load at the start)"
  done
  record "$n" "kiln build, $mode" "spec/s" "$(printf '%s\n' "${rates[@]}" | stats)"
  record "$n" "kiln build CPU, $mode" "s" "$(printf '%s\n' "${cpus[@]}" | stats)"
}
if [ "${ONLY:-}" != gets ]; then
  for n in ${BUILD_SIZES-1000}; do
    build_project "$work/bp$n" "$n"
    build_rate "$n" grouped
    build_rate "$n" "one nvcc per spec"
  done
fi
[ "${ONLY:-}" = build ] && exit 0

for n in $sizes; do
  p=$work/p$n store=$work/store$n lib=$work/libscale$n.so
  [ "${ONLY:-}" = gets ] || cli "$n"
  # The release and the package library as scripts/bench_gets.sh prepare lays them out.
  mkdir -p "$work/gets/$n/lib"
  ln -sfn "$work/dist$n" "$work/gets/$n/dist"
  cp "$lib" "$work/gets/$n/lib/libscale.so"
done
mkdir -p "$work/gets/bin/stand-in"
ln -sf "$kiln" "$work/gets/bin/kiln"
ln -sf "$bench" "$work/gets/bin/kiln_scale_bench"
ln -sf "$build/bench/stand-in/libcuda.so.1" "$work/gets/bin/stand-in/libcuda.so.1"
rm -rf "$work/gets-run"
SIZES="$sizes" "$(dirname "$0")/bench_gets.sh" run "$work/gets" "$work/gets-run"

python3 - "$results" "$work/results.md" <<'EOF'
import json, sys
rows = list({(r["size"], r["what"]): r for r in map(json.loads, open(sys.argv[1]))}.values())
sizes = sorted({r["size"] for r in rows})
whats = list(dict.fromkeys(r["what"] for r in rows))
out = ["| measured | unit | " + " | ".join(f"{s:,} specs" for s in sizes) + " |",
       "|---|---|" + "---|" * len(sizes)]
for w in whats:
    cells, unit = [], ""
    for s in sizes:
        r = next((r for r in rows if r["size"] == s and r["what"] == w), None)
        if not r:
            cells.append("-")
            continue
        unit = r["unit"]
        rss = f", {int(float(r['rss_kb'])) // 1024} MiB" if r["rss_kb"] not in ("-", "") else ""
        cells.append(f"{r['median']:g} [{r['min']:g}-{r['max']:g}]{rss}")
    out.append(f"| {w} | {unit} | " + " | ".join(cells) + " |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
{ echo; cat "$work/gets-run/results.md"; } >>"$work/results.md"
