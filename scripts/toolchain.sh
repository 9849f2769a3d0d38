#!/usr/bin/env bash
# The pinned toolchain that builds what kiln ships for a glibc floor (default 2.28, manylinux_2_28)
# on x86_64 and aarch64 from this x86_64 machine (docs/wheels.md "manylinux_2_28 and aarch64";
# docs/decisions.md "Host builds for a glibc floor: zig and static dependencies"):
#   zig           PyPI's ziglang 0.17.0 (sha256-pinned wheel): `zig cc` / `zig c++ -target
#                 <arch>-linux-gnu.<glibc>` compiles and links against that glibc's symbols, on
#                 either architecture, with LLVM's libc++ linked statically
#   OpenSSL       libcrypto 3.0.22 (Debian bookworm-security's orig tarball), static, for the floor
#   zstd          libzstd 1.5.4 (Debian bookworm's orig tarball), static, for the floor
#   Debian debs   bookworm's libcurl and libarchive (the target architecture's: headers, and the
#                 libraries whose SONAME libkiln dlopens, never linked into a wheel), nlohmann-json
#                 and CLI11 (headers only), each pinned by sha256
#   a CMake toolchain file that builds with all of the above and nothing of the build machine
#   but the CUDA headers (/usr/local/cuda/include or $CUDA_HOME/include: the same on every host)
#   scripts/toolchain.sh ARCH [GLIBC]    ARCH: x86_64 | aarch64; GLIBC: 2.28 (default)
# Prints the toolchain file's path.
#   scripts/toolchain.sh gnu ARCH
# The toolchain of the kiln tarballs, whose C++ API must link with g++ (docs/decisions.md, "The
# kiln tarballs: clang over Debian bullseye's sysroot"): Debian's clang and lld (clang-14, lld-14,
# llvm-14: scripts/bootstrap.sh) with a sysroot of Debian bullseye's debs for ARCH (glibc 2.31,
# GCC 10's libstdc++, linked dynamically as every g++ program links it), the same static OpenSSL
# and zstd built by that compiler, and bullseye's libcurl and libarchive. Binaries need glibc
# 2.31 and GLIBCXX_3.4.28 (GCC 10) or older. Prefix <ARCH>-linux-gnu.2.31-gnu/. Prints the
# toolchain file's path.
#   scripts/toolchain.sh python ARCH PYTHON
# Prints an include directory of PYTHON's headers (PYTHON: an interpreter of the build machine)
# for ARCH: the interpreter's own for x86_64; for aarch64 the same headers with the pyconfig.h
# an aarch64 build of that Python has: Python's headers are the same on both architectures but
# for pyconfig.h, whose aarch64 lines are written by a rule (aarch64_pyconfig below) that is
# checked, before its first use, to turn Debian bookworm's amd64 pyconfig.h of 3.11 into
# Debian's arm64 one byte for byte. Everything lands in $KILN_TOOLCHAIN_DIR (default
# ~/.cache/kiln-toolchain): downloads/ (checked against their pins on every run), zig-0.17.0/,
# zig-cache/, <ARCH>-linux-gnu.<GLIBC>/ (the prefix: bin/ the compiler wrappers, lib/ include/
# the static libraries, sysroot/ the debs, toolchain.cmake). A prefix is built once: a second run
# whose recipe (the compiler, the pinned sources and debs, the build options: `recipe` below) is
# unchanged only checks the downloads and prints the path; a change to how a prefix is laid out
# needs `rm -rf` of it.
# KILN_TOOLCHAIN_JOBS: parallel jobs for the dependency builds (default 2).
set -euo pipefail
mode=prefix
kind=zig
if [ "${1:-}" = gnu ]; then
  [ $# -eq 2 ] || { echo "usage: $0 gnu x86_64|aarch64" >&2; exit 2; }
  kind=gnu
  set -- "$2" 2.31
elif [ "${1:-}" = python ]; then
  [ $# -eq 3 ] || { echo "usage: $0 python x86_64|aarch64 PYTHON" >&2; exit 2; }
  mode=python python_exe="$3"
  shift
  set -- "$1"
fi
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 x86_64|aarch64 [GLIBC]" >&2; exit 2; }
arch="$1"
glibc="${2:-2.28}"
case "$arch" in
  x86_64) deb_arch=amd64 ossl_target=linux-x86_64 ;;
  aarch64) deb_arch=arm64 ossl_target=linux-aarch64 ;;
  *) echo "$0: unknown architecture '$arch' (x86_64 or aarch64)" >&2; exit 2 ;;
