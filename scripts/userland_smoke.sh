#!/usr/bin/env bash
# Runs a release where it would run (docs/testing.md, "Foreign userlands"): in Debian userlands
# made by scripts/foreign_userland.sh, with what the release's mirror directory ships for that
# architecture. Inside each (tests/userland/inside.sh does the steps and prints each command):
#   arm64-bookworm (aarch64 under qemu-user, Python 3.11):
#     pip install of the aarch64 runtime wheel and kiln-kernels' wheels (sm_90a) from the mirror
#     directory into a fresh venv (--no-index --find-links), `python -m kiln doctor` (with the
#     stand-in driver: it must say loading can work), kiln.load("kiln-kernels").resolve(uri,
#     cc=90) for every URI (tests/userland/python_check.py), and a C client (tests/userland/
#     client.c) built with pkg-config against the aarch64 tarball, run through the stand-in
#     driver (bench/stand_in_libcuda.c built there) with the JIT and the network off, and a C++
#     client (tests/userland/client.cpp, that userland's g++) that gets a kernel from a loopback
#     HTTP server over the mirror directory through the userland's libcurl; the
#     aarch64 tarball's kiln --version, doctor, verify, install, compat, and `kiln build`, which
#     with no aarch64 CUDA toolkit there must stop naming where it looked
#   amd64-bullseye (x86_64, glibc 2.31, Python 3.9):
#     the same C and C++ clients built with find_package(kiln) against the x86_64 tarball; the tarball's
#     kiln doctor, verify, install, compat and build (as above); and pip's refusal of the runtime wheel for
#     Python 3.9, which kiln does not support (docs/userlands.md)
#
#   scripts/userland_smoke.sh [--quick] [--require-all] [--only NAME] RELEASE
# RELEASE is ci/release.sh's output directory (release/) or its mirror directory.
#   --quick        CI's smoke: only arm64-bookworm, made with python3, python3-venv and zstd (no
#                  compiler: the wheels, the doctor without a driver and the resolve; no C client)
#   --require-all  a userland whose artifacts are missing from RELEASE fails instead of being
#                  skipped (the release's full matrix, scripts/full_check.sh)
#   --only NAME    one userland
# A userland whose architecture has no runtime wheel in RELEASE is skipped with a message naming
# what is missing; one with the wheels but no tarball runs only the Python steps (exit 0 if
# nothing failed). With --require-all both are failures. Exit 1 when a step failed.
# Needs root (scripts/foreign_userland.sh); the userlands are cached as it says
# (KILN_USERLAND_CACHE=off: made fresh, nothing kept).
set -euo pipefail
cd "$(dirname "$0")/.."
me="userland_smoke.sh"

quick=0
require_all=0
only=""
release=""
while [ $# -gt 0 ]; do
  case "$1" in
  --quick) quick=1; shift ;;
  --require-all) require_all=1; shift ;;
  --only) only="$2"; shift 2 ;;
  -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
  -*) echo "$me: unknown option '$1' (see --help)" >&2; exit 2 ;;
  *) release="$1"; shift ;;
  esac
done
[ -n "$release" ] || { echo "usage: $me [--quick] [--require-all] [--only NAME] RELEASE (see --help)" >&2; exit 2; }
mirror="$release"
[ -d "$release/mirror" ] && mirror="$release/mirror"
[ -d "$mirror" ] || { echo "$me: error: $release is not a release directory (no such directory)" >&2; exit 2; }
mirror="$(cd "$mirror" && pwd)"
ls "$mirror"/kiln-kernels-*-index.json >/dev/null 2>&1 ||
  { echo "$me: error: $mirror holds no kiln-kernels-*-index.json: not ci/release.sh's mirror directory" >&2; exit 2; }
cuda_h="${CUDA_HOME:-/usr/local/cuda}/include/cuda.h"

userlands=(arm64-bookworm amd64-bullseye)
[ "$quick" = 1 ] && userlands=(arm64-bookworm)
[ -n "$only" ] && userlands=("$only")

