#!/usr/bin/env bash
# Crash points (issue 26, item 1): runs each covered kiln command under tests/crash/kill_at_point.c
# and kills it with SIGKILL at its 1st, 2nd, ... Nth file-system change until it finishes, and
# after each kill asserts what a user relies on (docs/decisions.md, "Crash points"):
#   1. whatever the destination holds verifies (kiln verify, kiln mirror verify, a TUF client),
#   2. nothing outside the destination changed (names, sizes and SHA-256 of the whole world),
#   3. the same command run again succeeds, its destination verifies, and it ends as an
#      unkilled run ends (no leftover temporary file, no false rollback or freeze alarm).
#
# Usage: crash_points.sh KILN INJECTOR.so CRASH_GET WORK [CASE...]   (every case when none named)
#   KILN the CLI, INJECTOR.so tests/crash/kill_at_point.c built, CRASH_GET tests/crash/crash_get.cpp
#   built (kiln_crash_get), WORK a scratch directory (emptied).
# CRASH_JOBS (default: the number of cores) points run at once. CRASH_SAMPLE=K runs, per case,
# K of its points instead of all: the first, the last two (the kill after the last change and the
# unkilled run) and K-3 drawn by CRASH_SEED (default: today's UTC date, printed; the same seed
# draws the same points), so every command is covered in a bounded time. Exit 0 when every point held;
# 1 with each failure's world kept under WORK/run/<case>/<N> and its story in WORK/failures.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

if [[ "${1:-}" == __point ]]; then
  POINT_MODE=1
  shift
