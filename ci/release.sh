#!/usr/bin/env bash
# kiln's release pipeline (the main job) from a fresh checkout:
#   build kiln -> archives + index -> verify -> tarball -> wheels -> runtime wheel -> staged
#   mirror -> mirror verify -> compat -> TUF
# Everything lands under release/ (or $KILN_RELEASE_DIR):
#   release/stage/    the kiln install tree packed into the tarball (bin, lib, include, lib/cmake)
#   release/dist/     index, one archive per target, the kiln tarballs (linux-x86_64 and
#                     linux-aarch64, glibc 2.31: --tarball-arches), one wheel per target, the
#                     package's own wheel (kiln_kernels-<version>-py3-none-any.whl) and the kiln
#                     runtime wheels, manylinux_2_28 for x86_64 and aarch64: kiln-<version>-
#                     {cp310-cp310,cp311-cp311,cp312-abi3}-manylinux_2_28_{x86_64,aarch64}.whl
#                     (scripts/build_manylinux_wheel.sh, the zig toolchain of scripts/toolchain.sh;
#                     docs/wheels.md "manylinux_2_28 and aarch64")
#   release/mirror/   what to upload to a static file server, with kiln-kernels-<version>-SHA256SUMS
#   release/tuf/      the mirror as a signed TUF repository (metadata/, targets/; docs/tuf.md),
#                     signed with THROWAWAY test keys from release/tuf-THROWAWAY-TEST-KEYS/:
#                     a real pipeline signs with its own keys, root and targets kept offline
# Options: --targets LIST (default: ci/targets.txt), --jobs N (passed to `kiln build`),
#   --cache DIR|URL (kiln build's result cache, default $KILN_BUILD_CACHE: every build and every
#   shard reads and fills the same one, so a re-run of an unchanged release compiles nothing),
#   --kiln-build DIR  install kiln from DIR, a build of this checkout made already (the tests'
#                     operator check passes its own), instead of configuring build-release.
#   --no-runtime-wheel  leave the kiln runtime wheels out (each architecture compiles libkiln's
#                     core again under scikit-build-core, minutes; the operator check skips them)
#   --wheel-pythons LIST  the runtime wheels' Pythons (default 3.10,3.11,abi3): a release stops
#                     when an interpreter is missing (scripts/find_python.sh says where it looked
#                     and how to get one), unless the list leaves that version out on purpose
#   --wheel-arches LIST   their architectures (default x86_64,aarch64)
#   --tarball-arches LIST the kiln tarballs' hosts (default x86_64,aarch64): a tree built by
#                     clang over Debian bullseye's sysroot (scripts/build_host_tarball_tree.sh,
#                     `scripts/toolchain.sh gnu`), so glibc 2.31 and GCC 10's libstdc++, checked
#                     by scripts/check_glibc_floor.sh: its CLI, C API and C++ API (g++'s ABI)
#                     run on any host of that floor (docs/release.md, "Tarballs for x86_64 and
#                     aarch64"). `host`: the kiln build itself instead (this machine's glibc;
#                     quicker, for checks that run on this machine)
#   --toolkits LIST   the CUDA toolkits that build the kernels, as `kiln build --toolkits` names
#                     them (default: ci/release-toolkits.txt, CUDA 13.0's nvcc and the NVRTC 12.9
#                     toolkit); "nvrtc:12.9" is the directory scripts/nvrtc_toolkit.sh lays out
#                     from pinned PyPI wheels (build/nvrtc-12.9), made here when missing. One
#                     index lists every toolkit's archives (docs/release.md, "Toolkits").
#   --one-nvcc-per-specialisation  passed to `kiln build`: the kernels the old way, one nvcc per
#                     specialisation and target (the fallback, and the baseline release builds
#                     are measured against; the archives' bytes differ only in ptxas's notes)
# Each step's wall and CPU seconds (user+sys of the commands it ran) are printed when it ends
# and again, as a table, at the end; release/steps.txt keeps them.
# Sharded (docs/release.md; every variant gives the same bytes as the plain run):
#   --shards N         build the kernels as N shards, N `kiln build --shard I/N` processes at
#                      once (--jobs each, default 1), then `kiln merge` them; the rest as usual
#   --shard I/N        CI shard job: build kiln and only shard I/N into release/shards/I, stop
#   --merge-shards DIR CI merge job: merge the shard directories under DIR instead of building
#                      (a shard job's directory holds one shard per toolkit, toolkit-K/)
# Reproducible: SOURCE_DATE_EPOCH defaults to the commit time, so a rerun gives the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