work="${KILN_USERLAND_DIR:-/tmp/kiln-userlands}"
results=()
failed=0
skipped=0
for name in "${userlands[@]}"; do
  t0=$(date +%s)
  case "$name" in
  arm64-bookworm) machine=aarch64; set_=full; client=pkg-config; cli=1 ;;
  amd64-bullseye) machine=x86_64; set_=full; client=cmake; cli=1 ;;
  *) echo "$me: error: unknown userland '$name' (arm64-bookworm or amd64-bullseye)" >&2; exit 2 ;;
  esac
  [ "$quick" = 1 ] && { set_=small; client=none; cli=0; }

  # What this architecture needs from the release: its runtime wheel(s), and its tarball where
  # the C client or the CLI run.
  missing=()
  compgen -G "$mirror/kiln-*_$machine.whl" >/dev/null ||
    missing+=("$machine runtime wheel (kiln-<version>-<python tag>-*_$machine.whl)")
  if [ "$client" != none ] || [ "$cli" = 1 ]; then
    compgen -G "$mirror/kiln-*-linux-$machine.tar.zst" >/dev/null ||
      missing+=("$machine kiln tarball (kiln-<version>-cuda<x.y>-linux-$machine.tar.zst)")
  fi
  if ((${#missing[@]} == 1)) && [[ "${missing[0]}" == *tarball* ]] && [ "$require_all" = 0 ]; then
    # The wheels are there: run the Python steps, leave the C client and the CLI out.
    echo "$me: $name: $mirror has no ${missing[0]}: the C client and the CLI are skipped, the Python steps run" >&2
    results+=("$name: without the tarball's steps (no $machine tarball)")
    skipped=1
    client=none
    cli=0
    missing=()
  fi
  if ((${#missing[@]})); then
    msg="$name: $mirror has no ${missing[0]}"
    ((${#missing[@]} == 1)) || msg="$msg and no ${missing[1]}"
    if [ "$require_all" = 1 ]; then
      echo "$me: FAILED $msg" >&2
      results+=("$name: FAILED (artifacts missing)")
      failed=1
    else
      echo "$me: skipped $msg" >&2
      results+=("$name: skipped (artifacts missing)")
      skipped=1
    fi
    continue
  fi

  echo "=== $name: the userland"
  root="$(scripts/foreign_userland.sh make "$name" --packages "$set_" --dir "$work/$name-$set_" | tail -n 1)"

  # A tarball built for a newer glibc than the userland's cannot run there: say so plainly.
  if [ "$client" != none ] || [ "$cli" = 1 ]; then
    tb="$(ls "$mirror"/kiln-*-linux-"$machine".tar.zst | head -n 1)"
    have="$(scripts/foreign_userland.sh run "$root" ldd --version)"
    have="$(printf '%s\n' "$have" | sed -n '1s/.* \([0-9]*\.[0-9]*\)$/\1/p')"
    tmp="$(mktemp -d)"
    tar --zstd -xf "$tb" -C "$tmp"
    need="$(find "$tmp" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec readelf -W --dyn-syms {} + 2>/dev/null |
      grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n 1)"
    rm -rf "$tmp"
    if [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | tail -n 1)" != "$have" ]; then
      echo "$me: FAILED $name: $(basename "$tb") needs glibc $need (GLIBC_$need symbols), the userland has $have: it was not built for an older glibc floor" >&2
      results+=("$name: FAILED (the tarball needs glibc $need, the userland has $have)")
      failed=1
      continue
    fi
  fi

  echo "=== $name: copying the release's mirror directory and the smoke into $root/kiln-smoke"
  rm -rf "$root/kiln-smoke"
  mkdir -p "$root/kiln-smoke/mirror" "$root/kiln-smoke/cuda"
  find "$mirror" -maxdepth 1 -type f \( -name '*.whl' -o -name '*.json' -o -name '*.tar.zst' \) \
    -exec cp {} "$root/kiln-smoke/mirror/" \;
  cp tests/userland/inside.sh tests/userland/python_check.py tests/userland/client.c \
    tests/userland/client.cpp tests/userland/CMakeLists.txt bench/stand_in_libcuda.c \
    "$root/kiln-smoke/"
  # A kernel project for the tarball's `kiln build`, which must say no CUDA toolkit is there.
  cp -r examples/acme-kernels "$root/kiln-smoke/project"
  if [ "$set_" = full ]; then  # the stand-in driver is built where there is a compiler
    [ -f "$cuda_h" ] || { echo "$me: error: no cuda.h at $cuda_h (the stand-in driver needs it; set CUDA_HOME)" >&2; exit 2; }
    cp "$cuda_h" "$root/kiln-smoke/cuda/"
  fi
  if scripts/foreign_userland.sh run "$root" env SMOKE_NAME="$name" SMOKE_CLIENT="$client" \
    SMOKE_CLI="$cli" /bin/bash /kiln-smoke/inside.sh; then
    results+=("$name: passed in $(($(date +%s) - t0)) s")
  else
    results+=("$name: FAILED after $(($(date +%s) - t0)) s")
    failed=1
  fi
done

echo
for r in "${results[@]}"; do echo "$me: $r"; done
[ "$failed" = 0 ] || exit 1
[ "$skipped" = 0 ] || echo "$me: passed, with the skips above"