else
  POINT_MODE=0
  [[ $# -ge 4 ]] || { echo "usage: $0 KILN INJECTOR.so CRASH_GET WORK [CASE...]" >&2; exit 2; }
  # (kiln_crash_compiled_root, the fetch-compiled-root case's command, is built beside CRASH_GET.)
  export KILN=$(realpath "$1") INJECTOR=$(realpath "$2") CRASH_GET=$(realpath "$3")
  export CRASH_COMPILED_ROOT=${CRASH_GET%/*}/kiln_crash_compiled_root
  export WORK=$(realpath -m "$4")
  # The interpreter itself: a version manager's shim costs ~0.4 s a call, twice per point.
  PYTHON=$(python3 -c 'import sys; print(sys.executable)')
  export PYTHON
  shift 4
fi

ALL_CASES=(install-index install-over install-archive install-bundle fetch-pinned fetch-tuf
  fetch-compiled-root bundle-out bundle-out-tar mirror-sync mirror-stage tuf-init tuf-add
  tuf-refresh tuf-rotate tuf-rotate-targets build-publish build-shard merge wheel tarball loader-mirror
  loader-scan-record loader-jit)
PKG=tiny-kernels
VER=0.3.0
IDX=$PKG-$VER-index.json
VER_B=0.3.1
IDX_B=$PKG-$VER_B-index.json

fail() { echo "FAIL: $*" >&2; return 1; }

# ---- the small release, made once per run (tiny project, sm_80 and sm_90a: five nvcc compiles)

write_tiny_project() {  # the project of tests/integration/tiny_project.hpp
  local src=$1
  mkdir -p "$src/registry" "$src/kernels"
  echo $VER > "$src/VERSION"
  echo "{\"format\": 1, \"name\": \"$PKG\"}" > "$src/registry/package.json"
  "$PYTHON" - "$src" "$HERE/../integration/tiny_project.hpp" <<'EOF'
import re, sys
src, header = sys.argv[1], open(sys.argv[2]).read()
def text(name):
    return re.search(r'inline const char\* ' + name + r' = R"\((.*?)\)";', header, re.S).group(1)
for name, path in [('kRegistry', 'registry/kernels.json'), ('kCommon', 'kernels/common.cuh'),
                   ('kScale', 'kernels/scale.cu'), ('kHop', 'kernels/hop.cu')]:
    open(src + '/' + path, 'w').write(text(name))
EOF
}

# Release A (0.3.0), release A2 (0.3.0 built at another time: other bytes, the same names) and
# release B (0.3.1): a command replaces A with A2, or publishes B beside A (as releases are
# published: a version's files never change). Ten nvcc compiles (A's, then B's from srcB);
# mirrors, shards, a bundle and a TUF repository of them.
make_release() {
  local R=$WORK/release
  rm -rf "$R" && mkdir -p "$R"
  write_tiny_project "$R/src"
  ( cd "$R"
    local T=(--source src --targets sm_80,sm_90a)
    SOURCE_DATE_EPOCH=1700000000 "$KILN" build "${T[@]}" --out outA >/dev/null
    cp -a outA outA2
    SOURCE_DATE_EPOCH=1700000100 "$KILN" build "${T[@]}" --out outA2 >/dev/null
    # B's project lives in srcB for good: an out directory built from it compiles nothing
    # again (its nvcc command lines name srcB), in any copy of it.
    cp -a src srcB && echo $VER_B >srcB/VERSION
    cp -a outA outB
    SOURCE_DATE_EPOCH=1700000000 "$KILN" build --source srcB --targets sm_80,sm_90a --out outB \
      >/dev/null
    mkdir distB && cp outB/dist/$PKG-$VER_B[.-]* distB/
    cp -a outB outA-for-B && rm outA-for-B/dist/$PKG-$VER_B[.-]*
    for i in 1 2; do
      cp -a outB "sh$i"
      SOURCE_DATE_EPOCH=1700000000 "$KILN" build --source srcB --targets sm_80,sm_90a \
        --out "sh$i" --shard $i/2 >/dev/null
    done
    "$KILN" mirror stage --to mirrorA --package $PKG --version $VER outA/dist >/dev/null
    "$KILN" mirror stage --to mirrorB --package $PKG --version $VER_B distB >/dev/null
    # A TUF repository holding release A, keys outside it as an operator keeps them.
    "$KILN" tuf-repo --dir repo --offline-keys keys/offline --online-keys keys/online init >/dev/null
    "$KILN" tuf-repo --dir repo --offline-keys keys/offline --online-keys keys/online \
      add outA/dist >/dev/null
    cp repo/metadata/1.root.json root.json
    # The kiln tarball's inputs: a one-specialisation release of kiln's own package (one nvcc
    # compile) and kiln's install tree, stripped (the tarball compresses all of it each run).
    SOURCE_DATE_EPOCH=1700000000 "$KILN" build --source "$HERE/../.." --targets sm_80 \
      --only axpy_dtype_f32 --out kilnrel >/dev/null
    # (CRASH_KILN_PREFIX: an install tree made beforehand, where the build tree is not at hand:
    # scripts/crash_sweep.sh on another machine.)
    if [[ -n "${CRASH_KILN_PREFIX:-}" ]]; then cp -a "$CRASH_KILN_PREFIX" kiln-prefix
    else cmake --install "${KILN%/*}" --prefix kiln-prefix --strip >/dev/null; fi
  ) 2>"$WORK/release.log" || { cat "$WORK/release.log" >&2; exit 1; }
}

start_server() {  # one static server for every world (fetch, sync, TUF clients)
  "$PYTHON" -u -m http.server 0 --bind 127.0.0.1 --directory "$WORK" >"$WORK/http.log" 2>&1 &
  SERVER_PID=$!
  trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    PORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$WORK/http.log" | head -1)
    [[ -n "$PORT" ]] && break
    sleep 0.1
  done
  [[ -n "$PORT" ]] || { echo "http.server did not start: $(cat "$WORK/http.log")" >&2; exit 1; }
  export URL=http://127.0.0.1:$PORT
}

# ---- snapshots: every file's path, size and SHA-256, every directory and link, sorted

snapshot() {  # snapshot DIR [EXCLUDED_RELATIVE_PATH...]
  "$PYTHON" "$HERE/tree_digest.py" "$@"
}

# What a finished command leaves, compared after the rerun with an unkilled run's result: every
# name, and the bytes of all but lock files (flock files hold their last holder's pid) and the
# case's VOLATILE lines (signed metadata with expiry times); UNCOMPARED lines are left out
# (versioned TUF metadata: a rerun after a kill signs the next version, which is right).
final_state() {  # final_state WORLD
  local w=$1
  for d in $DEST; do
    [[ -e "$w/$d" ]] || continue
    snapshot "$w/$d" | sed "s|^|$d/|" | { grep -v -E "$UNCOMPARED" || true; } |
      sed -E "\\%$VOLATILE|\.lock %s/ [0-9]+ [0-9a-f]{64}\$/ (bytes vary)/"
  done
}

# ---- the cases: each sets DEST (the paths it may change, relative to the world), VOLATILE (a
# regex of final-state lines whose bytes legitimately differ from run to run), UNCOMPARED (lines
# left out of that comparison), FINISHED_SAYS (what a rerun may answer, failing, when the killed
# run had finished its work), and defines prepare (the world before), run (the command) and
# check (the destination verifies).

load_case() {  # load_case NAME: the case's DEST, VOLATILE, prepare, run and check
  declare -F "case_$1" >/dev/null || return 1
  DEST="" VOLATILE='^\$' UNCOMPARED='^\$' FINISHED_SAYS="" TUF_TARGET=$IDX FAULT_RCS=9
  PIN_A=$(cat "$WORK/release/pinA" 2>/dev/null || true)
  PIN_B=$(cat "$WORK/release/pinB" 2>/dev/null || true)
  "case_$1"
}

kv() { "$KILN" "$@" >"$W/.check.err" 2>&1 || { tail -5 "$W/.check.err" >&2; return 1; }; }

# A store verifies when it holds no archive yet (kiln verify: not-found, "no archive directories";
# a download's temporary file may be there, which the next fetch removes), or kiln verify passes.
check_store() {
  local store=$W/$1 rc=0
  [[ -d "$store" ]] || return 0
  "$KILN" verify --package $PKG --version $VER "$store" >"$W/.check.err" 2>&1 || rc=$?
  [[ $rc -eq 0 ]] && return 0
  [[ $rc -eq 6 ]] && grep -q "no archive directories in this store" "$W/.check.err" && return 0
  tail -5 "$W/.check.err" >&2
  fail "store $1 does not verify"
}

case_install-index() {
  DEST=store
  prepare() { mkdir -p "$W/in" && cp -a "$WORK/release/outA/dist" "$W/in/"; }
  run() { "$KILN" install --dest store "in/dist/$IDX"; }
  check() { check_store store; }
}

case_install-over() {  # release A2 over an installed release A: every archive is replaced
  DEST=store
  prepare() {
    mkdir -p "$W/in" && cp -a "$WORK/release/outA2/dist" "$W/in/"
    "$KILN" install --dest "$W/store" "$WORK/release/outA/dist/$IDX" >/dev/null 2>&1
  }
  run() { "$KILN" install --dest store "in/dist/$IDX"; }
  check() { check_store store; }
}

case_install-archive() {
  DEST=store
  prepare() {
    mkdir -p "$W/in" && cp -a "$WORK/release/outA/dist/$PKG-$VER-cuda"*sm_90a.tar.zst "$W/in/"
  }
  run() { "$KILN" install --dest store in/*.tar.zst; }
  check() { check_store store; }
}

case_install-bundle() {  # a bundle's TUF metadata is also trusted state: the cache is destination
  DEST="store cache"
  prepare() {
    mkdir -p "$W/in"
    cp -a "$WORK/release/bundle" "$W/in/bundle"
    cp "$WORK/release/root.json" "$W/in/root.json"
  }
  run() {
    "$KILN" install --dest store --bundle in/bundle --tuf-root in/root.json --package $PKG \
      --version $VER
  }
  check() { check_store store; }
}

case_fetch-pinned() {
  DEST="store cache"
  prepare() { mkdir -p "$W"; }
  run() {
    "$KILN" fetch --targets sm_80,sm_90a --dest store --mirror "$URL/release/mirrorA" \
      --index-sha256 "$PIN_A" --package $PKG --version $VER
  }
  check() { check_store store; }
}

# The cache already trusts the repository's earlier metadata, and the repository has moved on
# (release A added, then refreshed): the kill lands while newer metadata replaces older.
case_fetch-tuf() {
  DEST="store cache"
  VOLATILE='^$'
  prepare() {
    mkdir -p "$W/in" && cp "$WORK/release/root.json" "$W/in/root.json"
    cp -a "$WORK/release/tuf-cache-before" "$W/cache"
  }
  run() {
    "$KILN" fetch --targets sm_80,sm_90a --dest store --mirror "$URL/release/repo-refreshed" \
      --tuf-root in/root.json --package $PKG --version $VER
  }
  check() { check_store store; }
}

# A kiln built with -DKILN_TRUSTED_TUF_ROOT writes that root once as
# <cache>/tuf/compiled-root-<sha256>.json before its first TUF fetch (fetch::materialize_anchor):
# kiln_crash_compiled_root (crash_compiled_root.cpp) runs that step with the release's root as
# the compiled-in one. Once there, the file must be the root's bytes.
case_fetch-compiled-root() {
  DEST=cache
  prepare() { mkdir -p "$W/in" && cp "$WORK/release/root.json" "$W/in/root.json"; }
  run() { "$CRASH_COMPILED_ROOT" in/root.json cache/tuf; }
  check() {
    local f
    for f in "$W"/cache/tuf/compiled-root-*.json; do
      [[ -e "$f" ]] || continue
      cmp -s "$f" "$W/in/root.json" || fail "${f#"$W"/} is not the compiled-in root"
    done
  }
}

# A bundle, once at its name, installs as a node installs it (its own scratch store and cache).
check_bundle() {  # check_bundle PATH
  local b=$W/$1
  [[ -e "$b" ]] || return 0
  rm -rf "$W/.check" && mkdir -p "$W/.check"
  KILN_CACHE_DIR=$W/.check/cache "$KILN" install --dest "$W/.check/store" --bundle "$b" \
    --tuf-root "$W/in/root.json" --package $PKG --version $VER >"$W/.check.err" 2>&1 ||
    { tail -5 "$W/.check.err" >&2; fail "bundle $1 does not install"; }
}

case_bundle-out() {  # kiln bundle --out DIR: the metadata it fetches are trusted state (cache)
  DEST="out cache"
  # Killed after the rename that publishes the bundle (its directory's fsync is last).
  FINISHED_SAYS='exists: a bundle is written to a new path'
  prepare() { mkdir -p "$W/in" "$W/out" && cp "$WORK/release/root.json" "$W/in/root.json"; }
  run() {
    "$KILN" bundle --out out/bundle --targets sm_80,sm_90a --mirror "$URL/release/repo" \
      --tuf-root in/root.json --package $PKG --version $VER
  }
  check() { check_bundle out/bundle; }
}

case_bundle-out-tar() {  # kiln bundle --out FILE.tar.zst
  DEST="out cache"
  FINISHED_SAYS='exists: a bundle is written to a new path'
  prepare() { mkdir -p "$W/in" "$W/out" && cp "$WORK/release/root.json" "$W/in/root.json"; }
  run() {
    SOURCE_DATE_EPOCH=1700000000 "$KILN" bundle --out out/bundle.tar.zst --targets sm_80,sm_90a \
      --mirror "$URL/release/repo" --tuf-root in/root.json --package $PKG --version $VER
  }
  check() { check_bundle out/bundle.tar.zst; }
}

# A release is published in a mirror once its SHA256SUMS is there (stage and sync write it last):
# then `kiln mirror verify` must pass. Before, the index, once there, must verify as an index
# (clients need only the index and what it pins); with neither, nothing is published yet.
check_mirror() {  # check_mirror DIR PIN [VERSION]
  local m=$W/$1 v=${3:-$VER}
  if [[ -e "$m/$PKG-$v-SHA256SUMS" ]]; then
    kv mirror verify --package $PKG --version "$v" --index-sha256 "$2" "$m" ||
      fail "mirror $1 does not verify ($PKG $v)"
  elif [[ -e "$m/$PKG-$v-index.json" ]]; then
    kv verify "$m/$PKG-$v-index.json" || fail "$1/$PKG-$v-index.json does not verify"
  fi
}

case_mirror-sync() {  # release B synced into a mirror of release A
  DEST=mirror
  prepare() { mkdir -p "$W" && cp -a "$WORK/release/mirrorA" "$W/mirror"; }
  run() {
    "$KILN" mirror sync --from "$URL/release/mirrorB" --to mirror --package $PKG \
      --version $VER_B --index-sha256 "$PIN_B"
  }
  # A is whole throughout; B verifies once its index is there (it comes last but for SHA256SUMS).
  check() { check_mirror mirror "$PIN_A" && check_mirror mirror "$PIN_B" $VER_B; }
}

case_mirror-stage() {
  DEST=mirror
  prepare() { mkdir -p "$W/in" && cp -a "$WORK/release/outA/dist" "$W/in/"; }
  run() { "$KILN" mirror stage --to mirror --package $PKG --version $VER in/dist; }
  check() { check_mirror mirror "$PIN_A"; }
}

# ---- TUF repositories: after a kill, a client that trusted the repository before and a client
# that trusts only root v1 must both update to a consistent state (never a rollback or freeze
# alarm), now and after the rerun; a client that saw the killed state must accept the rerun's.

tuf_client_update() {  # tuf_client_update CLIENT_DIR REPO_DIR
  local c=$1 repo=$2
  local action=(refresh)
  [[ -z "$TUF_TARGET" ]] || action=(--target-base-url "$URL${repo#"$WORK"}/targets"
    --target-dir "$c.targets" --target-name "$TUF_TARGET" download)
  mkdir -p "$c.targets"
  "$KILN" tuf-client --metadata-dir "$c" --metadata-url "$URL${repo#"$WORK"}/metadata" \
    "${action[@]}" >"$c.log" 2>&1 ||
    { cat "$c.log" >&2; fail "TUF client ${c##*/} cannot update from ${repo#"$W"/}"; }
}

# Before init completes there is no repository to update from: nothing published yet.
repo_published() { [[ -e "$W/repo/metadata/timestamp.json" ]]; }

check_repo() {  # check_repo PHASE [ROOT]
  repo_published || return 0
  local phase=${1:-killed} root=${2:-$W/in/root.json}
  rm -rf "$W/.clients/fresh-$phase" && mkdir -p "$W/.clients"
  "$KILN" tuf-client --metadata-dir "$W/.clients/fresh-$phase" init "$root" >/dev/null
  tuf_client_update "$W/.clients/fresh-$phase" "$W/repo" || return 1
  if [[ -d "$W/in/client-before" ]]; then
    [[ -d "$W/.clients/seasoned" ]] || cp -a "$W/in/client-before" "$W/.clients/seasoned"
    tuf_client_update "$W/.clients/seasoned" "$W/repo"
  fi
}

TUF_OPTS=(--offline-keys keys/offline --online-keys keys/online)

prepare_repo() {  # a repository holding release A, its keys, root v1 and a client that saw it
  mkdir -p "$W/in"
  cp -a "$WORK/release/repo" "$W/repo"
  cp -a "$WORK/release/keys" "$W/keys"
  cp "$WORK/release/root.json" "$W/in/root.json"
  cp -a "$WORK/release/client-before" "$W/in/client-before"
  cp -a "$WORK/release/distB" "$W/in/distB"
}

case_tuf-init() {
  DEST="repo keys"
  # Killed after timestamp.json, its last file: the repository is there, a second init refuses.
  FINISHED_SAYS='timestamp.json exists: this directory is already a TUF repository'

  # Fresh keys every run; an init killed after saving keys leaves them, listed by no root.
  VOLATILE='\.json '
  UNCOMPARED='^keys/.*\.pem |^repo/metadata/[0-9]+\.[a-z]+\.json '
  prepare() { mkdir -p "$W"; }
  run() { "$KILN" tuf-repo --dir repo "${TUF_OPTS[@]}" init; }
  TUF_TARGET=""
  check() {
    repo_published || return 0
    check_repo "${1:-killed}" "$W/repo/metadata/1.root.json"
  }
}

case_tuf-add() {
  DEST="repo keys"
  VOLATILE='metadata/.*\.json '
  UNCOMPARED='^repo/metadata/[0-9]+\.[a-z]+\.json '
  prepare() { prepare_repo; }
  run() { "$KILN" tuf-repo --dir repo "${TUF_OPTS[@]}" add in/distB; }
  check() { check_repo "$@"; }
}

case_tuf-refresh() {
  DEST="repo keys"
  VOLATILE='metadata/.*\.json '
  UNCOMPARED='^repo/metadata/[0-9]+\.[a-z]+\.json '
  prepare() { prepare_repo; }
  run() { "$KILN" tuf-repo --dir repo "${TUF_OPTS[@]}" refresh; }
  check() { check_repo "$@"; }
}

case_tuf-rotate() {
  DEST="repo keys"
  VOLATILE='metadata/.*\.json '
  UNCOMPARED='^keys/.*\.pem |^repo/metadata/[0-9]+\.[a-z]+\.json '
  prepare() { prepare_repo; }
  run() { "$KILN" tuf-repo --dir repo "${TUF_OPTS[@]}" rotate timestamp; }
  check() { check_repo "$@"; }
}

case_tuf-rotate-targets() {
  DEST="repo keys"
  VOLATILE='metadata/.*\.json '
  UNCOMPARED='^keys/.*\.pem |^repo/metadata/[0-9]+\.[a-z]+\.json '
  prepare() { prepare_repo; }
  run() { "$KILN" tuf-repo --dir repo "${TUF_OPTS[@]}" rotate targets; }
  check() { check_repo "$@"; }
}

# ---- kiln build's publish into --dist and kiln merge: release B published beside release A.

check_dist() {  # every index in the dist verifies, with what it pins
  local dist=$W/$1 index
  for index in "$dist"/*-index.json; do
    [[ -e "$index" ]] || continue
    kv verify "$index" || fail "$1/${index##*/} does not verify"
  done
}

case_build-publish() {  # out holds release A, compiled from srcB: building B compiles nothing
  DEST=out
  VOLATILE='\.ninja_log |\.ninja_deps '
  prepare() { mkdir -p "$W" && cp -a "$WORK/release/outA-for-B" "$W/out"; }
  run() {
    SOURCE_DATE_EPOCH=1700000000 "$KILN" build --source "$WORK/release/srcB" --out out \
      --targets sm_80,sm_90a
  }
  check() { check_dist out/dist; }
}

# kiln build --shard 1/2 of release B (out compiled from srcB: nothing compiles): a shard is
# whole once its shard.json is there (written last), and then merges with shard 2 into a dist
# that verifies.
case_build-shard() {
  DEST=out
  VOLATILE='\.ninja_log |\.ninja_deps '
  prepare() { mkdir -p "$W" && cp -a "$WORK/release/outB" "$W/out"; }
  run() {
    SOURCE_DATE_EPOCH=1700000000 "$KILN" build --source "$WORK/release/srcB" --out out \
      --targets sm_80,sm_90a --shard 1/2
  }
  check() {
    [[ -e "$W/out/shard-1-of-2/shard.json" ]] || return 0
    rm -rf "$W/.check" && mkdir -p "$W/.check"
    kv merge --dist "$W/.check/dist" "$W/out/shard-1-of-2" "$WORK/release/sh2/shard-2-of-2" ||
      fail "shard 1/2 does not merge with shard 2/2"
    check_dist .check/dist
  }
}

case_merge() {
  DEST=dist
  prepare() {
    mkdir -p "$W/in"
    cp -a "$WORK/release/sh1/shard-1-of-2" "$WORK/release/sh2/shard-2-of-2" "$W/in/"
    cp -a "$WORK/release/outA/dist" "$W/dist"
  }
  run() { "$KILN" merge --dist dist in/shard-1-of-2 in/shard-2-of-2; }
  check() { check_dist dist; }
}

# kiln wheel: the package's wheel and one per target; a wheel, once at its name, is a whole zip
# whose every member reads back (a wheel's RECORD digests are checked where wheels are published:
# kiln mirror stage, verify).
case_wheel() {
  DEST=wheels
  prepare() { mkdir -p "$W/in" && cp -a "$WORK/release/outA/dist" "$W/in/"; }
  run() { SOURCE_DATE_EPOCH=1700000000 "$KILN" wheel --dist in/dist --out wheels; }
  check() {
    local f
    for f in "$W"/wheels/*.whl; do
      [[ -e "$f" ]] || continue
      "$PYTHON" -c 'import sys, zipfile; sys.exit(zipfile.ZipFile(sys.argv[1]).testzip() is not None)' \
        "$f" 2>&1 || fail "wheels/${f##*/} is not a whole wheel"
    done
  }
}

