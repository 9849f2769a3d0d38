#!/usr/bin/env bash
# Further gets in fresh processes, state by state (docs/performance.md, "Further gets in every
# process"): a fresh process's first get and each further get of a new URI, over many processes
# per state, with the spread and the slowest process, so that a state in which some processes
# are slow cannot hide behind a median.
#
#   scripts/bench_gets.sh prepare BUILD_DIR [CARRY]   here: packages, releases, binaries
#   scripts/bench_gets.sh run [CARRY] [WORK]          here or on the GPU machine
#
# prepare: for each size of SIZES (default "1000 20000"), a kernel project of one family of N
#   specialisations of one small kernel (scale.cu below, compiled once with nvcc for sm_90a), its
#   package library (the C source `kiln package-source` writes, compiled as kiln_add_kernel_package
#   does) and its release for 7 targets (kiln_scale_bench pack: kiln build's planning and packing,
#   every artifact that one fatbin) into CARRY/<N>/ (default CARRY: .carry/gets, git-ignored; the
#   releases are zstd archives of a few hundred KiB, the 20,000 library 8 MiB). A size whose
#   release is there already is kept (FRESH=1 makes it again). Then kiln, kiln_scale_bench and the
#   stand-in libcuda (bench/stand_in_libcuda.c) into CARRY/bin, and the shared libraries they need
#   that a bare machine may lack into CARRY/lib.tgz. BASELINE_BIN=FILE: a kiln_scale_bench built
#   at the commit to compare against (one that has `get --shift`), carried as the baseline.
# run: for each size, installs the release (kiln install INDEX) into WORK/<N>/share/kiln/artifacts,
#   the package library in WORK/<N>/lib (a store installed beside its library), waits until the
#   store is settled (3.5 s unchanged: the scan record's rule, core/store/scan_record.hpp), then
#   runs PROCS (default 24) fresh processes in each state, each `kiln_scale_bench get`: a Loader,
#   a get of one known URI, then NEXT (default 40) gets of URIs no earlier process of the run
#   asked (--shift), through the stand-in libcuda (KILN_SCALE_DRIVER=real: the real one):
#     no record           a new cache directory per process (the first get writes the record);
#     with record         one cache directory whose scan record two earlier processes, 4 s
#                         apart, wrote (issue 41's sequence);
#     installed, env      the store found beside the package library (dladdr), the config from
#                         KILN_OFFLINE=1 KILN_DISABLE_JIT=1 KILN_CACHE_DIR (a cache with a record);
#     page cache cold     as "with record", with the page cache of the served archive's files
#                         dropped before each process (posix_fadvise DONTNEED, these files only):
#                         what a process pays once memory pressure has evicted them. It reads a
#                         disk, so it is reported beside the goal, not held to it (its files are
#                         read back afterwards, so the next state starts with them cached);
#     store just changed  as "with record", the store directory and its manifests touched before
#                         each process (the record is for another identity, nothing may be
#                         remembered by identity; last, as it unsettles the store).
#   STATES (default all five, by the words before the comma: "no with installed cold changed")
#   picks some. Prints one table per size: the first get (median [min-max]); further gets: the
#   median of the per-process medians with their min-max, the slowest process's median, the 90th
#   percentile and the largest of all further gets, the processes whose median is above 50 us, and
#   the processes that read a disk during their further gets (getrusage's ru_inblock). Beside each
#   state: the load average before and after, and the page-cache drops (drop_pagecache) and pages
#   reclaimed (pgsteal_*) the kernel counted meanwhile (/proc/vmstat). Results: WORK/results.md,
#   WORK/gets.jsonl (every process), WORK/machine.txt; copied into $OUT when it is set.
#
# Exit status: the first command that failed, else 0 (a figure above its goal is reported, not an
# error).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sizes=${SIZES:-"1000 20000"}
targets=sm_80,sm_86,sm_89,sm_90,sm_90a,sm_100,sm_120
symbol=scale_bench_package

