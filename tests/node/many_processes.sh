#!/usr/bin/env bash
# A node's worth of processes (issue 26, item 4): PROCS processes (default 64) of THREADS threads
# (default 8) start at once on one empty cache directory and get every URI of a release from a
# loopback mirror, first with the index pinned by its digest, then, on a new empty cache, through
# the TUF repository of the same mirror (ci/tuf_repo.sh, throwaway keys). Each process is
# kiln_node_process (tests/node/node_process.cpp), which checks that every image its driver was
# handed is the store's artifact. Passes when every process exits 0, the server was asked for
# each archive at most once and for at least one, and every process loaded every URI.
#
#   tests/node/many_processes.sh KILN NODE_PROCESS MIRROR_DIR [WORK_DIR]
#
# KILN: the kiln CLI (makes the TUF repository). NODE_PROCESS: kiln_node_process. MIRROR_DIR: a
# staged release mirror (`kiln mirror stage`; ci/release.sh's release/mirror): its index
# (<package>-<version>-index.json) and archives; one package. WORK_DIR (default: a new temp
# directory) receives the caches, the TUF repository, the server logs and summary.json.
# The driver is whatever libcuda.so.1 the dynamic loader finds: on a machine without a GPU put
# <build>/bench/stand-in first on LD_LIBRARY_PATH (bench/stand_in_libcuda.c; KILN_STAND_IN_CC=90);
# on a GPU machine leave it off and the real driver loads the real images.
# URIS="a b ..." limits the URIs (default: every kernel of the reference package).
# Prints one line per mode ("pinned: 64 processes x 8 threads: 3.1 s, 1 archive download(s),
# 64 index GET(s), 0 failed process(es)") and exits 1 on any failure.
set -euo pipefail
kiln=$(realpath "${1:?usage: many_processes.sh KILN NODE_PROCESS MIRROR_DIR [WORK_DIR]}")
node=$(realpath "${2:?usage: many_processes.sh KILN NODE_PROCESS MIRROR_DIR [WORK_DIR]}")
mirror=$(realpath "${3:?usage: many_processes.sh KILN NODE_PROCESS MIRROR_DIR [WORK_DIR]}")
work=${4:-$(mktemp -d)}
mkdir -p "$work"
work=$(realpath "$work")
procs=${PROCS:-64}
threads=${THREADS:-8}
src=$(cd "$(dirname "$0")/../.." && pwd)
uri_args=()
for u in ${URIS:-}; do uri_args+=(--uri "$u"); done

shopt -s nullglob
indexes=("$mirror"/*-index.json)
shopt -u nullglob
((${#indexes[@]} == 1)) || { echo "many_processes: expected one *-index.json in $mirror" >&2; exit 2; }
index=${indexes[0]}
index_sha=$(sha256sum "$index" | cut -d' ' -f1)

server_pid=
stop_server() { [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; server_pid=; }
trap stop_server EXIT
# serve DIR NAME: starts the counting loopback server on DIR; sets $url.
serve() {
  rm -f "$work/$2.port"
  python3 "$src/tests/misbehaving_server/server.py" --root "$1" --port 0 \
    --port-file "$work/$2.port" --count-file "$work/$2.count" --mode ok >"$work/$2.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 500); do [ -s "$work/$2.port" ] && break; sleep 0.01; done
  [ -s "$work/$2.port" ] || { echo "many_processes: the server did not start" >&2; exit 2; }
  url="http://127.0.0.1:$(cat "$work/$2.port")"
}

failed=0
summary=()
# run MODE TRUST_ARGS...: PROCS processes at once on a new empty cache; checks and reports.
run() {
  local mode=$1 cache="$work/$1-cache" out="$work/$1-out"
  shift
  rm -rf "$cache" "$out"
  mkdir -p "$cache" "$out"
  local t0 pids=() bad=0
  t0=$(date +%s%N)
  for i in $(seq "$procs"); do
    "$node" --cache "$cache" --mirror "$url" --threads "$threads" "$@" "${uri_args[@]}" \
      >"$out/$i.json" 2>"$out/$i.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || bad=$((bad + 1)); done
  local wall ns
  ns=$(($(date +%s%N) - t0))
  wall=$(printf '%d.%02d' $((ns / 1000000000)) $((ns % 1000000000 / 10000000)))
  stop_server
  # Downloads per archive, as the server counted them (TUF: targets/<sha256>.<file>).
  local report
  report=$(python3 - "$work/$mode.count" "$out" "$procs" <<'PY'
import glob, json, sys
counts = json.load(open(sys.argv[1]))["paths"]
archives = {p: n for p, n in counts.items() if p.endswith(".tar.zst")}
index = sum(n for p, n in counts.items() if p.endswith("-index.json"))
lines = [json.loads(open(f).read().strip() or "{}") for f in glob.glob(sys.argv[2] + "/*.json")]
errors = sum(l.get("errors", 1) for l in lines)
mism = sum(l.get("mismatches", 1) for l in lines)
gets = sum(l.get("gets", 0) for l in lines)
first = next((l["first_error"] for l in lines if l.get("first_error")), "")
ok = len(lines) == int(sys.argv[3]) and errors == 0 and mism == 0 and archives and \
    all(n == 1 for n in archives.values())
print(json.dumps({"ok": bool(ok), "archive_downloads": archives, "index_gets": index,
                  "gets": gets, "errors": errors, "mismatches": mism, "first_error": first}))
PY
  )
  echo "$report" >"$work/$mode.summary.json"
  local line
  line=$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%d archive download(s) %s, %d index GET(s), %d gets, %d error(s), %d mismatch(es)%s" % (sum(r["archive_downloads"].values()), sorted(r["archive_downloads"].values()), r["index_gets"], r["gets"], r["errors"], r["mismatches"], ("; first: " + r["first_error"]) if r["first_error"] else ""))' "$report")
  summary+=("$mode: $procs processes x $threads threads: ${wall} s, $line, $bad failed process(es)")
  echo "${summary[-1]}"
  if ((bad)) || ! python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["ok"] else 1)' "$report"; then
    failed=1
    for f in "$out"/*.err; do [ -s "$f" ] && { echo "--- $f" >&2; head -5 "$f" >&2; break; }; done
  fi
}

serve "$mirror" pinned
run pinned --index-sha256 "$index_sha"

rm -rf "$work/tuf" "$work/keys"
mkdir -p "$work/keys"
bash "$src/ci/tuf_repo.sh" "$kiln" "$mirror" "$work/tuf" "$work/keys"
serve "$work/tuf" tuf
run tuf --tuf-root "$work/tuf/metadata/1.root.json"

printf '%s\n' "${summary[@]}" >"$work/summary.txt"
exit "$failed"