case_tarball() {  # kiln tarball: kiln's install tree and the release's stores in one .tar.zst
  DEST=out
  prepare() { mkdir -p "$W/out"; }
  run() {
    SOURCE_DATE_EPOCH=1700000000 "$KILN" tarball --dist "$WORK/release/kilnrel/dist" \
      --prefix "$WORK/release/kiln-prefix" --out out
  }
  check() {
    local f
    for f in "$W"/out/*.tar.zst; do
      [[ -e "$f" ]] || continue
      zstd -tq "$f" 2>&1 || fail "out/${f##*/} is not a whole zstd stream"
    done
  }
}

# ---- the loader (kiln_crash_get: a Loader's get, stand-in CC 9.0 driver): what it writes into
# its cache must never make a later get fail or load other bytes.

get_kernel() {  # get_kernel NAME=VALUE...: the loader's settings, nothing else configured
  # (No `env`: the injector is in LD_PRELOAD and would count in env, not in the loader.)
  (
    unset KILN_MIRRORS KILN_INDEX_SHA256 KILN_ARTIFACT_PATH
    export "$@"
    exec "$CRASH_GET" in/src scale_dtype_f32
  )
}

case_loader-mirror() {  # the mirror tier downloads sm_90a into the cache
  DEST=cache
  # A loader that cannot keep what it got serves it all the same, from memory (issue 38,
  # item 2): the get succeeds under every fault.
  FAULT_RCS=0
  prepare() { mkdir -p "$W/in" && cp -a "$WORK/release/src" "$W/in/src"; }
  run() {
    get_kernel KILN_MIRRORS="$URL/release/mirrorA" KILN_INDEX_SHA256="$PIN_A" KILN_DISABLE_JIT=1
  }
  check() { check_store cache; }
}