esac
[[ "$glibc" =~ ^2\.[0-9]+$ ]] || { echo "$0: GLIBC must read 2.N, not '$glibc'" >&2; exit 2; }
root="${KILN_TOOLCHAIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln-toolchain}"
jobs="${KILN_TOOLCHAIN_JOBS:-2}"
mkdir -p "$root/downloads"
root="$(cd "$root" && pwd)"
say() { echo "toolchain.sh: $*" >&2; }

# --- Pins. Debian's archive (deb.debian.org) serves the orig tarballs and debs; the sha256 of
# the debs are those of Debian's own package indexes (apt-cache show), the tarballs' those of
# their .dsc (Checksums-Sha256).
zig_version=0.17.0
zig_sha256_x86_64=97079827064a7492cce5541ceb438ae8003ce1e54e399676da2d62fb7a5dc08b
zig_sha256_aarch64=d2804f94f54f7fcf8169f4b212a619ad688a4e2e6592e976f0cf2e58e2cd8af3
deb=http://deb.debian.org/debian/pool/main
sec=http://deb.debian.org/debian-security/pool/updates/main
openssl_version=3.0.22
openssl_url=$sec/o/openssl/openssl_3.0.22.orig.tar.gz
openssl_sha256=67ebca7e50d17383028045486653492195b83db95f8558709701bb47b5c1ef81
zstd_version=1.5.4
zstd_url=$deb/libz/libzstd/libzstd_1.5.4+dfsg2.orig.tar.xz
zstd_sha256=8cf4bbb65e77ec348d052c8d6230eba66d435bddf64c8b5be2fcb16880c19953
# url sha256, per Debian architecture (amd64 | arm64 | all)
debs_amd64=(
  "$deb/c/curl/libcurl4_7.88.1-10+deb12u15_amd64.deb 3042904de01f9c4fbdcf1452b8f81abedcf2b015f9b9deba109063322b5bd68b"
  "$deb/c/curl/libcurl4-openssl-dev_7.88.1-10+deb12u15_amd64.deb dbd69b15ecb49331f53fbc3483b0508997e2fab551e48c53951391f254b73890"
  "$sec/liba/libarchive/libarchive13_3.6.2-1+deb12u5_amd64.deb 45419b8c7646c1af12783ae31906ce2da4c465c1a948b01f8f44152d8269f403"
  "$sec/liba/libarchive/libarchive-dev_3.6.2-1+deb12u5_amd64.deb e8dbaf0d7d2f385063531832e4e97bbcd439c5ea2178806772be48645276135a"
)
debs_arm64=(
  "$deb/c/curl/libcurl4_7.88.1-10+deb12u15_arm64.deb e54bdd269c960b643ded903c3dbde36fe5d4d5f5b6389b47a0344d4a711cf70a"
  "$deb/c/curl/libcurl4-openssl-dev_7.88.1-10+deb12u15_arm64.deb b64c072a4cf1a5bbf2e7ced12564c73ce4ba6810c7e1de4c861c46c7d5eae6b0"
  "$sec/liba/libarchive/libarchive13_3.6.2-1+deb12u5_arm64.deb 0be76b2a5c9f1ff3f97ed44731175a5bf69fe0b89a8ebfb3cee7ad77777ee918"
  "$sec/liba/libarchive/libarchive-dev_3.6.2-1+deb12u5_arm64.deb adc6f82f1baedf7b6a49961fd62a626ec453f4b812a7de605c9f198c9fc74462"
)
debs_all=(
  "$deb/n/nlohmann-json3/nlohmann-json3-dev_3.11.2-2_all.deb ec57940def6b6186c30be0e0ee81d1e58f86d11a54a145b28686a1e3e4aae801"
  "$deb/c/cli11/libcli11-dev_2.1.2+ds-1_all.deb f1f6ee9ec053e0e0bcec47345e241b6a8ee006321248b4329e9ce88d2b4b64a8"
)
# The gnu kind's sysroot: Debian bullseye (glibc 2.31, GCC 10.2), per architecture, from its last
# point release (11.11; the security archive serves the later updates for amd64 only).
bdeb=http://deb.debian.org/debian/pool/main
gnu_debs_amd64=(
  "$bdeb/g/glibc/libc6_2.31-13+deb11u11_amd64.deb 05f7264da867b37f4c5ce49266b558ea1e81e05a9464f623152fca70f3550282"
  "$bdeb/g/glibc/libc6-dev_2.31-13+deb11u11_amd64.deb e7f7b45d9c5cfcf37609f0b6efd3c645272c812144703af89dfd32218fcb0fd3"
  "$bdeb/l/linux/linux-libc-dev_5.10.223-1_amd64.deb e3be603bd12377bb90fcfb0f2048ca3a81c886e49d6f09945b82159d1c54f7b2"
  "$bdeb/g/gcc-10/libgcc-10-dev_10.2.1-6_amd64.deb 3b711374092b84e732c4e73cf33e02cff02e34a5f105eb6467de8d9038e4cd9d"
  "$bdeb/g/gcc-10/libgcc-s1_10.2.1-6_amd64.deb e478f2709d8474165bb664de42e16950c391f30eaa55bc9b3573281d83a29daf"
  "$bdeb/g/gcc-10/libstdc++-10-dev_10.2.1-6_amd64.deb 20b1f56863dcc5f187d6cb53b2aa6149bd013be4ec67e10c2c31a22fda619a01"
  "$bdeb/g/gcc-10/libstdc++6_10.2.1-6_amd64.deb 5c155c58935870bf3b4bfe769116841c0d286a74f59eccfd5645693ac23f06b1"
  "$bdeb/c/curl/libcurl4_7.74.0-1.3+deb11u13_amd64.deb a8e9795ec5045e54866af3640c1f2abcf07ad2a56ecd0efa25fe57342ab34ebf"
  "$bdeb/c/curl/libcurl4-openssl-dev_7.74.0-1.3+deb11u13_amd64.deb 86abdc60d860a1856b2e6491f6b9f3726370de334dcc66946a3d211c242f5447"
  "$bdeb/liba/libarchive/libarchive13_3.4.3-2+deb11u1_amd64.deb 42530f8ae7e5787bd6d269cda49b651c6920db0b18844d71fc960b12cc271259"
  "$bdeb/liba/libarchive/libarchive-dev_3.4.3-2+deb11u1_amd64.deb 01c4dcfdac3848d54bac1ab4e6ab1e0327947b10bb8300abbd7b83c2cad8f2b6"
)
gnu_debs_arm64=(
  "$bdeb/g/glibc/libc6_2.31-13+deb11u11_arm64.deb baaa9aa184e2f21738c5819055e6740cc5b22f198e3f416e33f82b40ff6933d8"
  "$bdeb/g/glibc/libc6-dev_2.31-13+deb11u11_arm64.deb 28d478134722dcd4b0bd2045a199301d18713bf95947b9fce66634e7aeacab2e"
  "$bdeb/l/linux/linux-libc-dev_5.10.223-1_arm64.deb 8b6374a64412d33eac61d74f77b8f932da4b8a707ea8a614791e2a35b8917618"
  "$bdeb/g/gcc-10/libgcc-10-dev_10.2.1-6_arm64.deb 80fc73d339ada2e194175afe83cd89014565242153b6e3c2128849d8817da367"
  "$bdeb/g/gcc-10/libgcc-s1_10.2.1-6_arm64.deb e2fcdb378d3c1ad1bcb64d4fb6b37aab44011152beca12a4944f435a2582df1f"
  "$bdeb/g/gcc-10/libstdc++-10-dev_10.2.1-6_arm64.deb cee7ca63613b50a8a51cc670db385c7e6d1181b72c94148fc8b7992e4570782d"
  "$bdeb/g/gcc-10/libstdc++6_10.2.1-6_arm64.deb 7869aa540cc46e9f3d4267d5bde2af0e5b429a820c1d6f1a4cfccfe788c31890"
  "$bdeb/c/curl/libcurl4_7.74.0-1.3+deb11u13_arm64.deb 2698696bdd6a3ebecb81e3cb4ad3518580dc138d7f4cf7d3d96a750f7abf1a7f"
  "$bdeb/c/curl/libcurl4-openssl-dev_7.74.0-1.3+deb11u13_arm64.deb 5ee4867df77480fbe16220e0a6867d4f9e705491ccaa8ff9b11c22bae2161469"
  "$bdeb/liba/libarchive/libarchive13_3.4.3-2+deb11u1_arm64.deb 20ac2c3a178375fd35d17d1621f387461fe530d593970d505985fa4b229df760"
  "$bdeb/liba/libarchive/libarchive-dev_3.4.3-2+deb11u1_arm64.deb 087d515211017dc5e2a8865572d676387d8fd188607760c3102cdc05190605ad"
)
# Debian's LLVM 14, which the gnu kind compiles and links with.
gnu_clang=clang-14 gnu_clangxx=clang++-14 gnu_lld=ld.lld-14 gnu_ar=llvm-ar-14 gnu_ranlib=llvm-ranlib-14

