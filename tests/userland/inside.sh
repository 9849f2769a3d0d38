#!/bin/bash
# The part of the foreign-userland smoke that runs inside a userland (scripts/userland_smoke.sh
# copies this folder, the release's mirror directory, cuda.h and the stand-in driver's source to
# /kiln-smoke there and runs this script through scripts/foreign_userland.sh run). Every step
# prints what it runs; the first failure stops it with the step's name and exit status.
#   SMOKE_NAME   the userland's name, for the messages
#   SMOKE_CLIENT cmake | pkg-config | none: how the C and C++ clients are built against the
#                tarball (none: no client). The stand-in driver is built wherever there is a
#                compiler. The C++ client gets one kernel from a loopback HTTP server over the
#                mirror directory, through the userland's libcurl.
#   SMOKE_CLI    1: also run the tarball's kiln --version, doctor, verify, install, compat, and
#                kiln build with no CUDA toolkit (its message)
set -uo pipefail
cd /kiln-smoke || { echo "userland smoke: no /kiln-smoke here" >&2; exit 1; }
name="${SMOKE_NAME:-userland}"
mirror=/kiln-smoke/mirror
export KILN_CACHE_DIR=/tmp/kiln-cache
t_start=$(date +%s)

step() { printf '\n=== [%s] %s\n' "$name" "$*"; }
fail() { echo "userland smoke [$name]: FAILED: $*" >&2; exit 1; }
run() {  # run COMMAND...: prints and runs it; a non-zero exit fails the smoke
  echo "+ $*"
  "$@" || fail "'$*' exited $?"
}
expect() {  # expect STATUS TEXT COMMAND...: the command exits STATUS and prints TEXT
  local want="$1" text="$2" out st
  shift 2
  echo "+ $*"
  out="$("$@" 2>&1)"
  st=$?
  printf '%s\n' "$out"
  [ "$st" = "$want" ] || fail "'$*' exited $st, expected $want"
  printf '%s' "$out" | grep -qF -- "$text" || fail "'$*' did not print '$text'"
}

step "the userland"
run uname -m
ldd --version | head -n 1
python3 --version

if command -v cc >/dev/null; then
  step "the stand-in driver (bench/stand_in_libcuda.c, compute capability 9.0), built here"
  mkdir -p /kiln-smoke/driver
  run cc -shared -fPIC -O1 -I /kiln-smoke/cuda -o /kiln-smoke/driver/libcuda.so.1 stand_in_libcuda.c
  driver_env=(env LD_LIBRARY_PATH=/kiln-smoke/driver)
fi

step "the runtime and data wheels from the mirror directory, into a fresh venv"
run python3 -m venv /tmp/venv
py=/tmp/venv/bin/python
pyver="$($py -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
pip_install=("$py" -m pip install --disable-pip-version-check --no-index --find-links "$mirror")
if $py -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  run "${pip_install[@]}" kiln "kiln-kernels[cu13-sm90a]"
  step "python -m kiln doctor"
  if [ -n "${driver_env+x}" ]; then
    expect 0 "ok: loading can work here" "${driver_env[@]}" "$py" -m kiln doctor
  else
    # No compiler here (CI's small userland), so no stand-in driver: the doctor must still
    # answer, naming the missing driver.
    expect 5 "driver: not available" "$py" -m kiln doctor
  fi
  step "kiln.load(\"kiln-kernels\").resolve(uri, cc=90) for every URI"
  run "$py" python_check.py
else
  # Python 3.9 is not supported (docs/userlands.md): there is no runtime wheel for it, and pip says so.
  expect 1 "No matching distribution found for kiln" "${pip_install[@]}" kiln
  echo "Python $pyver: the runtime wheel is not offered to it, as docs/userlands.md says"
fi