targets="$(grep -v '^#' ci/targets.txt | tr -d ' \n')"
toolkits="$(sed 's/#.*//' ci/release-toolkits.txt | tr -s ' \n' ',' | sed 's/^,//; s/,$//')"
build_args=()
shards=""
one_shard=""
merge_from=""
kiln_build=""
runtime_wheel=1
wheel_pythons=3.10,3.11,abi3
wheel_arches=x86_64,aarch64
tarball_arches=x86_64,aarch64
while [ $# -gt 0 ]; do
  case "$1" in
    --targets) targets="$2"; shift 2 ;;
    --targets=*) targets="${1#--targets=}"; shift ;;
    --toolkits) toolkits="$2"; shift 2 ;;
    --jobs) build_args+=(--jobs "$2"); shift 2 ;;
    --cache) export KILN_BUILD_CACHE="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    --shard) one_shard="$2"; shift 2 ;;
    --merge-shards) merge_from="$(cd "$2" && pwd)"; shift 2 ;;
    --kiln-build) kiln_build="$(cd "$2" && pwd)"; shift 2 ;;
    --no-runtime-wheel) runtime_wheel=0; shift ;;
    --wheel-pythons) wheel_pythons="$2"; shift 2 ;;
    --wheel-arches) wheel_arches="$2"; shift 2 ;;
    --one-nvcc-per-specialisation) build_args+=("$1"); shift ;;
    --tarball-arches) tarball_arches="$2"; shift 2 ;;
    -h|--help) sed -n '2,51p' "$0"; exit 0 ;;
    *) echo "ci/release.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# step NAME: ends the step running (its wall and CPU seconds to stderr and to $step_log) and
# starts NAME. CPU is the children's user+sys from bash's `times`, so it counts every command
# the step waited for.
step_name="" step_wall=0 step_cpu=0 step_lines=()
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
children_cpu() {  # sets cpu_now: the children's user+sys seconds so far, e.g. 12.34 (`times`
  times >"$times_file"  # runs in this shell: in a pipe or $(...) it would count a subshell's)
  cpu_now=$(sed -n 2p "$times_file" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%.2f", n }')
}
end_step() {
  [ -n "$step_name" ] || return 0
  local line
  children_cpu
  line=$(printf '%6d s wall %9.1f s CPU  %s' "$((SECONDS - step_wall))" \
    "$(awk -v a="$cpu_now" -v b="$step_cpu" 'BEGIN { print a - b }')" "$step_name")
  step_lines+=("$line")
  printf '%s\n' "--- $line" >&2
  step_name=""
}
step() {
  end_step
  children_cpu
  step_name="$*" step_wall=$SECONDS step_cpu=$cpu_now
  printf '\n=== %s\n' "$*"
}
step "bootstrap: the Debian packages and tools the release needs"
scripts/bootstrap.sh
version="$(cat VERSION)"
out="${KILN_RELEASE_DIR:-release}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

work=build-release
if [ -n "$kiln_build" ]; then
  step "kiln $version from $kiln_build"
  work="$out/work"
else
  step "build kiln $version (Release)"
  cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF \
    -DKILN_BUILD_BENCH=OFF -DCMAKE_INSTALL_LIBDIR=lib "-DKILN_RELEASE_TARGETS=$targets" >/dev/null
  ninja -C build-release
  kiln_build=build-release
fi
rm -rf "$out"
mkdir -p "$out"
cmake --install "$kiln_build" --prefix "$out/stage" --strip >/dev/null
kiln="$out/stage/bin/kiln"

# The toolkits as kiln build names them: nvrtc:12.9 becomes the directory scripts/nvrtc_toolkit.sh
# lays out (idempotent: a directory already complete for its pins is used as it is).
named=()
for tk in ${toolkits//,/ }; do
  case "$tk" in
    nvrtc:12.9)
      step "the CUDA 12.9 NVRTC toolkit (scripts/nvrtc_toolkit.sh: pinned PyPI wheels)"
      named+=("nvrtc:$(scripts/nvrtc_toolkit.sh | tail -n 1)") ;;
    *) named+=("$tk") ;;
  esac
done
toolkits="$(IFS=,; echo "${named[*]}")"

