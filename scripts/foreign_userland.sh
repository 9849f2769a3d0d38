#!/usr/bin/env bash
# Makes, caches and enters the Debian userlands where kiln's release is proven to run
# (docs/testing.md, "Foreign userlands"; scripts/userland_smoke.sh runs the release in them):
#   arm64-bookworm   Debian 12 for aarch64 (glibc 2.36), run through qemu-user (binfmt_misc)
#   amd64-bullseye   Debian 11 for x86_64 (glibc 2.31, Python 3.9), run natively
# Each is `debootstrap --variant=minbase` of a pinned suite with python3, python3-venv, gcc, g++,
# make, cmake, pkg-config, zstd, libarchive13 and libcurl4. The `--packages small` set (python3,
# python3-venv, zstd; CI's smoke) is unpacked, not configured: no maintainer script runs, so an
# arm64 one is made without emulating anything (see make_userland).
#
#   scripts/foreign_userland.sh make NAME [--packages full|small] [--dir DIR]
#       makes the userland in DIR (default: $KILN_USERLAND_DIR or /tmp/kiln-userlands, as
#       NAME or NAME-small) and prints DIR's path last. A tarball of the fresh root file system
#       is kept in $KILN_USERLAND_CACHE (default ~/.cache/kiln/userlands) under a name keyed by
#       the suite, the architecture, the mirror and the package list; the next `make` of the
#       same key unpacks it (seconds) instead of running debootstrap (minutes).
#       KILN_USERLAND_CACHE=off makes it fresh and keeps nothing (CI: nothing cached across runs).
#   scripts/foreign_userland.sh run ROOT COMMAND...
#       runs COMMAND inside ROOT (chroot, in a mount namespace of its own with /proc, /dev and
#       /tmp as a fresh tmpfs; everything it mounts ends with it), as root, with a plain PATH.
#   scripts/foreign_userland.sh qemu
#       makes sure the kernel runs aarch64 programs (binfmt_misc through qemu-user-static).
#
# Why binfmt_misc and not `qemu-aarch64-static -L ROOT prog`: the second stage of debootstrap,
# dpkg's maintainer scripts, pip, gcc and cmake all start other programs, and only the kernel's
# binfmt_misc hands every exec of an aarch64 ELF to qemu; qemu-user run by hand emulates only the
# first process. The handler is registered with the F flag (the kernel opens the interpreter at
# registration), so nothing of qemu has to be copied into the userland.
# Needs root (debootstrap, chroot, mount); Debian packages debootstrap and qemu-user-static are
# installed when missing. KILN_DEBIAN_MIRROR overrides the mirror (default deb.debian.org).
set -euo pipefail

me="foreign_userland.sh"
die() { echo "$me: error: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }

suite_of() {
  case "$1" in
  arm64-bookworm) echo "arm64 bookworm" ;;
  amd64-bullseye) echo "amd64 bullseye" ;;
  *) die "unknown userland '$1' (arm64-bookworm or amd64-bullseye)" ;;
  esac
}

need_root() {
  [ "$(id -u)" = 0 ] || die "$1 needs root (debootstrap, chroot and mount do); run it as root or under sudo"
}

host_packages() {  # installs the Debian packages this script needs on the host
  local missing=() p
  for p in debootstrap qemu-user-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing ${missing[*]} (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

ensure_qemu() {
  need_root "running aarch64 programs"
  host_packages
  local bm=/proc/sys/fs/binfmt_misc
  if [ ! -e "$bm/register" ]; then
    say "mounting binfmt_misc at $bm"
    mount -t binfmt_misc binfmt_misc "$bm" ||
      die "binfmt_misc cannot be mounted here, so aarch64 programs cannot run (a container needs the privilege to mount it)"
  fi
  if [ ! -e "$bm/qemu-aarch64" ]; then
    local conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    [ -f "$conf" ] || die "$conf is missing: the qemu-user-static package did not install its binfmt entry"
    say "registering qemu-aarch64 with binfmt_misc from $conf"
    cat "$conf" > "$bm/register" || die "could not register $conf with binfmt_misc"
  fi
  grep -q '^enabled' "$bm/qemu-aarch64" || die "the binfmt_misc entry qemu-aarch64 is disabled ($bm/qemu-aarch64)"
  grep -q '^flags:.*F' "$bm/qemu-aarch64" ||
    die "the binfmt_misc entry qemu-aarch64 lacks the F flag, so it cannot run inside a chroot; remove it (echo -1 > $bm/qemu-aarch64) and run again"
}

packages_for() {  # SET: the packages beside minbase
  case "$1" in
  # libarchive13 and libcurl4: what the tarball's kiln and libkiln open when they unpack an
  # archive or reach a mirror (docs/release.md, "Runtime needs"); the same names in both suites.
  full) echo "python3,python3-venv,gcc,g++,make,cmake,pkg-config,zstd,libarchive13,libcurl4" ;;
  small) echo "python3,python3-venv,zstd" ;;
  *) die "unknown package set '$1' (full or small)" ;;
  esac
}