# fetch URL SHA256: the file in downloads/, downloaded once and checked against its pin always.
fetch() {
  local url="$1" want="$2" file
  file="$root/downloads/$(basename "$url")"
  if [ ! -f "$file" ]; then
    say "downloading $url"
    curl -fsSL --retry 3 -o "$file.part" "$url" || { rm -f "$file.part"; say "error: cannot download $url"; exit 1; }
    mv "$file.part" "$file"
  fi
  local got
  got="$(sha256sum "$file" | cut -c1-64)"
  if [ "$got" != "$want" ]; then
    rm -f "$file"
    say "error: $url has sha256 $got, pinned $want (removed; a rerun downloads it again)"
    exit 1
  fi
  echo "$file"
}

# --- Python headers for an architecture.
pydeb_amd64="$sec/p/python3.11/libpython3.11-dev_3.11.2-6+deb12u9_amd64.deb e9b4cc9172df9536f6bd637a69886ccccd18e7c648a89bed565a748affeef6d6"
pydeb_arm64="$sec/p/python3.11/libpython3.11-dev_3.11.2-6+deb12u9_arm64.deb fb34da3be5eb345a6a34c5a7ef760a33ff22054d46b8906b81b2fa8e80c26a7f"
# What an aarch64 build of CPython's configure decides differently from an x86_64 one: no x86
# inline assembly, wchar_t unsigned (so usable as Py_UNICODE), PEP 11 tier 2. Every other line
# (sizes, alignments, byte order, the functions glibc has) is the same on both LP64 Linuxes.
aarch64_pyconfig() {
  sed -e 's|^#define HAVE_GCC_ASM_FOR_X64 1$|/* #undef HAVE_GCC_ASM_FOR_X64 */|' \
      -e 's|^#define HAVE_GCC_ASM_FOR_X87 1$|/* #undef HAVE_GCC_ASM_FOR_X87 */|' \
      -e 's|^/\* #undef HAVE_USABLE_WCHAR_T \*/$|#define HAVE_USABLE_WCHAR_T 1|' \
      -e 's|^#define PY_SUPPORT_TIER 1$|#define PY_SUPPORT_TIER 2|' "$1"
}
if [ "$mode" = python ]; then
  read -r pyver pyinc < <("$python_exe" -c 'import sys, sysconfig; print("%d.%d" % sys.version_info[:2], sysconfig.get_paths()["include"])') ||
    { say "error: cannot run $python_exe"; exit 1; }
  [ -f "$pyinc/Python.h" ] && [ -f "$pyinc/pyconfig.h" ] ||
    { say "error: $python_exe ($pyver) has no headers in $pyinc (Python.h, pyconfig.h)"; exit 1; }
  if [ "$arch" = x86_64 ] && [ "$(uname -m)" = x86_64 ]; then
    echo "$pyinc"
    exit 0
  fi
  [ "$arch" = aarch64 ] && [ "$(uname -m)" = x86_64 ] ||
    { say "error: headers for $arch from a $(uname -m) build machine are not written down"; exit 1; }
  checked="$root/python/aarch64-pyconfig-rule.ok"
  if [ ! -f "$checked" ] || [ "$(cat "$checked")" != "$(sha256sum "$0" | cut -c1-64)" ]; then
    t="$(mktemp -d)"
    dpkg-deb -x "$(fetch $pydeb_amd64)" "$t/amd64"
    dpkg-deb -x "$(fetch $pydeb_arm64)" "$t/arm64"
    if ! aarch64_pyconfig "$t/amd64/usr/include/x86_64-linux-gnu/python3.11/pyconfig.h" |
        cmp -s - "$t/arm64/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h"; then
      say "error: the aarch64 pyconfig.h rule no longer turns Debian's amd64 3.11 pyconfig.h into its arm64 one:"
      aarch64_pyconfig "$t/amd64/usr/include/x86_64-linux-gnu/python3.11/pyconfig.h" |
        diff - "$t/arm64/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h" >&2 || true
      rm -rf "$t"
      exit 1
    fi
    rm -rf "$t"
    mkdir -p "$root/python"
    sha256sum "$0" | cut -c1-64 >"$checked"
  fi
  # One directory per (architecture, interpreter version, its pyconfig.h): the headers copied.
  key="$(cat "$pyinc/pyconfig.h" "$pyinc/patchlevel.h" | sha256sum | cut -c1-16)"
  dir="$root/python/aarch64/$pyver-$key/include/python$pyver"
  if [ ! -f "$dir/pyconfig.h" ]; then
    rm -rf "$dir.part"
    mkdir -p "$(dirname "$dir")"
    cp -r "$pyinc" "$dir.part"
    aarch64_pyconfig "$pyinc/pyconfig.h" >"$dir.part/pyconfig.h"
    mv "$dir.part" "$dir"
  fi
  echo "$dir"
  exit 0