# The kernels: one build, or shards merged. Shard directories are what a CI shard job uploads;
# a shard builds one toolkit, so a shard job's directory holds one shard per toolkit.
shard_jobs=("${build_args[@]}")
[ ${#shard_jobs[@]} -gt 0 ] || shard_jobs=(--jobs 1)
build_args+=(--toolkits "$toolkits")
shard_cmd() {  # I N: what a shard job runs (tests/integration/shard_test.cpp runs the same)
  local k=0
  for tk in "${named[@]}"; do
    k=$((k + 1))
    "$kiln" build --targets "$targets" --toolkits "$tk" --shard "$1/$2" --out "$work/shard-$1" \
      --dist "$out/shards/$1/toolkit-$k" "${shard_jobs[@]}"
  done
}
merge_shards() {  # DIR: each toolkit's shards merged into the one dist, whose index lists them all
  for d in "$1"/*/toolkit-*/; do basename "$d"; done | sort -u | while read -r k; do
    "$kiln" merge "$1"/*/"$k"/ --dist "$out/dist"
  done
}
if [ -n "$one_shard" ]; then
  step "shard $one_shard of the archives for $targets"
  shard_cmd "${one_shard%/*}" "${one_shard#*/}"
  printf '\nshard %s: %s\n' "$one_shard" "$out/shards/${one_shard%/*}"
  exit 0
elif [ -n "$merge_from" ]; then
  step "merge the shards in $merge_from"
  merge_shards "$merge_from"
elif [ -n "$shards" ]; then
  step "archives for $targets as $shards shards at once"
  pids=()
  for i in $(seq 1 "$shards"); do
    shard_cmd "$i" "$shards" > "$out/shard-$i.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { failed=1; echo "shard $((i + 1))/$shards failed:" >&2; cat "$out/shard-$((i + 1)).log" >&2; }
  done
  [ "$failed" = 0 ]
  step "merge $shards shards"
  merge_shards "$out/shards"
else
  step "archives + index for $targets with toolkits $toolkits"
  "$kiln" build --targets "$targets" --out "$work/kernels" --dist "$out/dist" "${build_args[@]}"
fi
step "verify"
"$kiln" verify "$out/dist/kiln-kernels-$version-index.json"
# The kiln tarballs: one per host, kiln-<version>-cuda<M.m>-linux-<arch>.tar.zst (docs/release.md,
# "Tarballs for x86_64 and aarch64"). Each tree is built for the glibc 2.31 floor with the gnu
# toolchain, this kiln describing the reference package in it, packed by this kiln (which names
# the tarball for the tree's binaries) and checked again as packed. Each line of
# release/tarballs.txt: the tarball, its size in bytes and the seconds its build took.
: >"$out/tarballs.txt"
[[ ",$tarball_arches," == *,host,* && ",$tarball_arches," == *,$(uname -m),* ]] &&
  { echo "ci/release.sh: --tarball-arches names host and $(uname -m): both are linux-$(uname -m)" >&2; exit 2; }
for arch in ${tarball_arches//,/ }; do
  t0=$(date +%s)
  case "$arch" in
    host)
      step "tarball: the kiln build itself, for this machine's glibc"
      tb="$("$kiln" tarball --dist "$out/dist" --out "$out/dist" --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["file"])')" ;;
    x86_64|aarch64)
      step "tarball for linux-$arch (glibc 2.31, scripts/build_host_tarball_tree.sh)"
      tree="$(scripts/build_host_tarball_tree.sh "$out/stage-$arch" "$arch" "$kiln" | tail -n 1)"
      tb="$("$kiln" tarball --dist "$out/dist" --out "$out/dist" --prefix "$tree" --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["file"])')"
      case "$tb" in *-linux-"$arch".tar.zst) ;; *) echo "ci/release.sh: $tb is not named for linux-$arch" >&2; exit 1 ;; esac
      scripts/check_glibc_floor.sh "$tb" "$arch" 2.31 3.4.28 | tail -n 1 ;;
    *) echo "ci/release.sh: --tarball-arches: unknown '$arch' (x86_64, aarch64 or host)" >&2; exit 2 ;;
  esac
  printf '%s %s %s\n' "$(basename "$tb")" "$(stat -c %s "$tb")" "$(($(date +%s) - t0))" >>"$out/tarballs.txt"
