#!/usr/bin/env bash
# The release, proven on a GPU (docs/gpu-runs.md): what ci/release.sh published is unpacked on
# the GPU machine and used there as a user would, with no KILN_* variable.
#
#   scripts/gpu_release_check.sh prepare RELEASE_MIRROR BUILD_DIR   here: copies the tarball and
#       wheels of RELEASE_MIRROR (ci/release.sh's release/mirror), BUILD_DIR's kiln_gpu_tests, and
#       the system libraries they need that a bare machine lacks (libarchive, libcurl, ...;
#       never libkiln: that must come from the tarball) into .carry/release (git-ignored).
#   scripts/gpu_release_check.sh run                                 on the GPU machine, from the
#       repository root; logs to $OUT (or /tmp/kiln-gpu-out).
#
# `run` unpacks the tarball, then: `kiln doctor --require-gpu` (the GPU and the store beside
# libkiln), `kiln compat --device auto` on the tarball and wheels (the real device), `kiln
# resolve --device auto`, and every GPU test of each specialisation against its CPU reference
# with libkiln and the store both taken from the unpacked tarball. Then the tiers, each case a
# run of ReleaseFromEnvironment (tests/gpu/release_env_gpu_test.cpp: every specialisation through
# Loader(LoaderConfig::from_env()) against its CPU reference) with the tarball's libkiln:
#   store      the store installed beside libkiln, no KILN_* variable at all
#   store-record  the same again in a second process, from the scan record the first one kept
#   mirror     an empty node (the tarball without its store) fetching from a loopback HTTP server
#              of release/mirror, index pinned: one GET of the chosen archive
#   tampered   the chosen archive tampered on the first mirror, a good second mirror: correct,
#              the first mirror named in the log
#   ranks      8 processes at once on one empty cache directory: one GET per archive
#   jit        offline and empty, NVRTC present: every specialisation through JIT
#   nojit      offline and empty, JIT disabled: not-found, the advice naming a release target
#   stale      a store whose manifests say another package version: stale, both versions named
#   corrupt    a store with every artifact's bytes altered: integrity, both digests named
#   two-packages  a C program (tests/gpu/two_packages.c) serving kiln-kernels and acme-kernels
#              from two plain loopback mirrors, each loader pinned by kiln_config.index_sha256,
#              on a node with neither store: both results checked, one archive GET per mirror
#   packages   examples/acme-kernels (a project that is not kiln's), built here against the
#              unpacked tarball through find_package(kiln), its archives built for sm_90a and
#              compute_80 by the tarball's kiln and installed beside its library: acme_demo runs
#              acme's kernels and kiln::ops::axpy of the reference package in one process, each
#              from its own store, and checks every result
#   python     the release's wheels pip-installed into a fresh venv: every reference op from
#              Python against NumPy, torch custom ops, the JIT tier, acme beside kiln-kernels
#              (tests/gpu/python_ops_check.py), docs/python.md run as written
#              (tests/gpu/python_doc_check.py), then bench/python_launch_bench.py
#   many-processes  64 processes x 8 threads on one empty cache through a pinned mirror, then
#              through TUF: one download per archive, every loaded image the store's
#              (tests/node/many_processes.sh)
#   toolkits   the release holds the archives of two CUDA toolkits (ci/release-toolkits.txt:
#              12.9 from NVRTC, 13.0 from nvcc). For each toolkit alone: a store of only its
#              archives (from the tarball's), every specialisation through the loader, offline and
#              without JIT, against its CPU reference, each loaded from that toolkit's archive;
#              and the release's wheels without the other toolkit's target wheels in a fresh
#              venv (tests/gpu/python_ops_check.py), loading from that toolkit's wheel. With both
#              present (the tarball's store, the python case's venv) on this driver (>= 580,
#              CUDA 13), every specialisation is taken from the 13.0 archive, and `kiln resolve
#              --explain` chooses cuda13.0.
set -uo pipefail
CARRY=.carry/release

# lazy_libs KILN: the libraries libkiln dlopens on first use, which ldd does not list.
source "$(dirname "${BASH_SOURCE[0]}")/lazy_libs.sh"