if [ "$SMOKE_CLIENT" != none ] || [ "${SMOKE_CLI:-0}" = 1 ]; then
  step "the kiln tarball for $(uname -m)"
  tarball="$(ls "$mirror"/kiln-*-linux-"$(uname -m)".tar.zst 2>/dev/null | head -n 1)"
  [ -n "$tarball" ] || fail "the mirror directory has no kiln tarball for $(uname -m) (kiln-*-linux-$(uname -m).tar.zst)"
  run tar --zstd -xf "$tarball" -C /tmp
  prefix="$(ls -d /tmp/kiln-*-linux-"$(uname -m)")"
  echo "unpacked: $prefix"
fi

case "$SMOKE_CLIENT" in
cmake)
  step "a C client and a C++ client built with find_package(kiln) against the tarball"
  run cmake -S /kiln-smoke -B /tmp/client -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
  run cmake --build /tmp/client
  client=/tmp/client/userland_client
  cpp_client=/tmp/client/userland_cpp_client
  ;;
pkg-config)
  step "a C client built with pkg-config against the tarball"
  flags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs kiln)" ||
    fail "pkg-config found no kiln in $prefix/lib/pkgconfig"
  read -ra flags <<<"$flags"
  run cc -O1 -o /tmp/userland_client client.c "${flags[@]}"
  run c++ -std=c++17 -O1 -o /tmp/userland_cpp_client client.cpp "${flags[@]}"
  client=/tmp/userland_client
  cpp_client=/tmp/userland_cpp_client
  ;;
none) ;;
*) fail "SMOKE_CLIENT must be cmake, pkg-config or none, not '$SMOKE_CLIENT'" ;;
esac
if [ "$SMOKE_CLIENT" != none ]; then
  step "the C client through the stand-in driver (offline, no JIT: the tarball's store serves)"
  expect 0 "userland client: ok" "${driver_env[@]}" "$client"

  step "the C++ client (g++'s ABI): one kernel from the mirror over HTTP, through this userland's libcurl"
  index="$(ls "$mirror"/kiln-kernels-*-index.json)"
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  python3 -m http.server --bind 127.0.0.1 --directory "$mirror" "$port" >/tmp/http.log 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null' EXIT  # a failing step exits: the server must not outlive it
  for _ in $(seq 50); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" 2>/dev/null && break
    sleep 0.2
  done
  expect 0 "userland C++ client: ok" "${driver_env[@]}" "$cpp_client" "http://127.0.0.1:$port" \
    "$(sha256sum "$index" | cut -c1-64)" /tmp/kiln-cpp-cache
  kill "$server"
  trap - EXIT
fi

if [ "${SMOKE_CLI:-0}" = 1 ]; then
  kiln="$prefix/bin/kiln"
  index="$(ls "$mirror"/kiln-kernels-*-index.json)"
  step "the tarball's kiln: doctor, verify, install, compat"
  run "$kiln" --version
  expect 0 "ok: loading can work here" "${driver_env[@]}" "$kiln" doctor
  run "$kiln" verify "$index"
  run "$kiln" install "$index" --dest /tmp/store
  ls /tmp/store
  run "$kiln" verify /tmp/store
  run "$kiln" compat --device sm_90 "$index" /tmp/store "$tarball"
  step "the tarball's kiln build with no CUDA toolkit here: it says what it looked for, and where"
  # The userland has no CUDA toolkit (an aarch64 host needs one for aarch64: the tarball's
  # README says so); the build must stop before compiling anything, naming the places it looked.
  run cp -r /kiln-smoke/project /tmp/project
  expect 5 "no CUDA toolkit found: looked for nvcc in" env -u CUDA_HOME PATH=/usr/bin:/bin \
    "$kiln" build --source /tmp/project --targets sm_90a --out /tmp/project-build
  run test -f "$prefix/share/doc/kiln/README.md"
  grep -F "aarch64" "$prefix/share/doc/kiln/README.md" | head -n 3
fi

printf '\nuserland smoke [%s]: passed in %d s\n' "$name" $(($(date +%s) - t_start))