done
step "wheels: the package's own and one per target"
"$kiln" wheel --dist "$out/dist" --out "$out/dist"
# The runtime wheel is the Python face of this kiln (python/, docs/python.md); its version is
# VERSION, so the mirror stages it with this release and compat checks it against libkiln.
# One wheel per (architecture, Python): the x86_64 ones first (an aarch64 build takes its stubs
# from the x86_64 build of the same Python). Each line of release/runtime-wheels.txt: the wheel,
# its size in bytes and the seconds its build took.
if [ "$runtime_wheel" = 1 ]; then
  : >"$out/runtime-wheels.txt"
  for arch in ${wheel_arches//,/ }; do
    for py in ${wheel_pythons//,/ }; do
      step "runtime wheel: kiln $version for Python $py on $arch (manylinux_2_28)"
      t0=$(date +%s)
      runtime_whl="$(scripts/build_manylinux_wheel.sh "$out/dist" "$arch" "$py" | tail -n 1)" || {
        echo "ci/release.sh: the $arch wheel for Python $py failed (above); --wheel-pythons or" \
          "--wheel-arches leave one out on purpose" >&2
        exit 1
      }
      [ -f "$runtime_whl" ] || { echo "scripts/build_manylinux_wheel.sh printed no wheel" >&2; exit 1; }
      printf '%s %s %s\n' "$(basename "$runtime_whl")" "$(stat -c %s "$runtime_whl")" \
        "$(($(date +%s) - t0))" >>"$out/runtime-wheels.txt"
    done
  done
fi
step "staged mirror"
"$kiln" mirror stage "$out/dist" --to "$out/mirror"
step "mirror verify"
"$kiln" mirror verify "$out/mirror"
# What a user of this machine notices: each Python here installs its wheel from the mirror with
# pip (which picks it among all of them) and `python -m kiln doctor` answers.
if [ "$runtime_wheel" = 1 ] && [[ ",$wheel_arches," == *",$(uname -m),"* ]]; then
  step "runtime wheels from the mirror: pip install and kiln doctor with this machine's Pythons"
  pythons=()
  # The system's python3 too, when the release has a wheel for it (3.X in the list, or abi3
  # and 3.12 or later); a list that leaves its version out on purpose skips it.
  if [ -x /usr/bin/python3 ]; then
    sys_py=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [[ ",$wheel_pythons," == *",$sys_py,"* ]] ||
      { [[ ",$wheel_pythons," == *",abi3,"* ]] && [ "${sys_py#3.}" -ge 12 ]; }; then
      pythons+=(/usr/bin/python3)
    fi
  fi
  for py in ${wheel_pythons//,/ }; do
    case "$py" in
      abi3) pythons+=("$(scripts/find_python312.sh)") ;;
      *) pythons+=("$(scripts/find_python.sh "$py")") ;;
    esac
  done
  scripts/check_runtime_wheels.sh "$out/mirror" "${pythons[@]}"
fi
step "compat: the release against the libkiln it ships"
"$kiln" compat --device none "$out/mirror/kiln-kernels-$version-index.json" \
  "$out"/mirror/kiln-"$version"-cuda*.tar.zst "$out"/mirror/*.whl
step "TUF repository of the mirror (THROWAWAY test keys, never published)"
ci/tuf_repo.sh "$kiln" "$out/mirror" "$out/tuf" "$out/tuf-THROWAWAY-TEST-KEYS"
# The two pins a node or a mirror operator needs (docs/mirrors.md): the index covers the
# archives, the checksum file covers the wheels and the tarball.
printf '\nrelease %s: %s\nindex sha256: %s (--index-sha256, KILN_INDEX_SHA256)\nkiln-kernels-%s-SHA256SUMS sha256: %s (--sums-sha256 for kiln mirror sync/verify)\n' \
  "$version" "$out/mirror" "$(sha256sum "$out/mirror/kiln-kernels-$version-index.json" | cut -c1-64)" \
  "$version" "$(sha256sum "$out/mirror/kiln-kernels-$version-SHA256SUMS" | cut -c1-64)"
printf 'kiln tarballs (name, bytes, build seconds; %s):\n' "$out/tarballs.txt"
sed 's/^/  /' "$out/tarballs.txt"
if [ "$runtime_wheel" = 1 ]; then
  printf 'runtime wheels (name, bytes, build seconds; %s):\n' "$out/runtime-wheels.txt"
  sed 's/^/  /' "$out/runtime-wheels.txt"
fi
printf 'TUF repository: %s (THROWAWAY test keys)\nTUF root %s sha256: %s (kiln fetch --tuf-root, KILN_TUF_ROOT)\n' \
  "$out/tuf" "$out/tuf/metadata/1.root.json" \
  "$(sha256sum "$out/tuf/metadata/1.root.json" | cut -c1-64)"
end_step
children_cpu
{
  printf 'steps (wall, CPU = user+sys of the commands each ran):\n'
  printf '  %s\n' "${step_lines[@]}"
  printf '  %6d s wall %9.1f s CPU  total\n' "$SECONDS" "$cpu_now"
} | tee "$out/steps.txt"