run_in() {  # ROOT COMMAND...: COMMAND inside ROOT, in a mount namespace of its own
  local root="$1"
  shift
  [ -x "$root/bin/sh" ] || die "$root is not a userland made by this script (no /bin/sh)"
  unshare --mount --propagation private -- /bin/sh -ec '
    root="$1"; shift
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/tmp"
    exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  ' run_in "$root" "$@"
}

make_userland() {
  local name="$1" set="$2" dir="$3"
  need_root "making a userland"
  host_packages
  local arch suite
  read -r arch suite <<<"$(suite_of "$name")"
  [ "$arch" = arm64 ] && ensure_qemu
  local mirror="${KILN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  local include
  include="$(packages_for "$set")"
  local key
  key="$(printf '%s\n' "$arch" "$suite" minbase "$mirror" "$include" | sha256sum | cut -c1-16)"
  local cache="${KILN_USERLAND_CACHE:-$HOME/.cache/kiln/userlands}"
  local tarball="$cache/$name-$set-$key.tar.zst"
  local t0
  t0=$(date +%s)

  rm -rf "$dir"
  mkdir -p "$dir"
  if [ "$cache" != off ] && [ -f "$tarball" ]; then
    say "unpacking the cached $name ($include) from $tarball"
    tar --zstd -xf "$tarball" -C "$dir" --numeric-owner
    say "$name ready in $(($(date +%s) - t0)) s (cached): $dir"
  else
    local foreign=()
    [ "$arch" = "$(dpkg --print-architecture)" ] || foreign=(--foreign)
    # The small set is only unpacked: debootstrap's first stage (downloads, checked against the
    # suite's signed Release file), then every package extracted here, natively, with dpkg-deb;
    # no maintainer script runs, so nothing is emulated. Minutes less under qemu, and enough for
    # an interpreter, venv and pip; the full set is a configured system.
    [ "$set" = small ] && foreign=(--foreign)
    say "debootstrap --variant=minbase --arch=$arch ${foreign[*]} --include=$include $suite $dir $mirror"
    debootstrap --variant=minbase --arch="$arch" "${foreign[@]}" --include="$include" \
      "$suite" "$dir" "$mirror" > "$dir.debootstrap.log" 2>&1 ||
      { tail -n 30 "$dir.debootstrap.log" >&2; die "debootstrap of $name failed (whole log: $dir.debootstrap.log)"; }
    if [ "$set" = small ]; then
      say "unpacking the packages of $name without configuring them (dpkg-deb -x, natively)"
      local _pkg deb n=0
      while read -r _pkg deb; do
        dpkg-deb -x "$dir/$deb" "$dir" || die "dpkg-deb -x $deb failed"
        n=$((n + 1))
      done < "$dir/debootstrap/debpaths"
      say "$n packages unpacked"
      rm -rf "$dir/debootstrap"
    elif ((${#foreign[@]})); then
      say "second stage of debootstrap inside $name (under qemu-aarch64)"
      unshare --mount --propagation private -- /bin/sh -ec '
        mount -t proc proc "$1/proc"; mount --rbind /dev "$1/dev"
        exec chroot "$1" /debootstrap/debootstrap --second-stage' sh "$dir" \
        >> "$dir.debootstrap.log" 2>&1 ||
        { tail -n 30 "$dir.debootstrap.log" >&2; die "the second stage of debootstrap of $name failed (whole log: $dir.debootstrap.log)"; }
    fi
    # What a pip install without a network needs: nothing but the packages; drop apt's caches.
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    local made=$(($(date +%s) - t0))
    say "$name made in $made s, $(du -sm "$dir" | cut -f1) MB: $dir"
    if [ "$cache" != off ]; then
      mkdir -p "$cache"
      tar --zstd -cf "$tarball.tmp" -C "$dir" --numeric-owner . && mv "$tarball.tmp" "$tarball"
      say "cached as $tarball ($(du -m "$tarball" | cut -f1) MB)"
    fi
  fi
  echo "$dir"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
make)
  [ $# -ge 1 ] || die "usage: $me make NAME [--packages full|small] [--dir DIR]"
  name="$1"
  shift
  set_="full"
  dir=""
  while [ $# -gt 0 ]; do
    case "$1" in
    --packages) set_="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) die "unknown argument '$1'" ;;
    esac
  done
  suite_of "$name" >/dev/null
  packages_for "$set_" >/dev/null
  if [ -z "$dir" ]; then
    dir="${KILN_USERLAND_DIR:-/tmp/kiln-userlands}/$name"
    [ "$set_" = full ] || dir="$dir-$set_"
  fi
  make_userland "$name" "$set_" "$dir"
  ;;
run)
  [ $# -ge 2 ] || die "usage: $me run ROOT COMMAND..."
  need_root "entering a userland"
  root="$1"
  shift
  if [ -e "$root/lib/ld-linux-aarch64.so.1" ] && [ "$(uname -m)" != aarch64 ]; then ensure_qemu; fi
  run_in "$root" "$@"
  ;;
qemu) ensure_qemu ;;
*) sed -n '2,27p' "$0"; exit 2 ;;
esac
