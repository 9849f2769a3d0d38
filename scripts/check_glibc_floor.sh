#!/usr/bin/env bash
# Checks that what kiln ships for a host runs on that host's oldest glibc: every ELF file of an
# install tree, an unpacked tarball or a kiln tarball (.tar.zst) is built for ARCH and asks for
# no glibc symbol version newer than GLIBC (docs/release.md, "Tarballs for x86_64 and aarch64").
#   scripts/check_glibc_floor.sh TREE|TARBALL ARCH [GLIBC]     ARCH x86_64|aarch64, GLIBC 2.28
# The versions are those of the dynamic symbol table (`objdump -T` lists the same; readelf reads
# the ELF files of every architecture, objdump only those of this machine's). Prints one line per
# file with its newest GLIBC_ version; exit 1 naming each file and symbol over the floor.
set -euo pipefail
[ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 TREE|TARBALL x86_64|aarch64 [GLIBC]" >&2; exit 2; }
what="$1"
arch="$2"
floor="${3:-2.28}"
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
  syms="$(readelf -W --dyn-syms "$f" | grep -o '[A-Za-z0-9_]*@GLIBC_[0-9.]*' | sort -u || true)"
  newest="$( (grep -o 'GLIBC_[0-9.]*' <<<"$syms" || true) | sed 's/GLIBC_//' | sort -Vu | tail -n 1)"
  echo "$rel: $arch, newest glibc symbol version ${newest:-none}"
  while IFS= read -r s; do
    [ -n "$s" ] || continue
    v="${s##*@GLIBC_}"
    if [ "$(printf '%s\n%s\n' "$v" "$floor" | sort -V | tail -n 1)" != "$floor" ]; then
      echo "$0: $rel needs $s, newer than the glibc $floor floor" >&2
      bad=1
    fi
  done <<<"$syms"
done < <(find "$tree" -type f -print0 | sort -z)
[ "$n" -gt 0 ] || { echo "$0: no ELF file in $what" >&2; exit 1; }
[ "$bad" = 0 ] || exit 1
echo "ok: $n ELF files of $what are $arch and need glibc $floor or older"
