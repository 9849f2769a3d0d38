#!/usr/bin/env bash
# Installs every dependency kiln needs from Debian packages. Idempotent; silent when all is
# present. The CUDA toolkit is not a Debian package here: it must be at /usr/local/cuda or
# $CUDA_HOME.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git
  libcurl4-openssl-dev libssl-dev libzstd-dev libarchive-dev
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  # tests: real servers on loopback, CA made with openssl, wheels checked with python
  nginx-light openssl curl ca-certificates python3 python3-venv zstd
  # the optional sccache-dist test: its build server sandboxes compiles with bubblewrap
  bubblewrap
  # fuzzing (scripts/fuzz.sh): clang 14 and its libFuzzer/sanitizer runtimes; the release's
  # tarballs (scripts/toolchain.sh gnu): that clang with lld and LLVM's ar, ranlib and strip
  clang libclang-rt-14-dev lld-14 llvm-14
  # the TUF conformance suite runs expiry tests under faketime (scripts/tuf_conformance.sh)
  faketime
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "bootstrap: error: the CUDA toolkit was not found: no nvcc at $cuda/bin/nvcc." >&2
  echo "bootstrap: install CUDA 13 at /usr/local/cuda, or set CUDA_HOME to its prefix." >&2
  exit 5
fi
for tool in ptxas fatbinary nvlink; do
  if [ ! -x "$cuda/bin/$tool" ]; then
    echo "bootstrap: error: $cuda/bin/$tool is missing; the CUDA toolkit at $cuda is incomplete." >&2
    exit 5
  fi
done