# A get from an installed store keeps the store's listing in the cache (scan/): only for a store
# unchanged for 3 s (kRecordSettledNs), so the store is the release's, settled, outside the
# worlds (a copy in each would be new every time); the loader only reads it.
case_loader-scan-record() {
  DEST=cache
  FAULT_RCS=0  # the record only saves the next get a listing: a get never fails for it
  VOLATILE='^cache/scan/'
  # A killed writer's record temporary is removed by the next writer once an hour old (no lock:
  # scan_record.cpp, by design); the rerun's record must be there and right all the same.
  UNCOMPARED='^cache/scan/[0-9a-f]+\.tmp\.'
  prepare() {
    mkdir -p "$W/in" && cp -a "$WORK/release/src" "$W/in/src"
    local store=$WORK/release/settled-store
    if [[ ! -d "$store" ]]; then
      "$KILN" install --dest "$store" "$WORK/release/outA/dist/$IDX" >/dev/null 2>&1
      sleep 3.5
    fi
  }
  run() {
    get_kernel KILN_ARTIFACT_PATH="$WORK/release/settled-store" KILN_OFFLINE=1 KILN_DISABLE_JIT=1
  }
  check() { :; }  # the rerun's get (after the kill) is the check: it must load
}

case_loader-jit() {  # no store, no mirror: NVRTC compiles and the JIT disk cache keeps it
  DEST=cache
  # A loader that cannot keep what it got serves it all the same, from memory (issue 38,
  # item 2): the get succeeds under every fault.
  FAULT_RCS=0
  VOLATILE='^cache/jit/'
  prepare() { mkdir -p "$W/in" && cp -a "$WORK/release/src" "$W/in/src"; }
  run() { get_kernel KILN_OFFLINE=1; }
  check() { :; }
}