prepare() {
  local build carry
  build=$(realpath "${1:?usage: bench_gets.sh prepare BUILD_DIR [CARRY]}")
  carry=$(realpath -m "${2:-.carry/gets}")
  local kiln=$build/kiln bench=$build/bench/kiln_scale_bench
  local nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
  for f in "$kiln" "$bench" "$build/bench/stand-in/libcuda.so.1"; do
    [ -e "$f" ] || { echo "bench_gets: $f is missing (-DKILN_BUILD_BENCH=ON)" >&2; exit 2; }
  done
  mkdir -p "$carry/bin/stand-in"
  local src=$carry/src
  mkdir -p "$src"
  cat >"$src/scale.cu" <<'EOF'
extern "C" __global__ void scale_kernel(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
EOF
  if [ ! -s "$src/scale.fatbin" ]; then
    [ -e "$nvcc" ] || { echo "bench_gets: $nvcc is missing" >&2; exit 2; }
    "$nvcc" -fatbin -gencode arch=compute_90a,code=sm_90a -o "$src/scale.fatbin" "$src/scale.cu"
  fi
  export SOURCE_DATE_EPOCH=1700000000
  local n
  for n in $sizes; do
    local d=$carry/$n p=$src/p$n
    if [ -z "${FRESH:-}" ] && [ -s "$d/lib/libscale.so" ] && ls "$d"/dist/*-index.json >/dev/null 2>&1; then
      echo "bench_gets: $d kept (FRESH=1 makes it again)"
      continue
    fi
    rm -rf "$d" "$p"
    mkdir -p "$d/lib" "$p/registry" "$p/kernels"
    echo 1.0.0 >"$p/VERSION"
    printf '{\n  "format": 1,\n  "name": "scale-bench"\n}\n' >"$p/registry/package.json"
    cp "$src/scale.cu" "$p/kernels/scale.cu"
    python3 - "$n" >"$p/registry/kernels.json" <<'EOF'
import json, sys
n = int(sys.argv[1])
print(json.dumps({"format": 1, "types": {}, "families": [{
    "name": "scale", "sources": ["scale.cu"], "entries": ["scale_kernel<{i}>"],
    "params": [{"name": "i", "kind": "int", "values": list(range(n))}],
    "targets": ["sm_80+"], "flags": []}]}, indent=2))
EOF
    "$kiln" package-source --source "$p" --symbol "$symbol" --output "$src/pkg$n.c" >/dev/null
    cc -O2 -shared -fPIC -I"$here/../include" -o "$d/lib/libscale.so" "$src/pkg$n.c"
    rm -f "$src/pkg$n.c"
    echo "bench_gets: packing $n specialisations for $targets"
    "$bench" pack --project "$p" --fatbin "$src/scale.fatbin" --targets "$targets" --dist "$d/dist"
  done
  cp "$kiln" "$bench" "$carry/bin/"
  rm -f "$carry/bin/kiln_scale_bench.baseline"
  [ -z "${BASELINE_BIN:-}" ] || cp "$BASELINE_BIN" "$carry/bin/kiln_scale_bench.baseline"
  cp "$build/bench/stand-in/libcuda.so.1" "$carry/bin/stand-in/"
  strip --strip-debug "$carry"/bin/kiln*
  # The shared libraries a bare machine may lack (as scripts/gpu_run.sh carries them): what ldd
  # lists and what kiln dlopens on first use, not glibc, libstdc++, libgcc or libcuda.
  source "$here/lazy_libs.sh"
  local lazy
  lazy=$(lazy_libs "$kiln")
  rm -rf "$carry/lib" && mkdir -p "$carry/lib"
  { ldd "$carry"/bin/kiln "$carry"/bin/kiln_scale_bench $lazy | awk '/=> \// {print $3}'
    for l in $lazy; do echo "$l"; done; } | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda)\.so' |
    while read -r lib; do cp -L "$lib" "$carry/lib/"; done
  tar -czf "$carry/lib.tgz" -C "$carry" lib && rm -rf "$carry/lib"
  rm -rf "$src"/p*
  du -sh "$carry"
  ls -l "$carry"/bin "$carry"/lib.tgz
}

# vmstat: "drop_pagecache pgsteal" now.
vmstat_now() {
  awk '$1 == "drop_pagecache" {d = $2} $1 ~ /^pgsteal_(kswapd|direct)$/ {s += $2}
       END {printf "%d %d\n", d, s}' /proc/vmstat
}

run() {
  local carry work
  carry=$(realpath "${1:-.carry/gets}")
  work=$(realpath -m "${2:-$(mktemp -d /tmp/kiln-gets.XXXXXX)}")
  local procs=${PROCS:-24} next=${NEXT:-40}
  local states=${STATES:-"no with installed cold changed"}
  local kiln=$carry/bin/kiln bench=$carry/bin/kiln_scale_bench
  local drv=$carry/bin/stand-in
  [ "${KILN_SCALE_DRIVER:-stand-in}" = real ] && drv=/nonexistent-stand-in
  [ -x "$kiln" ] && [ -x "$bench" ] || { echo "bench_gets: no binaries in $carry/bin (prepare)" >&2; exit 2; }
  if [ -f "$carry/lib.tgz" ]; then
    mkdir -p "$work/carried" && tar -xzf "$carry/lib.tgz" -C "$work/carried"
    export LD_LIBRARY_PATH="$work/carried/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  mkdir -p "$work"
  local jsonl=$work/gets.jsonl
  : >"$jsonl"
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    uname -r
    echo "cpus $(nproc)"
    uptime
    "$kiln" --version | head -1
    echo "driver: ${KILN_SCALE_DRIVER:-stand-in}; PROCS=$procs NEXT=$next SIZES=$sizes"
  } | tee "$work/machine.txt"
  local shift_no=0 shift=0

  # The loader measured, and the baseline's (prepare with BASELINE_BUILD) when carried: each
  # state then runs both, process by process, alternating which goes first.
  local variants=("$bench")
  [ -x "$bench.baseline" ] && variants+=("$bench.baseline")

  # one BIN SIZE STATE CACHE [ARGS...]: one fresh process of BIN asking the URIs at `shift`; its
  # numbers appended to gets.jsonl (STATE "-...": not recorded; "installed..." and "-installed"
  # find the store beside the library, with the config from the environment).
  one() {
    local bin=$1 n=$2 state=$3 cache=$4
    shift 4
    local out label=$state
    [ "$bin" = "$bench" ] || label="$state, baseline"
    if [ "${state#installed}" != "$state" ] || [ "$state" = -installed ]; then
      out=$(KILN_OFFLINE=1 KILN_DISABLE_JIT=1 KILN_CACHE_DIR="$cache" \
        LD_LIBRARY_PATH="$drv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" get --library "$lib" --symbol "$symbol" \
        --store installed --first "$first" --next "$next" --shift "$shift" "$@")
    else
      out=$(LD_LIBRARY_PATH="$drv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bin" get --library "$lib" \
        --symbol "$symbol" --store "$store" --cache "$cache" --first "$first" --next "$next" \
        --shift "$shift" "$@")
    fi
    [ "${state#-}" != "$state" ] || printf '{"size": %s, "state": "%s", "get": %s}\n' "$n" "$label" "$out" >>"$jsonl"
  }
  # state SIZE STATE BEFORE CACHE_CMD [ARGS...]: PROCS processes (of each variant); BEFORE runs
  # before each, CACHE_CMD prints each one's cache directory. Each process asks NEXT URIs no
  # earlier one of the run asked (the variants of one round the same ones).
  state() {
    local n=$1 name=$2 before=$3 cache_cmd=$4 i v0 v1 l0 k bin
    shift 4
    l0=$(cut -d' ' -f1-3 /proc/loadavg)
    v0=$(vmstat_now)
    for ((i = 0; i < procs; i++)); do
      for ((k = 0; k < ${#variants[@]}; k++)); do
        bin=${variants[$(((i + k) % ${#variants[@]}))]}
        eval "$before"
        one "$bin" "$n" "$name" "$(eval "$cache_cmd")" "$@"
      done
      shift_no=$((shift_no + next))
      shift=$shift_no
    done
    v1=$(vmstat_now)
    printf '{"size": %s, "state": "%s", "load_before": "%s", "load_after": "%s", "vmstat_before": "%s", "vmstat_after": "%s"}\n' \
      "$n" "$name" "$l0" "$(cut -d' ' -f1-3 /proc/loadavg)" "$v0" "$v1" >>"$jsonl"
    echo "bench_gets: $n, $name: $procs processes (load $(cut -d' ' -f1 /proc/loadavg))"
  }
  settle() {
    local newest now
    newest=$(find "$1" -printf '%T@\n%C@\n' | sort -n | tail -1)
    now=$(date +%s.%N)
    python3 -c "import time; time.sleep(max(0, 3.5 - ($now - $newest)))"
  }
  local n
  for n in $sizes; do
    local d=$work/$n
    local lib=$d/lib/libscale.so store=$d/share/kiln/artifacts first=scale_i_$((n / 2))
    rm -rf "$d" && mkdir -p "$d/lib" "$d/caches"
    cp "$carry/$n/lib/libscale.so" "$lib"
    echo "bench_gets: installing $n specialisations x 7 targets"
    # From the work directory: no kernel project there for kiln to take the package from.
    (cd "$work" && "$kiln" install "$carry/$n"/dist/*-index.json --dest "$store" >/dev/null 2>&1)
    local served
    served=$(ls -d "$store"/*-sm_90a)
    settle "$store"
    case " $states " in *" no "*)
      state "$n" "no record" : "mktemp -d '$d/caches/new.XXXXXX'" ;; esac
    # The records: a process, and another 4 s later (the second reads what the first wrote);
    # they ask the first URI alone.
    local next_kept=$next
    next=0
    one "$bench" "$n" - "$d/caches/kept"
    one "$bench" "$n" -installed "$d/caches/installed" # the store beside the library: its own
    sleep 4
    one "$bench" "$n" - "$d/caches/kept"
    next=$next_kept
    case " $states " in *" with "*)
      state "$n" "with record" : "echo '$d/caches/kept'" ;; esac
    case " $states " in *" installed "*)
      state "$n" "installed, env" : "echo '$d/caches/installed'" ;; esac
    case " $states " in *" cold "*)
      state "$n" "page cache cold" : "echo '$d/caches/kept'" --evict "$served"
      # Read back, so that the next state does not meet what the last eviction left out.
      find "$served" -type f -exec cat {} + >/dev/null ;; esac
    case " $states " in *" changed "*)
      state "$n" "store just changed" "touch '$store' '$store'/*/manifest.json" \
        "echo '$d/caches/kept'" ;; esac
  done
  uptime | tee -a "$work/machine.txt"

  python3 - "$jsonl" "$work/results.md" <<'EOF'
import json, statistics, sys
procs, states = {}, {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["size"], r["state"])
    if "get" in r:
        procs.setdefault(key, []).append(r["get"])
    else:
        states[key] = r

def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]

out = []
for size in sorted({k[0] for k in procs}):
    out += [f"### {size:,} specialisations", "",
            "| state | processes | first get, us: median [min-max] | further gets, us: median of "
            "the per-process medians [min-max] | slowest process (its median) | all further gets: "
            "p90, max | processes above 50 us | processes that read a disk | load before, after "
            "| page-cache drops, pages reclaimed meanwhile |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for key in [k for k in procs if k[0] == size]:
        ps = procs[key]
        firsts = [p["first_us"] for p in ps]
        meds = [statistics.median(p["next_us"]) for p in ps if p["next_us"]]
        every = [v for p in ps for v in p["next_us"]]
        disk = sum(1 for p in ps if p.get("next_inblock", 0) > 0)
        st = states.get(key, {})
        vb = [int(x) for x in st.get("vmstat_before", "0 0").split()]
        va = [int(x) for x in st.get("vmstat_after", "0 0").split()]
        out.append(
            f"| {key[1]} | {len(ps)} | {statistics.median(firsts):.0f} [{min(firsts):.0f}-{max(firsts):.0f}] "
            f"| {statistics.median(meds):.1f} [{min(meds):.1f}-{max(meds):.1f}] | {max(meds):.1f} "
            f"| {pct(every, 0.9):.1f}, {max(every):.0f} | {sum(1 for m in meds if m > 50)} "
            f"| {disk} | {st.get('load_before', '-')}; {st.get('load_after', '-')} "
            f"| {va[0] - vb[0]}, {va[1] - vb[1]} |")
    out.append("")
open(sys.argv[2], "w").write("\n".join(out))
print("\n".join(out))
EOF
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT" && cp "$work/results.md" "$jsonl" "$work/machine.txt" "$OUT/"
  fi
  echo "bench_gets: results in $work/results.md"
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: scripts/bench_gets.sh prepare BUILD_DIR [CARRY] | run [CARRY] [WORK]" >&2; exit 2 ;;
esac