prepare() {
  local mirror=${1:?usage: gpu_release_check.sh prepare RELEASE_MIRROR BUILD_DIR}
  local build=${2:?usage: gpu_release_check.sh prepare RELEASE_MIRROR BUILD_DIR}
  set -e
  rm -rf "$CARRY"
  mkdir -p "$CARRY/pkg" "$CARRY/bin" "$CARRY/syslib" "$CARRY/acme"
  git check-ignore -q "$CARRY" || { echo "$CARRY is not git-ignored" >&2; exit 1; }
  # The GPU machines are x86_64 hosts: the release's linux-x86_64 tarball.
  cp "$mirror"/kiln-*-linux-x86_64.tar.zst "$mirror"/*.whl "$CARRY/pkg/"
  # The whole staged mirror, served from loopback on the GPU machine for the mirror cases.
  cp -r "$mirror" "$CARRY/mirror"
  cp "$build/tests/kiln_gpu_tests" "$CARRY/bin/"
  # A bare GPU machine may lack zstd (and Python's tarfile reads no zstd before 3.14).
  cp "$(command -v zstd)" "$CARRY/bin/"
  strip --strip-debug "$CARRY/bin/kiln_gpu_tests"
  local tmp
  tmp=$(mktemp -d)
  tar --zstd -xf "$CARRY"/pkg/kiln-*.tar.zst -C "$tmp"
  # The GPU tests link libkiln's C++ API and run against the tarball's libkiln: both must come
  # from one commit, or a changed class layout crashes them (a mixed pair did, 2026-12-01).
  local shipped built
  shipped=$("$tmp"/kiln-*/bin/kiln --version | sed -n 's/^commit \([0-9a-f]*\).*/\1/p')
  built=$("$build/kiln" --version | sed -n 's/^commit \([0-9a-f]*\).*/\1/p')
  if [ "$shipped" != "$built" ]; then
    echo "the release is commit $shipped, $build is commit $built: build both from one commit" >&2
    rm -rf "$tmp"
    exit 1
  fi
  # The example project against the unpacked tarball, as its maintainers would build it.
  local ukiln acme=$PWD/$CARRY/acme
  ukiln=$(ls "$tmp"/kiln-*/bin/kiln)
  cmake -S examples/acme-kernels -B "$tmp/acme-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$(dirname "$(dirname "$ukiln")")" >/dev/null
  cmake --build "$tmp/acme-build" >/dev/null
  cmake --install "$tmp/acme-build" --prefix "$acme" --strip >/dev/null
  "$ukiln" build --source examples/acme-kernels --targets sm_90a,compute_80 \
    --out "$tmp/acme-kernels-build" --dist "$tmp/acme-dist" >/dev/null
  "$ukiln" install --source examples/acme-kernels "$tmp"/acme-dist/acme-kernels-*-index.json \
    --dest "$acme/share/kiln/artifacts" >/dev/null
  # acme's release as a plain mirror of its own, and the C program that serves both packages
  # from two pinned mirrors in one process (tests/gpu/two_packages.c).
  "$ukiln" mirror stage "$tmp/acme-dist" --to "$CARRY/acme-mirror" --source examples/acme-kernels \
    >/dev/null
  # acme's own wheels (its package wheel and target wheels), for the python case.
  "$ukiln" wheel --dist "$tmp/acme-dist" --out "$CARRY/acme-wheels" >/dev/null
  # A node's worth of processes (tests/node/many_processes.sh) on the real driver.
  cp "$build/tests/kiln_node_process" "$CARRY/bin/"
  strip --strip-debug "$CARRY/bin/kiln_node_process"
  local uprefix
  uprefix=$(dirname "$(dirname "$ukiln")")
  cc -std=c11 -O2 -Wall -Werror tests/gpu/two_packages.c -o "$CARRY/bin/two_packages" \
    -I"$uprefix/include" -I"$acme/include" -I/usr/local/cuda/include \
    -L"$uprefix/lib" -L"$acme/lib" -L/usr/local/cuda/lib64/stubs \
    -lkiln -lkiln-kernels -lacme-kernels -lcuda
  local lazy
  lazy=$(lazy_libs "$(ls "$tmp"/kiln-*/bin/kiln)")
  { ldd "$tmp"/kiln-*/bin/kiln "$tmp"/kiln-*/lib/libkiln.so "$CARRY/bin/kiln_gpu_tests" \
    "$CARRY/bin/kiln_node_process" \
    "$CARRY/bin/zstd" $lazy | awk '/=> \// {print $3}'; for l in $lazy; do echo "$l"; done; } | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libkiln|libkiln-kernels)\.so' |
    while read -r lib; do cp -L "$lib" "$CARRY/syslib/"; done
  rm -rf "$tmp"
  du -sh "$CARRY" "$CARRY"/*
}

run() {
  local out=${OUT:-/tmp/kiln-gpu-out}
  mkdir -p "$out"
  local root=$PWD prefix
  prefix=$(mktemp -d /tmp/kiln-release-XXXXXX)
  LD_LIBRARY_PATH="$root/$CARRY/syslib" "$CARRY/bin/zstd" -dc "$CARRY"/pkg/kiln-*.tar.zst |
    tar -xf - -C "$prefix" || { echo "cannot unpack the tarball" >&2; return 1; }
  local tree
  tree=$(echo "$prefix"/kiln-*)
  # System libraries only; libkiln comes from the tarball (RUNPATH $ORIGIN/../lib).
  local env_clean=(env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$root/$CARRY/syslib")
  local rc=0 log="$out/release-check.log"
  step() {  # step TITLE CMD...: runs CMD with a clean environment, logs it, remembers a failure
    local title=$1
    shift
    echo "--- $title" | tee -a "$log"
    "${env_clean[@]}" "$@" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "FAILED: $title" | tee -a "$log"; }
  }
  {
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
    echo "tarball unpacked at $tree"
  } 2>&1 | tee "$log"
  step "kiln doctor --require-gpu" "$tree/bin/kiln" doctor --require-gpu
  # The tarball and the wheels whose targets run on CC 9.0 (sm_90a, compute_80) are compatible;
  # a wheel built for another major (sm_80) must be refused as unsupported (exit 5).
  step "kiln compat --device auto (tarball, sm_90a and compute_80 wheels)" "$tree/bin/kiln" compat \
    --device auto "$CARRY"/pkg/kiln-*.tar.zst "$CARRY"/pkg/*_sm90a-*.whl "$CARRY"/pkg/*_compute80-*.whl
  echo "--- kiln compat --device auto (sm_80 wheel): expect exit 5" | tee -a "$log"
  "${env_clean[@]}" "$tree/bin/kiln" compat --device auto "$CARRY"/pkg/*_sm80-*.whl >>"$log" 2>&1
  local st=$?
  echo "exit $st" | tee -a "$log"
  [ "$st" = 5 ] || { rc=1; echo "FAILED: the sm_80 wheel on CC 9.0 gave exit $st, not 5" | tee -a "$log"; }
  step "kiln resolve --device auto --explain" "$tree/bin/kiln" resolve axpy_dtype_f32 \
    --device auto --explain
  # Every specialisation against its CPU reference, libkiln and store from the tarball.
  "${env_clean[@]}" LD_LIBRARY_PATH="$tree/lib:$root/$CARRY/syslib" \
    KILN_TEST_GPU_STORE="$tree/share/kiln/artifacts" \
    "$CARRY/bin/kiln_gpu_tests" --gtest_filter='Registry/EverySpecialisation.*' \
    --gtest_output="xml:$out/release-gpu-tests.xml" 2>&1 | tee "$out/release-gpu-tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
  # packages: acme-kernels and the reference package in one process, each from its own store.
  echo "--- packages: acme_demo --require-gpu (acme-kernels + kiln-kernels in one process)" |
    tee -a "$log"
  "${env_clean[@]}" LD_LIBRARY_PATH="$tree/lib:$root/$CARRY/acme/lib:$root/$CARRY/syslib" \
    "$root/$CARRY/acme/bin/acme_demo" --require-gpu 2>&1 | tee "$out/packages.log" | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "FAILED: packages" | tee -a "$log"; }
  grep -q "scale_dtype_f32 from $root/$CARRY/acme/share/kiln/artifacts/acme-kernels-" \
    "$out/packages.log" || { rc=1; echo "FAILED: packages: acme's kernel not from its store" | tee -a "$log"; }
  tier_cases "$tree" "$out" || rc=1
  python_case "$out" || rc=1
  toolkit_cases "$tree" "$out" || rc=1
  # many-processes: 64 processes x 8 threads on one empty cache, pinned mirror then TUF.
  echo "--- many-processes: tests/node/many_processes.sh (64 x 8, real driver)" | tee -a "$log"
  LD_LIBRARY_PATH="$root/$CARRY/syslib" bash tests/node/many_processes.sh "$tree/bin/kiln" \
    "$root/$CARRY/bin/kiln_node_process" "$root/$CARRY/mirror" "$out/many-processes" 2>&1 |
    tail -n 5 | tee -a "$log"
  [ "${PIPESTATUS[0]}" = 0 ] || { rc=1; echo "FAILED: many-processes" | tee -a "$log"; }
  echo "release check exit: $rc" | tee -a "$out/release-check.log"
  return $rc
}

# serve VAR DIR LOG: a static file server on loopback over DIR, each request logged to LOG; its
# URL is put in VAR (not printed: a command substitution would run it in a subshell).
serve() {
  local var=$1 dir=$2 log=$3 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$dir" >/dev/null 2>"$log" &
  SERVERS+=($!)
  for _ in $(seq 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" 2>/dev/null && break
    sleep 0.1
  done
  printf -v "$var" 'http://127.0.0.1:%s' "$port"
}
gets() { grep -c "\"GET /$2 " "$1" || true; }  # gets LOG FILE: how many GETs of FILE

tier_cases() {
  local tree=$1 out=$2 root=$PWD rc=0 work
  work=$(mktemp -d /tmp/kiln-tiers-XXXXXX)
  SERVERS=()
  local version index pin mirror=$root/$CARRY/mirror
  index=$(cd "$mirror" && ls kiln-kernels-*-index.json | head -n 1)
  version=${index#kiln-kernels-}
  version=${version%-index.json}
  pin=$(sha256sum "$mirror/$index" | cut -d' ' -f1)
  local chosen_file
  # The sm_90a archive of the newest toolkit: what the loader fetches on the GPU machine's driver
  # (580 or newer: it runs every toolkit of the release; the toolkits case checks the driver).
  chosen_file=$(cd "$mirror" && ls kiln-kernels-"$version"-cuda*-sm_90a.tar.zst | sort -V | tail -n 1)
  # An empty node: the unpacked tarball without the store beside libkiln.
  local bare=$work/bare
  cp -a "$tree" "$bare"
  rm -rf "$bare/share/kiln/artifacts"
  local tests=$root/$CARRY/bin/kiln_gpu_tests log=$out/release-tiers.log
  : >"$log"
  # case NAME LIBDIR EXPECTED_ORIGIN_PREFIX ENV...: one run of ReleaseFromEnvironment.
  case_run() {
    local name=$1 libdir=$2 origin=$3
    shift 3
    echo "--- case $name: $*" | tee -a "$log"
    env -i PATH=/usr/bin:/bin HOME="$work/home-$name" LD_LIBRARY_PATH="$libdir:$root/$CARRY/syslib" \
      KILN_TEST_RELEASE_ENV=1 KILN_TEST_RELEASE_ORIGINS="$work/origins-$name" "$@" \
      "$tests" --gtest_filter='ReleaseFromEnvironment.*' >"$out/case-$name.log" 2>&1
    local st=$?
    tail -n 3 "$out/case-$name.log" | tee -a "$log"
    if [ $st != 0 ]; then
      echo "FAILED: case $name (exit $st, see case-$name.log)" | tee -a "$log"
      return 1
    fi
    if [ -n "$origin" ] && [ -s "$work/origins-$name" ]; then
      local wrong
      wrong=$(awk -v p="$origin" 'index($2, p) != 1' "$work/origins-$name" | head -n 3)
      if [ -n "$wrong" ]; then
        echo "FAILED: case $name loaded from elsewhere than $origin: $wrong" | tee -a "$log"
        return 1
      fi
      echo "case $name: every specialisation loaded from $origin*" | tee -a "$log"
    fi
    return 0
  }
  check() {  # check DESCRIPTION COMMAND...: a post-condition of a case
    if "${@:2}"; then echo "ok: $1" | tee -a "$log"; else echo "FAILED: $1" | tee -a "$log"; rc=1; fi
  }

  # store: nothing but the tarball. A store written less than 3 s before is not recorded
  # (kRecordSettledNs, core/store/scan_record.hpp), hence the wait: the case keeps the store's scan
  # record in its cache.
  sleep 3.1
  case_run store "$tree/lib" "$tree/share/kiln/artifacts" || rc=1
  # store-record: a second process with the same cache, which takes the store's listing and the
  # manifest's layout from that record instead of listing and checking every artifact.
  check "the store case kept a scan record" \
    test -n "$(ls "$work/home-store/.cache/kiln/scan" 2>/dev/null)"
  case_run store-record "$tree/lib" "$tree/share/kiln/artifacts" HOME="$work/home-store" || rc=1

  # mirror: an empty node, one pinned loopback mirror of release/mirror.
  local url1
  serve url1 "$mirror" "$work/mirror1.log"
  case_run mirror "$bare/lib" "$work/cache-mirror" KILN_MIRRORS="$url1" KILN_INDEX_SHA256="$pin" \
    KILN_CACHE_DIR="$work/cache-mirror" || rc=1
  check "mirror: one GET of $chosen_file (got $(gets "$work/mirror1.log" "$chosen_file"))" \
    test "$(gets "$work/mirror1.log" "$chosen_file")" = 1
  check "mirror: no other archive downloaded" \
    test "$(grep -c '"GET /kiln-kernels-.*\.tar\.zst' "$work/mirror1.log")" = 1

  # tampered: the chosen archive altered on the first mirror; a good second mirror.
  local bad=$work/mirror-bad
  cp -r "$mirror" "$bad"
  printf 'X' | dd of="$bad/$chosen_file" bs=1 seek=4096 conv=notrunc status=none
  local url_bad
  serve url_bad "$bad" "$work/mirror-bad.log"
  case_run tampered "$bare/lib" "$work/cache-tampered" KILN_MIRRORS="$url_bad $url1" \
    KILN_INDEX_SHA256="$pin" KILN_CACHE_DIR="$work/cache-tampered" KILN_LOG=info \
    KILN_LOG_FILE="$out/tampered-loader.log" || rc=1
  check "tampered: the first mirror ($url_bad) is named in the log" \
    grep -q "$url_bad.*$chosen_file\|$chosen_file.*$url_bad" "$out/tampered-loader.log"
  grep -i "mismatch\|distrust" "$out/tampered-loader.log" | head -n 3 | tee -a "$log"

  # ranks: 8 processes at once on one empty cache directory, a fresh server log.
  local url_r
  serve url_r "$mirror" "$work/mirror-ranks.log"
  echo "--- case ranks: 8 processes, KILN_MIRRORS=$url_r, one cache" | tee -a "$log"
  local pids=() i fails=0
  for i in 1 2 3 4 5 6 7 8; do
    env -i PATH=/usr/bin:/bin HOME="$work/home-ranks" LD_LIBRARY_PATH="$bare/lib:$root/$CARRY/syslib" \
      KILN_TEST_RELEASE_ENV=1 KILN_MIRRORS="$url_r" KILN_INDEX_SHA256="$pin" \
      KILN_CACHE_DIR="$work/cache-ranks" "$tests" --gtest_filter='ReleaseFromEnvironment.*' \
      >"$out/case-ranks-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || fails=$((fails + 1)); done
  check "ranks: all 8 processes correct ($fails failed)" test "$fails" = 0
  check "ranks: one GET of $chosen_file (got $(gets "$work/mirror-ranks.log" "$chosen_file"))" \
    test "$(gets "$work/mirror-ranks.log" "$chosen_file")" = 1

  # jit: offline and empty, NVRTC from the machine's CUDA toolkit.
  case_run jit "$bare/lib" "jit:" KILN_OFFLINE=1 KILN_CACHE_DIR="$work/cache-jit" || rc=1

  # nojit: offline, empty, JIT disabled: not-found, with advice naming a target the release has.
  case_run nojit "$bare/lib" "" KILN_OFFLINE=1 KILN_DISABLE_JIT=1 \
    KILN_CACHE_DIR="$work/cache-nojit" KILN_TEST_RELEASE_EXPECT=not-found || rc=1
  grep -m1 -A0 "to get it" "$out/case-nojit.log" | tee -a "$log"
  check "nojit: the advice names sm_90a, an archive of this release" \
    grep -q "to get it.*sm_90a" "$out/case-nojit.log"

  # stale: the shipped store as an older release would have installed it: every manifest
  # claiming package version 0.0.9, and each entry named after it (the store rule: a directory
  # whose name differs from its manifest is refused as malformed, before any version check).
  local stale=$work/store-stale
  cp -r "$tree/share/kiln/artifacts" "$stale"
  chmod -R u+w "$stale"
  for m in "$stale"/*/manifest.json; do
    sed -i "s/\"package_version\": *\"$version\"/\"package_version\": \"0.0.9\"/" "$m"
    local d
    d=$(dirname "$m")
    mv "$d" "${d/kiln-kernels-$version-/kiln-kernels-0.0.9-}"
  done
  case_run stale "$bare/lib" "" KILN_ARTIFACT_PATH="$stale" KILN_OFFLINE=1 KILN_DISABLE_JIT=1 \
    KILN_CACHE_DIR="$work/cache-stale" KILN_TEST_RELEASE_EXPECT=stale || rc=1
  check "stale: package_version and both values named" \
    grep -q "package_version differs: archive has 0.0.9, this loader.s package kiln-kernels is $version" "$out/case-stale.log"

  # corrupt: the shipped store with one byte of every artifact altered.
  local corrupt=$work/store-corrupt
  cp -r "$tree/share/kiln/artifacts" "$corrupt"
  chmod -R u+w "$corrupt"
  find "$corrupt" -type f ! -name manifest.json | while read -r f; do
    printf 'X' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
  done
  case_run corrupt "$bare/lib" "" KILN_ARTIFACT_PATH="$corrupt" KILN_OFFLINE=1 KILN_DISABLE_JIT=1 \
    KILN_CACHE_DIR="$work/cache-corrupt" KILN_TEST_RELEASE_EXPECT=integrity || rc=1
  check "corrupt: both digests named" grep -q "sha256 is [0-9a-f]\{64\}, manifest says [0-9a-f]\{64\}" \
    "$out/case-corrupt.log"

  # two-packages: a C program, kiln-kernels and acme-kernels each from its own plain mirror
  # under its own pin (kiln_config.index_sha256), on a node with neither store.
  local acme_mirror=$root/$CARRY/acme-mirror acme_bare=$work/acme-bare acme_index acme_pin url_k url_a
  acme_index=$(cd "$acme_mirror" && ls acme-kernels-*-index.json | head -n 1)
  acme_pin=$(sha256sum "$acme_mirror/$acme_index" | cut -d' ' -f1)
  cp -a "$root/$CARRY/acme" "$acme_bare"
  rm -rf "$acme_bare/share/kiln/artifacts"
  serve url_k "$mirror" "$work/mirror-two-kiln.log"
  serve url_a "$acme_mirror" "$work/mirror-two-acme.log"
  echo "--- case two-packages: two_packages $url_k $url_a" | tee -a "$log"
  env -i PATH=/usr/bin:/bin HOME="$work/home-two" \
    LD_LIBRARY_PATH="$bare/lib:$acme_bare/lib:$root/$CARRY/syslib" \
    "$root/$CARRY/bin/two_packages" "$url_k" "$pin" "$url_a" "$acme_pin" "$work/cache-two" \
    2>&1 | tee "$out/case-two-packages.log" | tee -a "$log"
  check "two-packages: both results right" test "${PIPESTATUS[0]}" = 0
  check "two-packages: one archive from each mirror" \
    test "$(grep -c '"GET /kiln-kernels-.*\.tar\.zst' "$work/mirror-two-kiln.log")" = 1 -a \
    "$(grep -c '"GET /acme-kernels-.*\.tar\.zst' "$work/mirror-two-acme.log")" = 1

  for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null; done
  cp "$work"/mirror*.log "$out/" 2>/dev/null
  echo "tier cases exit: $rc" | tee -a "$log"
  return $rc
}