# ---- one point: a fresh world, the kill, the three assertions

run_command() {  # run_command WORLD AT LOG [FAULT]: the case's command in WORLD under the injector
  local w=$1 at=$2 log=$3 fault=${4:-}
  head -c 16 /dev/zero >"$w/.points"
  # CUDA_CACHE_DISABLE: on a machine with a driver, NVRTC and the driver keep their own compute
  # cache in $HOME/.nv: NVIDIA's files, not kiln's, which would count as points and as changes
  # outside the destination (seen in the whole sweep on a GPU machine).
  (cd "$w" && W=$w HOME=$w/home TMPDIR=$w/tmp KILN_CACHE_DIR=$w/cache CUDA_CACHE_DISABLE=1 \
    CRASH_POINT_COUNTER=$w/.points CRASH_POINT_AT=$at CRASH_POINT_FAIL=$fault \
    CRASH_POINT_LOG=$w/.point-log LD_PRELOAD=$INJECTOR run) >"$log" 2>&1
}

points_of() { od -An -tu8 -N8 "$1/.points" | tr -d ' '; }
failed_calls_of() { od -An -tu8 -j8 -N8 "$1/.points" | tr -d ' '; }

# Every path under a world except the destination, the harness's own files and the clients.
outside() { snapshot "$1" $DEST home/.cache .points .point-log .clients .check .check.err .out .rerun; }