fi

# --- zig from PyPI: the wheel of the build machine's architecture, unzipped (the zig kind).
compiler_id=""
if [ "$kind" = zig ]; then
host="$(uname -m)"
zig_pin_var="zig_sha256_$host"
[ -n "${!zig_pin_var:-}" ] || { say "error: no pinned ziglang wheel for a $host build machine"; exit 1; }
zig_dir="$root/zig-$zig_version"
zig="$zig_dir/ziglang/zig"
if [ ! -x "$zig" ]; then
  say "ziglang $zig_version from PyPI"
  # pip from a venv of its own: Debian's python3 has no pip module without python3-pip.
  [ -x "$root/pip-venv/bin/python" ] || python3 -m venv "$root/pip-venv"
  "$root/pip-venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --dest "$root/downloads" "ziglang==$zig_version" >&2
  shopt -s nullglob
  whl=("$root"/downloads/ziglang-"$zig_version"-*"$host".whl)
  shopt -u nullglob
  [ ${#whl[@]} -eq 1 ] || { say "error: pip left ${#whl[@]} ziglang wheels for $host"; exit 1; }
  [ "$(sha256sum "${whl[0]}" | cut -c1-64)" = "${!zig_pin_var}" ] ||
    { rm -f "${whl[0]}"; say "error: ${whl[0]} does not match its pinned sha256"; exit 1; }
  rm -rf "$zig_dir.part"
  python3 -m zipfile -e "${whl[0]}" "$zig_dir.part"
  chmod +x "$zig_dir.part/ziglang/zig"
  mv "$zig_dir.part" "$zig_dir"
fi
[ "$("$zig" version)" = "$zig_version" ] || { say "error: $zig is not zig $zig_version"; exit 1; }
compiler_id="zig $zig_version"
else
  # The gnu kind: Debian's LLVM, by the names its packages give it.
  for t in "$gnu_clang" "$gnu_clangxx" "$gnu_lld" "$gnu_ar" "$gnu_ranlib"; do
    command -v "$t" >/dev/null ||
      { say "error: no $t on PATH (Debian packages clang-14, lld-14 and llvm-14; scripts/bootstrap.sh installs them)"; exit 1; }
  done
  compiler_id="$("$gnu_clang" --version | head -n 1)"
fi

# --- The prefix of (arch, glibc[, kind]).
triple="$arch-linux-gnu"
prefix="$root/$triple.$glibc"
[ "$kind" = gnu ] && prefix="$root/$triple.$glibc-gnu"
toolchain="$prefix/toolchain.cmake"
# What the prefix's libraries are built from; a change of any of it rebuilds the prefix.
ossl_options=(no-shared no-module no-engine no-legacy no-tests no-comp no-ui-console no-afalgeng
  no-dso)
lib_cflags="-O2 -fPIC"
debs_var="debs_$deb_arch[@]"
[ "$kind" = gnu ] && debs_var="gnu_debs_$deb_arch[@]"
# Downloads are checked on every run, so a changed pin or a corrupted cache never goes unnoticed.
ossl_tgz="$(fetch "$openssl_url" "$openssl_sha256")"
zstd_txz="$(fetch "$zstd_url" "$zstd_sha256")"
deb_files=()
for entry in "${!debs_var}" "${debs_all[@]}"; do
  deb_files+=("$(fetch ${entry})")
done
recipe="$(printf '%s\n' "$kind: $compiler_id" "$openssl_sha256 ${ossl_options[*]}" "$zstd_sha256" \
  "$lib_cflags" "${deb_files[@]}" | sha256sum | cut -c1-64)"

# FILE.part replaces FILE only when they differ: an unchanged compiler or toolchain file keeps its
# time, so neither ccache (which knows a compiler by its time) nor CMake sees a new one.
replace_if_changed() {
  if cmp -s "$1.part" "$1"; then rm -f "$1.part"; else mv "$1.part" "$1"; fi
}
# zig keeps a copy of every object it compiles in its local cache: a build names its own
# (ZIG_LOCAL_CACHE_DIR; scripts/build_manylinux_wheel.sh puts it in its build directory), so the
# shared zig-cache/ holds what zig builds once per target (libc++, glibc's stubs) and does not
# grow with every build.
# Compiler wrappers (CMake, OpenSSL's Configure and make each take one program per tool) and the
# toolchain file: written on every run, they cost nothing.
write_wrappers() {
mkdir -p "$prefix/bin"
[ "$kind" = gnu ] && { write_gnu_wrappers; return; }
for tool in cc c++ ar ranlib; do
  case "$tool" in
    cc|c++) cmd="$tool -target $triple.$glibc" ;;
    *) cmd="$tool" ;;
  esac
  cat >"$prefix/bin/$tool.part" <<EOF
#!/bin/sh
# zig $zig_version for $triple, glibc $glibc (scripts/toolchain.sh)
ZIG_GLOBAL_CACHE_DIR="$root/zig-cache" ZIG_LOCAL_CACHE_DIR="\${ZIG_LOCAL_CACHE_DIR:-$root/zig-cache}" exec "$zig" $cmd "\$@"
EOF
  chmod +x "$prefix/bin/$tool.part"
  replace_if_changed "$prefix/bin/$tool"
done
}
# The gnu kind's: clang for the triple over the sysroot, linking with lld (GNU ld reads only
# this machine's architecture), LLVM's ar and ranlib (they read both).
write_gnu_wrappers() {
local tool cmd
for tool in cc c++ ar ranlib; do
  case "$tool" in
    cc) cmd="$(command -v "$gnu_clang") --target=$triple --sysroot=$prefix/sysroot \$link" ;;
    c++) cmd="$(command -v "$gnu_clangxx") --target=$triple --sysroot=$prefix/sysroot \$link" ;;
    ar) cmd="$(command -v "$gnu_ar")" ;;
    ranlib) cmd="$(command -v "$gnu_ranlib")" ;;
  esac
  # The linker is named only where the command links (clang warns of an unused argument, an
  # error under -Werror, where it only compiles).
  cat >"$prefix/bin/$tool.part" <<EOF
