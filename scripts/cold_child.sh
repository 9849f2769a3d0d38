#!/usr/bin/env bash
# Runs one kiln child of `kiln_cold_start --no-gpu` (a fresh process's kiln_loader_create +
# kiln_get + kiln_launch over the stand-in libcuda.so.1, bench/stand_in_libcuda.c) under a tool,
# so that what the first load of a process does can be counted where the code is written:
#
#   scripts/cold_child.sh BUILD_DIR STORE [TOOL ARGS...]
#
# BUILD_DIR: a build with -DKILN_BUILD_BENCH=ON; STORE: a store with an sm_90a (or sm_90)
# archive holding axpy_dtype_f32 (scripts/bench_cold.sh prepare makes one in .carry/cold/store).
# Examples (docs/performance.md, "The cold path, second pass"):
#   scripts/cold_child.sh build .carry/cold/store valgrind --tool=callgrind \
#       --toggle-collect='kiln::ManifestEntries::read*'          # instructions of one phase
#   scripts/cold_child.sh build .carry/cold/store perf record -e page-faults -c 1 -d -o pf.data
#                                                                # every page fault, with address
# Without a tool the child just runs and prints its phases (ns).
# Its cache directory is a new empty one, so it lists the store and checks the manifest whole as
# the first process after an install does; COLD_CACHE=DIR gives it DIR instead, where an earlier
# child has kept the store's scan record (core/store/scan_record.hpp), as every later process has.
set -euo pipefail
build=$(cd "${1:?usage: cold_child.sh BUILD_DIR STORE [TOOL ARGS...]}" && pwd)
store=$(cd "${2:?usage: cold_child.sh BUILD_DIR STORE [TOOL ARGS...]}" && pwd)
shift 2
art=$(ls "$store"/*-sm_90a/axpy_dtype_f32.fatbin "$store"/*-sm_90/axpy_dtype_f32.fatbin 2>/dev/null |
  head -1 || true)
[ -n "$art" ] || { echo "cold_child.sh: no sm_90a or sm_90 archive with axpy_dtype_f32 in $store" >&2; exit 4; }
sha=$(sha256sum "$art" | cut -d' ' -f1)
if [ -n "${COLD_CACHE:-}" ]; then
  cache=$COLD_CACHE
else
  cache=$(mktemp -d)
  trap 'rm -rf "$cache"' EXIT
fi
LD_LIBRARY_PATH="$build/bench/stand-in" KILN_STAND_IN_CC=90 "$@" \
  "$build/bench/kiln_cold_start" --child kiln --t0 0 --libkiln "$build/libkiln.so" \
  --store "$store" --cache "$cache" --uri axpy_dtype_f32 --artifact "$art" --sha256 "$sha" \
  --symbol unused --no-gpu