differences() {  # differences BEFORE AFTER: the first ten lines that differ, indented
  diff <(echo "$1") <(echo "$2") | grep '^[<>]' | head -10 | sed 's/^/    /'
}

# The three assertions of a point, after a kill or a failed command alike (BEFORE: the world
# outside the destination before the run): prints each problem, one per paragraph.
assert_recovers() {  # assert_recovers WORLD CASE BEFORE FAULT
  local w=$1 c=$2 before=$3 fault=$4 out rc=0
  # 1. what the destination holds verifies
  out=$(check killed 2>&1) || echo "  after the ${fault:-kill} the destination does not verify: $out"
  # 2. nothing outside it changed
  local after
  after=$(outside "$w")
  if [[ "$before" != "$after" ]]; then
    echo "  outside the destination changed:"
    differences "$before" "$after"
  fi
  # 3. the same command, run again (no fault), completes and ends as an unkilled run ends
  run_command "$w" 0 "$w/.rerun" || rc=$?
  # A command killed after its last change had finished its work: its rerun may say so.
  if [[ $rc -ne 0 && -n "$FINISHED_SAYS" ]] && grep -q -- "$FINISHED_SAYS" "$w/.rerun"; then rc=0; fi
  if [[ $rc -ne 0 ]]; then
    echo "  the rerun exited $rc: $(tail -3 "$w/.rerun")"
    return
  fi
  local final
  final=$(final_state "$w")
  if [[ "$final" != "$(cat "$WORK/tpl/$c.final")" ]]; then
    echo "  the rerun ends unlike an unkilled run:"
    differences "$(cat "$WORK/tpl/$c.final")" "$final"
  fi
  out=$(check rerun 2>&1) || echo "  after the rerun the destination does not verify: $out"
}

# The system's words for each fault (strerror), which the command's message must carry.
declare -A STRERROR=([ENOSPC]="No space left on device" [EDQUOT]="Disk quota exceeded"
  [EIO]="Input/output error" [EROFS]="Read-only file system")

names_of() { cut -d' ' -f1; }  # the names of final_state's lines