#!/bin/sh
# $compiler_id for $triple over Debian bullseye's sysroot: glibc $glibc, GCC 10's libstdc++ (scripts/toolchain.sh gnu)
link="--ld-path=$(command -v "$gnu_lld")"
for a in "\$@"; do case "\$a" in -c|-S|-E) link=""; break ;; esac; done
exec $cmd "\$@"
EOF
  chmod +x "$prefix/bin/$tool.part"
  replace_if_changed "$prefix/bin/$tool"
done
}
cc="$prefix/bin/cc"
sysroot_lib="$prefix/sysroot/usr/lib/$triple"
write_toolchain_file() {
cat >"$toolchain.part" <<EOF
# kiln for $triple, glibc $glibc: $compiler_id ($kind kind) and static dependencies (scripts/toolchain.sh).
# Nothing of the build machine is searched but the CUDA toolkit's headers and, for packages, the
# CMake packages a build names itself (nanobind's, from its Python).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR $arch)
set(CMAKE_LIBRARY_ARCHITECTURE $triple)
set(CMAKE_C_COMPILER "$prefix/bin/cc")
set(CMAKE_CXX_COMPILER "$prefix/bin/c++")
set(CMAKE_AR "$prefix/bin/ar" CACHE FILEPATH "")
set(CMAKE_RANLIB "$prefix/bin/ranlib" CACHE FILEPATH "")
$([ "$kind" = zig ] && echo "set(KILN_GLIBC_FLOOR $glibc)")
set(CMAKE_FIND_ROOT_PATH "$prefix" "$prefix/sysroot")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(OPENSSL_ROOT_DIR "$prefix")
set(OPENSSL_USE_STATIC_LIBS TRUE)
set(OPENSSL_INCLUDE_DIR "$prefix/include" CACHE PATH "")
set(OPENSSL_CRYPTO_LIBRARY "$prefix/lib/libcrypto.a" CACHE FILEPATH "")
set(CURL_INCLUDE_DIR "$prefix/sysroot/usr/include/$triple" CACHE PATH "")
set(CURL_LIBRARY "$sysroot_lib/libcurl.so" CACHE FILEPATH "")
set(ENV{PKG_CONFIG_LIBDIR} "$prefix/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
EOF
replace_if_changed "$toolchain"
}

if [ -f "$prefix/.recipe" ] && [ "$(cat "$prefix/.recipe")" = "$recipe" ]; then
  write_wrappers
  write_toolchain_file
  echo "$toolchain"
  exit 0
fi
say "building the $triple glibc $glibc prefix in $prefix (once; -j$jobs)"
rm -rf "$prefix"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/sysroot" "$prefix/src"
write_wrappers

# The debs: unpacked into sysroot/ (headers, the lazily loaded libraries' files, CMake configs;
# for the gnu kind also glibc, GCC's runtime and libstdc++, which its compiler builds against).
for f in "${deb_files[@]}"; do
  dpkg-deb -x "$f" "$prefix/sysroot"
done
# A deb's absolute symbolic links (libm.so -> /lib/<triple>/libm.so.6) would name the build
# machine's files: each is made relative, inside the sysroot.
while IFS= read -r -d '' link; do
  target="$(readlink "$link")"
  case "$target" in
    /*) ln -sfn "$(realpath -m -s --relative-to="$(dirname "$link")" "$prefix/sysroot$target")" "$link" ;;
  esac
done < <(find "$prefix/sysroot" -type l -print0)

# zstd: the library only (lib/Makefile), static, position-independent.
say "zstd $zstd_version"
tar -xJf "$zstd_txz" -C "$prefix/src"
zsrc="$(echo "$prefix"/src/zstd-*)"
make -C "$zsrc/lib" -j"$jobs" libzstd.a CC="$cc" AR="$prefix/bin/ar" \
  CFLAGS="$lib_cflags" >"$prefix/src/zstd.log" 2>&1 || { tail -30 "$prefix/src/zstd.log" >&2; exit 1; }
cp "$zsrc/lib/libzstd.a" "$prefix/lib/"
cp "$zsrc/lib/zstd.h" "$zsrc/lib/zdict.h" "$zsrc/lib/zstd_errors.h" "$prefix/include/"
cat >"$prefix/lib/pkgconfig/libzstd.pc" <<EOF
prefix=$prefix
Name: zstd
Description: zstd $zstd_version, static, for $triple glibc $glibc (scripts/toolchain.sh)
Version: $zstd_version
Libs: -L\${prefix}/lib -lzstd
Cflags: -I\${prefix}/include
EOF

# OpenSSL: libcrypto only, static; no engines, no loadable modules (nothing dlopened from a
# path of the build machine), the default provider built in.
say "OpenSSL $openssl_version (libcrypto)"
tar -xzf "$ossl_tgz" -C "$prefix/src"
osrc="$prefix/src/openssl-$openssl_version"
(
  cd "$osrc" &&
  ./Configure "$ossl_target" "${ossl_options[@]}" --prefix="$prefix" --libdir=lib \
    --openssldir=/etc/ssl CC="$cc" AR="$prefix/bin/ar" RANLIB="$prefix/bin/ranlib" \
    CFLAGS="$lib_cflags" &&
  make -j"$jobs" build_generated &&
  make -j"$jobs" libcrypto.a
) >"$prefix/src/openssl.log" 2>&1 || { tail -40 "$prefix/src/openssl.log" >&2; exit 1; }
cp "$osrc/libcrypto.a" "$prefix/lib/"
cp -r "$osrc/include/openssl" "$prefix/include/"

# libarchive's .pc names /usr: written here for the sysroot.
sed -e "s|^prefix=.*|prefix=$prefix/sysroot/usr|" "$sysroot_lib/pkgconfig/libarchive.pc" \
  >"$prefix/lib/pkgconfig/libarchive.pc"
write_toolchain_file
echo "$recipe" >"$prefix/.recipe"
say "done: $toolchain"
echo "$toolchain"
