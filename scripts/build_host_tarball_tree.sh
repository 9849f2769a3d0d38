#!/usr/bin/env bash
# Builds kiln's install tree for one host with the tarballs' toolchain (`scripts/toolchain.sh gnu`:
# clang over Debian bullseye's sysroot, so glibc 2.31 and GCC 10's libstdc++, the C++ ABI every
# g++ of those distributions and later links with): libkiln, libkiln-kernels, the CMake package,
# kiln.pc, the headers and the `kiln` CLI, installed stripped into PREFIX, ready for `kiln tarball
# --prefix PREFIX` (ci/release.sh packs kiln-<version>-cuda<M.m>-linux-ARCH.tar.zst from it;
# docs/release.md, "Tarballs for x86_64 and aarch64"). Then scripts/check_glibc_floor.sh checks
# every binary of the tree against the floor (glibc 2.31, GLIBCXX_3.4.28) and the architecture.
#   scripts/build_host_tarball_tree.sh PREFIX ARCH HOST_KILN
#     ARCH       x86_64 | aarch64
#     HOST_KILN  a kiln of this machine built from the same sources: it writes the reference
#                package's description (`kiln package-source`), which the tree's own kiln
#                cannot do where it cannot run (aarch64 on an x86_64 machine)
# The CMake build directory is build/host-tree/ARCH-gnu (reused: a second run compiles only what
# changed); CMAKE_ARGS is passed on (ccache).
# libcurl and libarchive are not in the tree: libkiln opens them on first use, and the CLI links
# libarchive.so.13 (the SONAME of every libarchive since 3.0: Debian's libarchive13, RHEL's
# libarchive) and opens libcurl.so.4 on first use, like the build machine's kiln.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -eq 3 ] || { echo "usage: $0 PREFIX x86_64|aarch64 HOST_KILN" >&2; exit 2; }
prefix="$1"
arch="$2"
host_kiln="$(cd "$(dirname "$3")" && pwd)/$(basename "$3")"
case "$arch" in x86_64|aarch64) ;; *) echo "$0: unknown architecture '$arch' (x86_64 or aarch64)" >&2; exit 2 ;; esac
[ -x "$host_kiln" ] || { echo "$0: $3 is not an executable kiln of this machine" >&2; exit 2; }

# A strip that reads both architectures' ELF files (binutils' strip reads only this machine's):
# LLVM's, which the fuzz targets' clang brings (scripts/bootstrap.sh).
strip_tool=""
for s in llvm-strip llvm-strip-14 /usr/lib/llvm-*/bin/llvm-strip; do
  if command -v "$s" >/dev/null 2>&1; then strip_tool="$(command -v "$s")"; break; fi
done
[ -n "$strip_tool" ] || { echo "$0: no llvm-strip (Debian package llvm; scripts/bootstrap.sh installs clang, which brings it)" >&2; exit 1; }

toolchain="$("$repo/scripts/toolchain.sh" gnu "$arch")"
build_dir="$repo/build/host-tree/$arch-gnu"
mkdir -p "$build_dir"
# shellcheck disable=SC2086 # CMAKE_ARGS is a list of words, as scikit-build-core reads it
cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
  -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_LIBDIR=lib -DKILN_HOST_KILN="$host_kiln" -DCMAKE_STRIP="$strip_tool" \
  ${CMAKE_ARGS:-} >/dev/null
ninja -C "$build_dir" kiln_cli libkiln kiln_kernels
rm -rf "$prefix"
cmake --install "$build_dir" --prefix "$prefix" --strip >/dev/null
"$repo/scripts/check_glibc_floor.sh" "$prefix" "$arch" 2.31 3.4.28
echo "$prefix"