# What a command whose file-system changes failed from point N on must answer: an exit code of
# the case's FAULT_RCS (9, io; 0 where it can do without the change) with, when it fails, a
# message naming a path whose change failed (or the file a failed temporary was for) and the
# system's words; 0 is also right when every failed change was a removal of what the command no
# longer needed or a directory's fsync (io::sync_directory, best effort): its work is done, and
# what it could not remove the next run removes (checked by assert_recovers). With a fault that
# still lets files be removed (ENOSPC, EDQUOT): no name in the destination that neither the
# start nor a finished run has (a temporary left behind).
assert_fault_answer() {  # assert_fault_answer WORLD RC FAULT DEST_NAMES_BEFORE
  local w=$1 rc=$2 fault=$3 names_before=$4 p failed
  failed=$(sed -n "s|^[0-9]* \(.*\) FAILED\$|\1|p" "$w/.point-log")
  local rcs=" $FAULT_RCS "
  if [[ $rc -eq 0 && "$rcs" != *" 0 "* ]]; then
    while read -r p; do
      [[ "$p" =~ ^(unlink|unlinkat|rmdir|remove)\  || ("$p" == "fsync "* && -d "${p#fsync }") ]] ||
        { rcs=""; break; }
    done <<<"$failed"
    [[ -z "$rcs" ]] || rcs=" 0 "
  fi
  if [[ "$rcs" != *" $rc "* ]]; then
    echo "  exited $rc, not ${FAULT_RCS// / or }: $(tail -3 "$w/.out")"
  elif [[ $rc -ne 0 ]]; then
    local msg paths named=0
    msg=$(grep -v '^\(info\|warning\|debug\)' "$w/.out" | sed "s|$w/||g; s|\./||g")
    grep -qF -- "${STRERROR[$fault]}" <<<"$msg" ||
      echo "  the message lacks the system's words (${STRERROR[$fault]}): $(tail -3 "$w/.out")"
    paths=$(cut -d' ' -f2- <<<"$failed" | sed "s|$w/||; s|^\./||" | sort -u)
    while IFS= read -r p; do
      [[ -n "$p" ]] || continue
      if grep -qF -- "$p" <<<"$msg" || { [[ "$p" == *.tmp* ]] && grep -qF -- "${p%.tmp*}" <<<"$msg"; }; then
        named=1
        break
      fi
    done <<<"$paths"
    [[ $named -eq 1 ]] || echo "  the message names no path whose change failed ($(head -3 <<<"$paths" | tr '\n' ' ')): $(tail -3 "$w/.out")"
  fi
  if [[ $fault == ENOSPC || $fault == EDQUOT ]]; then
    local left
    # (The destination's own directories, made for the command, may stay.)
    left=$(comm -23 <(final_state "$w" | names_of | sort -u) \
      <(sort -u <(echo "$names_before") <(names_of <"$WORK/tpl/$c.final") <(printf '%s/\n' $DEST)))
    [[ -z "$left" ]] || { echo "  left in the destination (neither there before nor after a run):"; sed 's/^/    /' <<<"$left" | head -10; }
  fi
}

point() {  # point CASE N [FAULT]: exit 0 when it held (or the command finished before point N)
  local c=$1 n=$2 fault=${3:-}
  load_case "$c"
  local w=$WORK/run/$c/${fault:+$fault-}$n
  W=$w
  rm -rf "$w" && mkdir -p "${w%/*}" && cp -a "$WORK/tpl/$c" "$w"
  local before names_before rc=0
  before=$(outside "$w")
  names_before=$(final_state "$w" | names_of)
  run_command "$w" "$n" "$w/.out" "$fault" || rc=$?
  local story
  story="$c point $n, ${fault:-kill} ($(grep "^$n " "$w/.point-log" 2>/dev/null | cut -d' ' -f2- | sed "s|$w/||g"))"
  local problems=""
  if [[ -z "$fault" ]]; then
    if [[ $rc -ne 137 ]]; then  # finished before point N: must have succeeded
      [[ $rc -eq 0 ]] || { echo "$story: unkilled run exited $rc: $(tail -3 "$w/.out")"; return 1; }
      rm -rf "$w"
      return 0
    fi
  else
    if [[ $(failed_calls_of "$w") -eq 0 ]]; then  # no call failed: an unkilled run
      [[ $rc -eq 0 ]] || { echo "$story: run with no failed call exited $rc: $(tail -3 "$w/.out")"; return 1; }
      rm -rf "$w"
      return 0
    fi
    problems+=$'\n'$(assert_fault_answer "$w" "$rc" "$fault" "$names_before")
  fi
  problems+=$'\n'$(assert_recovers "$w" "$c" "$before" "$fault")
  if [[ -n "${problems//[$'\n ']/}" ]]; then
    echo "$story:$(sed '/^$/d' <<<"$problems" | sed '1s/^/\n/')"
    return 1
  fi
  rm -rf "$w"
}

if [[ $POINT_MODE == 1 ]]; then
  point "$1" "$2" "${3:-}" >>"$WORK/failures.$1.${3:-kill}.$2" 2>&1 && rm -f "$WORK/failures.$1.${3:-kill}.$2"
  exit 0
fi

# ---- the run: release, templates, a counting run per case, then every point in parallel

