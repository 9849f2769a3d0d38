#!/usr/bin/env bash
# Regenerates loader/cold_path.order, the order in which libkiln's linker lays out the functions
# of a fresh process's first verified load (docs/decisions.md, "The cold path laid out together").
#
#   scripts/cold_path_order.sh BUILD_DIR STORE
#
# BUILD_DIR: a build with -DKILN_BUILD_BENCH=ON (kiln_cold_start and its stand-in libcuda);
# STORE: a store holding an archive for sm_90 (scripts/bench_cold.sh prepare makes one in
# .carry/cold/store, settled: written more than 3 s before). Runs the kiln child of
# kiln_cold_start --no-gpu twice under callgrind (scripts/cold_child.sh) with one cache
# directory: the first process after an install (lists the store, looks the URI up in the
# manifest, keeps the scan record) and a later one (uses the record); lists every libkiln
# function either executes (sorted by name). A name that no longer exists only loses its place;
# nothing breaks.
set -euo pipefail
build=${1:?usage: cold_path_order.sh BUILD_DIR STORE}
store=${2:?usage: cold_path_order.sh BUILD_DIR STORE}
command -v valgrind >/dev/null || { echo "cold_path_order.sh: needs valgrind" >&2; exit 5; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/cache"
for run in first later; do
  COLD_CACHE="$tmp/cache" "$(dirname "$0")/cold_child.sh" "$build" "$store" valgrind -q \
    --tool=callgrind --demangle=no --compress-strings=no --callgrind-out-file="$tmp/cg.$run" \
    >/dev/null
done
[ -n "$(ls "$tmp/cache/scan" 2>/dev/null)" ] ||
  { echo "cold_path_order.sh: the first child kept no scan record (is $store settled?)" >&2; exit 6; }
out="$(dirname "$0")/../loader/cold_path.order"
python3 - "$tmp/cg.first" "$tmp/cg.later" "$out" <<'PY'
import re, sys
srcs, out = sys.argv[1:-1], sys.argv[-1]
names, obj = [], None
for line in (l for src in srcs for l in open(src)):
    if line.startswith("ob="):
        obj = line[3:].strip()
    elif line.startswith("fn=") and obj and "libkiln.so" in obj:
        name = line[3:].strip().split("'")[0]  # callgrind marks recursion levels with '
        if name.startswith("0x") or not re.fullmatch(r"[A-Za-z0-9_.$]+", name):
            continue
        if name in ("_init", "_fini", "frame_dummy", "register_tm_clones",
                    "deregister_tm_clones", "__do_global_dtors_aux"):
            continue
        # Constructors and destructors: the C1/C2 (D0/D1/D2) variants share one section.
        pattern = re.sub(r"([CD])[0-2]([EI])", r"\1*\2", name)
        if pattern not in names:
            names.append(pattern)
if len(names) < 50:  # the first load runs ~190 of libkiln's functions: something went wrong
    sys.exit(f"cold_path_order.sh: only {len(names)} libkiln functions seen; {out} left as it was")
with open(out, "w") as f:
    # gold's --section-ordering-file: one input section (or pattern) per line, no comments.
    # Sorted: together is what counts, and a sorted list changes only where the path does.
    for n in sorted(names):
        f.write(f".text.{n}\n")
print(f"cold_path_order.sh: {len(names)} functions -> {out}")
PY
