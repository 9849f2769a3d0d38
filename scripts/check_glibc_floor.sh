#!/usr/bin/env bash
# Checks that what kiln ships for a host runs on that host's oldest glibc: every ELF file of an
# install tree, an unpacked tarball or a kiln tarball (.tar.zst) is built for ARCH and asks for
# no glibc symbol version newer than GLIBC, and, with GLIBCXX, no libstdc++ symbol version
# newer than that (3.4.28: GCC 10's libstdc++; docs/release.md, "Tarballs for x86_64 and
# aarch64").
#   scripts/check_glibc_floor.sh TREE|TARBALL ARCH [GLIBC [GLIBCXX]]
#     ARCH x86_64|aarch64, GLIBC 2.28 by default, GLIBCXX none by default
# The versions are those of the dynamic symbol table (`objdump -T` lists the same; readelf reads
# the ELF files of every architecture, objdump only those of this machine's). Prints one line per
# file with its newest GLIBC_ version; exit 1 naming each file and symbol over the floor.
set -euo pipefail
[ $# -ge 2 ] && [ $# -le 4 ] || { echo "usage: $0 TREE|TARBALL x86_64|aarch64 [GLIBC [GLIBCXX]]" >&2; exit 2; }
what="$1"
arch="$2"
floor="${3:-2.28}"
cxx_floor="${4:-}"
case "$arch" in
  x86_64) machine="Advanced Micro Devices X86-64" ;;
  aarch64) machine="AArch64" ;;
  *) echo "$0: unknown architecture '$arch'" >&2; exit 2 ;;
esac
tree="$what"
if [ -f "$what" ]; then
  tree="$(mktemp -d)"
  trap 'rm -rf "$tree"' EXIT
  tar --zstd -xf "$what" -C "$tree"
fi
[ -d "$tree" ] || { echo "$0: $what is neither a directory nor a tarball" >&2; exit 2; }
bad=0
n=0
# over PREFIX FLOOR WHAT SYMBOLS: names each symbol@PREFIX_version over FLOOR (rel: the file).
over() {
  local s v
  while IFS= read -r s; do
    [ -n "$s" ] || continue
    v="${s##*@"$1"_}"
    if [ "$(printf '%s\n%s\n' "$v" "$2" | sort -V | tail -n 1)" != "$2" ]; then
      echo "$0: $rel needs $s, newer than the $3 $2 floor" >&2
      bad=1
    fi
  done <<<"$4"
}
while IFS= read -r -d '' f; do
  [ "$(head -c 4 "$f")" = $'\x7fELF' ] || continue
  n=$((n + 1))
  rel="${f#"$tree"/}"
  got="$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')"
  if [ "$got" != "$machine" ]; then
    echo "$0: $rel is built for '$got', not $arch" >&2
    bad=1
    continue
  fi
  dyn="$(readelf -W --dyn-syms "$f")"
  syms="$(grep -o '[A-Za-z0-9_]*@GLIBC_[0-9.]*' <<<"$dyn" | sort -u || true)"
  newest="$( (grep -o 'GLIBC_[0-9.]*' <<<"$syms" || true) | sed 's/GLIBC_//' | sort -Vu | tail -n 1)"
  line="$rel: $arch, newest glibc symbol version ${newest:-none}"
  over GLIBC "$floor" glibc "$syms"
  if [ -n "$cxx_floor" ]; then
    cxx="$(grep -o '[A-Za-z0-9_]*@GLIBCXX_[0-9.]*' <<<"$dyn" | sort -u || true)"
    newest="$( (grep -o 'GLIBCXX_[0-9.]*' <<<"$cxx" || true) | sed 's/GLIBCXX_//' | sort -Vu | tail -n 1)"
    line="$line, libstdc++ ${newest:-none}"
    over GLIBCXX "$cxx_floor" libstdc++ "$cxx"
  fi
  echo "$line"
done < <(find "$tree" -type f -print0 | sort -z)
[ "$n" -gt 0 ] || { echo "$0: no ELF file in $what" >&2; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "ok: $n ELF files of $what are $arch and need glibc $floor${cxx_floor:+ and libstdc++ GLIBCXX_$cxx_floor} or older"