CASES=("$@")
[[ ${#CASES[@]} -gt 0 ]] || CASES=("${ALL_CASES[@]}")
mkdir -p "$WORK"
rm -rf "$WORK/run" "$WORK/tpl" "$WORK"/failures.*
JOBS=${CRASH_JOBS:-$(nproc)}
seconds_since() {  # seconds_since T0_MS: elapsed seconds, one decimal
  local ms=$(($(date +%s%3N) - $1))
  printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}
t0=$(date +%s%3N)
export HOME=$WORK/home KILN_CACHE_DIR=$WORK/cache  # the harness's own runs and checks
make_release
start_server
(
  cd "$WORK/release"
  export KILN_CACHE_DIR=$WORK/release/cache HOME=$WORK/release/home
  sha256sum outA/dist/$IDX | cut -c1-64 >pinA
  sha256sum distB/$IDX_B | cut -c1-64 >pinB
  K=(--offline-keys keys/offline --online-keys keys/online)
  # A client and a fetch cache that trusted the repository as it was, then the repository moved
  # on (a copy: tuf-repo cases start from the unrefreshed one).
  "$KILN" tuf-client --metadata-dir client-before init root.json >/dev/null
  "$KILN" tuf-client --metadata-dir client-before --metadata-url "$URL/release/repo/metadata" \
    refresh >/dev/null
  KILN_CACHE_DIR=$PWD/tuf-cache-before "$KILN" fetch --targets sm_80 --dest tuf-store-before \
    --mirror "$URL/release/repo" --tuf-root root.json --package $PKG --version $VER >/dev/null
  cp -a repo repo-refreshed
  "$KILN" tuf-repo --dir repo-refreshed "${K[@]}" refresh >/dev/null
  "$KILN" bundle --out bundle --targets sm_80,sm_90a --mirror "$URL/release/repo" \
    --tuf-root root.json --package $PKG --version $VER >/dev/null
) 2>>"$WORK/release.log" || {
  echo "setting up the release failed:" >&2
  cat "$WORK/release.log" >&2
  exit 1
}
printf 'release ready in %s s\n' "$(seconds_since "$t0")"

SEED=${CRASH_SEED:-$(date -u +%Y%m%d)}
MODES=${CRASH_MODES:-kill ENOSPC EDQUOT EIO EROFS}
sample_points() {  # sample_points CASE N: "POINT MODE" lines, every one or a sample (above)
  "$PYTHON" - "$1" "$2" "${CRASH_SAMPLE:-0}" "${CRASH_FAULT_SAMPLE:-1}" "$SEED" $MODES <<'EOF'
import random, sys
case, n, k, kf, seed, modes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6:]
for mode in modes:
    if mode == "kill":  # 1..N+1: the last is the unkilled run
        points = list(range(1, n + 2))
        if 0 < k < len(points):
            ends = {1, n, n + 1}
            rest = [p for p in points if p not in ends]
            points = sorted(ends | set(random.Random(f"{seed}:{case}").sample(rest, max(0, k - len(ends)))))
    else:  # 1..N: a fault from point N on (N+1 fails nothing: the unkilled run)
        points = list(range(1, n + 1))
        if k > 0 and kf < len(points):
            points = sorted(random.Random(f"{seed}:{case}:{mode}").sample(points, kf))
    for p in points:
        print(p if mode == "kill" else f"{p} {mode}")
EOF
}
if [[ -n "${CRASH_SAMPLE:-}" && "${CRASH_SAMPLE}" != 0 ]]; then
  printf 'sample: %s kill points and %s per fault kind (%s) per case, seed %s (CRASH_SEED=%s CRASH_SAMPLE=%s CRASH_FAULT_SAMPLE=%s draws them again)\n' \
    "$CRASH_SAMPLE" "${CRASH_FAULT_SAMPLE:-1}" "$MODES" "$SEED" "$SEED" "$CRASH_SAMPLE" "${CRASH_FAULT_SAMPLE:-1}"
fi
total_points=0
ran_points=0
failed=0
for c in "${CASES[@]}"; do
  load_case "$c" || { echo "no such case: $c (cases: ${ALL_CASES[*]})" >&2; exit 2; }
  tc=$(date +%s%3N)
  W=$WORK/tpl/$c
  mkdir -p "$W" "$W/home" "$W/tmp"
  prepare
  # The counting run, unkilled, in a copy: how many points the command has, and how it ends.
  W=$WORK/tpl/$c.count
  rm -rf "$W" && cp -a "$WORK/tpl/$c" "$W"
  if ! run_command "$W" 0 "$W/.out"; then
    echo "$c: the unkilled run failed:" >&2
    cat "$W/.out" >&2
    exit 1
  fi
  n=$(points_of "$W")
  final_state "$W" >"$WORK/tpl/$c.final"
  rm -rf "$W"
  sample_points "$c" "$n" | xargs -P "$JOBS" -L1 bash "$0" __point "$c"
  f=$(find "$WORK" -maxdepth 1 -name "failures.$c.*" | wc -l)
  ran=$(sample_points "$c" "$n" | wc -l)
  printf '%-18s %4d points, %4d run %7s s  %s\n' "$c" "$n" "$ran" "$(seconds_since "$tc")" \
    "$([[ $f -eq 0 ]] && echo ok || echo "$f FAILED")"
  total_points=$((total_points + n))
  ran_points=$((ran_points + ran))
  failed=$((failed + f))
done
printf 'total: %d points, %d run in %s s, %d jobs\n' "$total_points" "$ran_points" \
  "$(seconds_since "$t0")" "$JOBS"
if [[ $failed -gt 0 ]]; then
  cat "$WORK"/failures.* >"$WORK/failures"
  echo "$failed points failed (worlds kept under $WORK/run):" >&2
  cat "$WORK/failures" >&2
  exit 1
fi