# python: the wheels ci/release.sh published (the kiln runtime, kiln-kernels' package and
# target wheels) and acme's own, pip-installed into a fresh venv of the node's python3 (which
# holds torch, CuPy and numpy) from that directory alone: every reference op against NumPy, the
# torch custom ops, Loader.launch, the JIT tier, acme beside kiln-kernels
# (tests/gpu/python_ops_check.py); then the launch benchmark in the same venv.
python_case() {
  local out=$1 root=$PWD wheels venv
  wheels=$(mktemp -d /tmp/kiln-wheels-XXXXXX)
  venv=$(mktemp -d /tmp/kiln-venv-XXXXXX)/venv
  cp "$root/$CARRY"/pkg/*.whl "$root/$CARRY"/acme-wheels/*.whl "$wheels/"
  echo "--- python: tests/gpu/python_ops_check.py --wheels $wheels" | tee -a "$out/release-check.log"
  (cd /tmp && LD_LIBRARY_PATH="$root/$CARRY/syslib" python3 "$root/tests/gpu/python_ops_check.py" \
    --wheels "$wheels" --keep "$venv") 2>&1 | tee "$out/python.log" | tee -a "$out/release-check.log"
  local st=${PIPESTATUS[0]}
  # docs/python.md, every ```python block as written, in the same venv.
  echo "--- python: tests/gpu/python_doc_check.py docs/python.md" | tee -a "$out/release-check.log"
  (cd /tmp && LD_LIBRARY_PATH="$root/$CARRY/syslib" "$venv/bin/python" \
    "$root/tests/gpu/python_doc_check.py" "$root/docs/python.md") 2>&1 |
    tee "$out/python-doc.log" | tee -a "$out/release-check.log"
  [ "${PIPESTATUS[0]}" = 0 ] || st=1
  echo "--- python: bench/python_launch_bench.py" | tee -a "$out/release-check.log"
  (cd /tmp && LD_LIBRARY_PATH="$root/$CARRY/syslib" "$venv/bin/python" \
    "$root/bench/python_launch_bench.py") 2>&1 | tee "$out/python-bench.log" | tee -a "$out/release-check.log"
  [ "$st" = 0 ] || { echo "FAILED: python (exit $st)" | tee -a "$out/release-check.log"; return 1; }
}

# toolkits: each toolkit's archives alone (tarball store, wheels), then the driver's choice
# with both present (the header above).
toolkit_cases() {
  local tree=$1 out=$2 root=$PWD rc=0 work log=$out/release-toolkits.log
  work=$(mktemp -d /tmp/kiln-toolkits-XXXXXX)
  : >"$log"
  local store_all=$tree/share/kiln/artifacts tests=$root/$CARRY/bin/kiln_gpu_tests
  local bare=$work/bare version toolkits driver
  cp -a "$tree" "$bare"
  rm -rf "$bare/share/kiln/artifacts"
  version=$(cd "$store_all" && ls -d kiln-kernels-*-cuda*-* | head -n 1 | sed 's/^kiln-kernels-\(.*\)-cuda.*/\1/')
  toolkits=$(cd "$store_all" && ls -d kiln-kernels-"$version"-cuda*-* | sed 's/.*-cuda\([0-9.]*\)-.*/\1/' | sort -u)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
  echo "--- toolkits: $(echo $toolkits) in the tarball's store; driver $driver" | tee -a "$log"
  tk_check() {  # tk_check DESCRIPTION COMMAND...
    if "${@:2}"; then echo "ok: $1" | tee -a "$log"; else echo "FAILED: $1" | tee -a "$log"; rc=1; fi
  }
  tk_check "the release holds two toolkits or more" test "$(echo "$toolkits" | wc -l)" -ge 2
  tk_check "the driver is 580 or newer (runs CUDA 13.0)" test "${driver%%.*}" -ge 580
  # tk_run NAME STORE ORIGIN: every specialisation through the loader from STORE alone (offline,
  # no JIT), each loaded from a path starting with ORIGIN.
  tk_run() {
    local name=$1 store=$2 origin=$3
    echo "--- toolkits case $name: KILN_ARTIFACT_PATH=$store" | tee -a "$log"
    env -i PATH=/usr/bin:/bin HOME="$work/home-$name" LD_LIBRARY_PATH="$bare/lib:$root/$CARRY/syslib" \
      KILN_TEST_RELEASE_ENV=1 KILN_TEST_RELEASE_ORIGINS="$work/origins-$name" \
      KILN_ARTIFACT_PATH="$store" KILN_OFFLINE=1 KILN_DISABLE_JIT=1 KILN_CACHE_DIR="$work/cache-$name" \
      "$tests" --gtest_filter='ReleaseFromEnvironment.*' >"$out/toolkits-$name.log" 2>&1
    tk_check "$name: every specialisation correct (exit $?)" test $? = 0
    tk_check "$name: origins recorded" test -s "$work/origins-$name"
    local wrong
    wrong=$(awk -v p="$origin" 'index($2, p) != 1' "$work/origins-$name" | head -n 3)
    tk_check "$name: every specialisation loaded from $origin*${wrong:+ (not: $wrong)}" test -z "$wrong"
  }
  local tk major wheels venv
  for tk in $toolkits; do
    # The tarball's store with only this toolkit's archives (and the package's description).
    mkdir -p "$work/store-$tk"
    cp -r "$store_all"/kiln-kernels-"$version"-cuda"$tk"-* "$work/store-$tk/"
    cp "$store_all"/*.package.json "$work/store-$tk/" 2>/dev/null
    tk_run "cuda$tk-only" "$work/store-$tk" "$work/store-$tk/kiln-kernels-$version-cuda$tk-"
    # The wheels without the other toolkits' target wheels, in a fresh venv.
    major=${tk%%.*}
    wheels=$(mktemp -d /tmp/kiln-wheels-cu"$major"-XXXXXX)
    venv=$(mktemp -d /tmp/kiln-venv-cu"$major"-XXXXXX)/venv
    cp "$root/$CARRY"/pkg/kiln-*.whl "$root/$CARRY"/pkg/kiln_kernels-*.whl \
      "$root/$CARRY"/pkg/kiln_kernels_cu"$major"_*.whl "$wheels/"
    echo "--- toolkits: python with the cu$major wheels alone ($wheels)" | tee -a "$log"
    (cd /tmp && LD_LIBRARY_PATH="$root/$CARRY/syslib" python3 "$root/tests/gpu/python_ops_check.py" \
      --wheels "$wheels" --keep "$venv") >"$out/toolkits-python-cu$major.log" 2>&1
    tk_check "python cu$major alone: every op correct (exit $?)" test $? = 0
    tk_check "python cu$major alone: loaded from the cuda$tk archive" \
      grep -q "kiln-kernels-$version-cuda$tk-" "$out/toolkits-python-cu$major.log"
  done
  # Both present, on this driver: the newest toolkit it runs, 13.0.
  tk_run both "$store_all" "$store_all/kiln-kernels-$version-cuda13.0-"
  "${env_clean[@]}" "$tree/bin/kiln" resolve axpy_dtype_f32 --device auto --explain \
    >"$out/toolkits-resolve.log" 2>&1
  tk_check "resolve --explain on this driver chooses cuda13.0" \
    grep -q "kiln-kernels-$version-cuda13.0-sm_90a" "$out/toolkits-resolve.log"
  tk_check "python with every wheel loaded from the cuda13.0 archive" \
    grep -q "kiln-kernels-$version-cuda13.0-" "$out/python.log"
  echo "toolkit cases exit: $rc" | tee -a "$log"
  cat "$log" >>"$out/release-check.log"
  return $rc
}

case "${1:-}" in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: $0 prepare RELEASE_MIRROR BUILD_DIR | run" >&2; exit 2 ;;
esac
