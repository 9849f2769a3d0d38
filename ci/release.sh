#!/usr/bin/env bash
# kiln's release pipeline (the main job) from a fresh checkout:
#   build kiln -> archives + index -> verify -> tarball -> wheels -> staged mirror -> mirror verify
# Everything lands under release/ (or $KILN_RELEASE_DIR):
#   release/stage/    the kiln install tree packed into the tarball (bin, lib, include, lib/cmake)
#   release/dist/     index, one archive per target, the tarball, one wheel per target
#   release/mirror/   what to upload to a static file server, with kiln-<version>-SHA256SUMS
# Options: --targets LIST (default: ci/targets.txt), --jobs N (passed to `kiln build`).
# Reproducible: SOURCE_DATE_EPOCH defaults to the commit time, so a rerun gives the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

targets="$(grep -v '^#' ci/targets.txt | tr -d ' \n')"
build_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --targets) targets="$2"; shift 2 ;;
    --targets=*) targets="${1#--targets=}"; shift ;;
    --jobs) build_args+=(--jobs "$2"); shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "ci/release.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

step() { printf '\n=== %s\n' "$*"; }
scripts/bootstrap.sh
version="$(cat VERSION)"
out="${KILN_RELEASE_DIR:-release}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"

step "build kiln $version (Release)"
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF \
  -DKILN_BUILD_BENCH=OFF -DCMAKE_INSTALL_LIBDIR=lib "-DKILN_RELEASE_TARGETS=$targets" >/dev/null
ninja -C build-release
rm -rf "$out"
mkdir -p "$out"
cmake --install build-release --prefix "$out/stage" --strip >/dev/null
kiln="$out/stage/bin/kiln"

step "archives + index for $targets"
"$kiln" build --targets "$targets" --out build-release/kernels --dist "$out/dist" "${build_args[@]}"
step "verify"
"$kiln" verify "$out/dist/kiln-kernels-$version-index.json"
step "tarball"
"$kiln" tarball --dist "$out/dist" --out "$out/dist"
step "wheels"
"$kiln" wheel --dist "$out/dist" --out "$out/dist"
step "staged mirror"
"$kiln" mirror stage "$out/dist" --to "$out/mirror"
step "mirror verify"
"$kiln" mirror verify "$out/mirror"
step "compat: the release against the libkiln it ships"
"$kiln" compat --device none "$out/mirror/kiln-kernels-$version-index.json" \
  "$out"/mirror/kiln-"$version"-cuda*.tar.zst "$out"/mirror/*.whl
printf '\nrelease %s: %s\n' "$version" "$out/mirror"
