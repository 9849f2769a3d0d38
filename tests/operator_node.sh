#!/usr/bin/env bash
# A cluster operator's node, tested with what ships (issue 24, item 6): what ./ci/release.sh
# publishes (here for a small target list), and a third-party kernel project's install tree and
# release (examples/acme-kernels, built against the unpacked tarball through find_package(kiln)
# and staged into the same mirror: a mirror of two packages). The node then has only those
# files: every command runs in an empty working directory inside a sandbox (bubblewrap) where
# the source tree and the build tree are hidden, so no fallback to the tree kiln was built from
# can answer. Each command's answer is asserted.
#
#   tests/operator_node.sh SRC_DIR BUILD_DIR LOG_DIR [TARGETS]
#
# Everything is made in a temporary directory outside both trees (removed when all passed, kept
# and named when a check failed); LOG_DIR/operator.log has every command and its output. ctest
# runs it as operator.DeployedNodeAnswersFromTheInstalledFilesAlone. Exit 0 when every check
# passes, 77 (skipped) when bubblewrap cannot make a sandbox here, else 1 naming the check.
set -euo pipefail
src=$(cd "${1:?usage: operator_node.sh SRC BUILD LOG_DIR [TARGETS]}" && pwd)
build=$(cd "${2:?}" && pwd)
mkdir -p "${3:?}"
log="$(cd "$3" && pwd)/operator.log"
: >"$log"
targets=${4:-sm_90a,compute_80}
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-operator-XXXXXX")
case "$work/" in "$src"/* | "$build"/*) echo "the temporary directory $work is inside a tree the node must not see" >&2; exit 1 ;; esac
trap 'echo "kept for a look: $work"' ERR

# The trees the node must not see: the parent of the source tree when the work directory is
# not below it (then the source path is absent, as on a real node), else the trees themselves.
top=$(dirname "$src")
case "$work/" in "$top"/*) top=$src ;; esac
hidden=(--tmpfs "$top")
case "$build/" in "$top"/*) ;; *) hidden+=(--tmpfs "$build") ;; esac
if ! bwrap --dev-bind / / "${hidden[@]}" true 2>/dev/null; then
  echo "SKIPPED: bubblewrap cannot make a sandbox here (needed to hide $src from the node)"
  exit 77
fi

say() { printf '\n=== %s\n' "$*" | tee -a "$log"; }
fail() { echo "FAILED: $* (kept for a look: $work)" | tee -a "$log"; exit 1; }

# ---- the build machine: the release, and acme's install tree and release ------------------
say "ci/release.sh --targets $targets (kiln from $build)"
(cd "$src" && KILN_RELEASE_DIR="$work/release" ci/release.sh --kiln-build "$build" \
  --targets "$targets" --jobs 2 --no-runtime-wheel --tarball-arches host) >>"$log" 2>&1 || fail "ci/release.sh (see $log)"
version=$(cat "$src/VERSION")
release="$work/release"
mirror="$release/mirror"
tarball=$(ls "$mirror"/kiln-"$version"-cuda*.tar.zst)
shipped="$work/shipped"
mkdir -p "$shipped"
tar --zstd -xf "$tarball" -C "$shipped"
skiln=$(ls "$shipped"/kiln-*/bin/kiln)
sprefix=$(dirname "$(dirname "$skiln")")

say "examples/acme-kernels against the unpacked tarball"
acme_version=$(cat "$src/examples/acme-kernels/VERSION")
{
  cmake -S "$src/examples/acme-kernels" -B "$work/acme-build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$sprefix"
  cmake --build "$work/acme-build"
  cmake --install "$work/acme-build" --prefix "$work/acme-prefix"
  "$skiln" build --source "$src/examples/acme-kernels" --targets "$targets" \
    --out "$work/acme-kernels-build" --dist "$work/acme-dist" --jobs 2
  "$skiln" install "$work/acme-dist/acme-kernels-$acme_version-index.json" \
    --dest "$work/acme-prefix/share/kiln/artifacts"
  "$skiln" mirror stage "$work/acme-dist" --to "$mirror"
  "$skiln" tuf-repo --dir "$release/tuf" --offline-keys "$release/tuf-THROWAWAY-TEST-KEYS/offline" \
    --online-keys "$release/tuf-THROWAWAY-TEST-KEYS/online" add "$mirror"
} >>"$log" 2>&1 || fail "building acme-kernels (see $log)"
kiln_pin=$(sha256sum "$mirror/kiln-kernels-$version-index.json" | cut -c1-64)
acme_pin=$(sha256sum "$mirror/acme-kernels-$acme_version-index.json" | cut -c1-64)
root="$release/tuf/metadata/1.root.json"

# ---- the node: an empty prefix, an empty working directory, no source or build tree --------
node="$work/node"
mkdir -p "$node/home" "$node/acme"
tar --zstd -xf "$tarball" -C "$node"
cp -r "$work/acme-prefix/." "$node/acme/"
kiln=$(ls "$node"/kiln-*/bin/kiln)
prefix=$(dirname "$(dirname "$kiln")")
# On the node: cwd an empty directory, the source and build trees hidden, no KILN_* variable
# but the cache directory. $1: the exit code expected (any: not judged); the rest: the command
# line.
on_node() {
  local want=$1
  shift
  local out rc=0
  out=$(cd "$node/home" && env -i PATH=/usr/bin:/bin HOME="$node/home" \
    KILN_CACHE_DIR="$node/cache" bwrap --dev-bind / / "${hidden[@]}" \
    --chdir "$node/home" "$@" 2>&1) || rc=$?
  printf '$ %s\n%s\n(exit %s)\n' "$*" "$out" "$rc" >>"$log"
  [ "$want" = any ] || [ "$rc" = "$want" ] || fail "exit $rc, not $want: $* -> $out"
  if grep -q "this kiln was built from" <<<"$out"; then fail "fell back to the build tree: $*"; fi
  LAST="$out"
}
has() { grep -qF -- "$1" <<<"$LAST" || fail "no '$1' in: $LAST"; }
kstore="$prefix/share/kiln/artifacts"
astore="$node/acme/share/kiln/artifacts"

say "doctor"
# Its verdict depends on the node's driver (none here: exit 5, named); its facts do not.
on_node any "$kiln" doctor --json
has "\"name\": \"kiln-kernels\""
has "$kstore"

say "resolve --explain: the package described beside kiln"
on_node 0 "$kiln" resolve gemm_f16_tc_bm_128_bn_128 --device sm_90 --explain
has "package kiln-kernels $version from $kstore/kiln-kernels-$version.package.json"
has "store sm_90a"

say "resolve of the other package, from its own install"
on_node 0 env KILN_ARTIFACT_PATH="$astore" "$kiln" resolve scale_dtype_f32 --device sm_90 \
  --package acme-kernels --explain
has "package acme-kernels $acme_version from $astore/acme-kernels-$acme_version.package.json"
on_node 2 env KILN_ARTIFACT_PATH="$astore" "$kiln" resolve scale_dtype_f32 --device sm_90
has "several packages are described in"

say "compat of the mirror's release"
on_node 0 "$kiln" compat --device sm_90 "$mirror/kiln-kernels-$version-index.json"
on_node 0 env KILN_ARTIFACT_PATH="$astore" "$kiln" compat --device sm_90 --package acme-kernels \
  "$mirror/acme-kernels-$acme_version-index.json"

say "verify: each input names its package"
on_node 0 "$kiln" verify "$mirror/acme-kernels-$acme_version-index.json"
has "is the index of acme-kernels $acme_version"
on_node 0 "$kiln" verify "$mirror/kiln-kernels-$version-index.json"
on_node 0 "$kiln" verify "$astore"

say "install an index of the other package, nothing named"
on_node 0 "$kiln" install "$mirror/acme-kernels-$acme_version-index.json" --dest "$node/store-a"
has "described"
[ -f "$node/store-a/acme-kernels-$acme_version.package.json" ] || fail "no description installed"

say "fetch from the plain mirror: the package described beside kiln, and one named"
on_node 0 "$kiln" fetch --device sm_90 --mirror "file://$mirror" --index-sha256 "$kiln_pin" \
  --dest "$node/store-k"
has "package kiln-kernels $version from $kstore"
[ -f "$node/store-k/kiln-kernels-$version.package.json" ] || fail "fetch wrote no description"
on_node 0 "$kiln" fetch --device sm_90 --mirror "file://$mirror" --index-sha256 "$acme_pin" \
  --package acme-kernels --version "$acme_version" --dest "$node/store-k"
[ -f "$node/store-k/acme-kernels-$acme_version.package.json" ] || fail "fetch wrote no description"

say "mirror verify of a two-package mirror"
on_node 0 "$kiln" mirror verify "$mirror"
has "acme-kernels"
has "kiln-kernels"
# Each release under its own index pin: acme's whole; kiln's wheels and tarball are covered only
# by its checksum file, which an index pin does not vouch for (docs/mirrors.md): reported, exit 3.
on_node 3 "$kiln" mirror verify "$mirror" --release "kiln-kernels-$version=$kiln_pin" \
  --release "acme-kernels-$acme_version=$acme_pin"
has "OK $mirror (acme-kernels release $acme_version)"
has "uncovered  wheel"
on_node 0 "$kiln" mirror verify "$mirror" --package kiln-kernels --version "$version" \
  --index-sha256 "$kiln_pin" --sums-sha256 "$(sha256sum "$mirror/kiln-kernels-$version-SHA256SUMS" | cut -c1-64)"

say "bundle of both releases, installed with nothing named"
on_node 0 "$kiln" bundle --mirror "file://$release/tuf" --tuf-root "$root" --targets sm_90a \
  --release "kiln-kernels-$version" --release "acme-kernels-$acme_version" --out "$node/b.tar.zst"
on_node 0 env KILN_OFFLINE=1 "$kiln" install --bundle "$node/b.tar.zst" --tuf-root "$root" \
  --dest "$node/store-b"
for f in "kiln-kernels-$version.package.json" "acme-kernels-$acme_version.package.json"; do
  [ -f "$node/store-b/$f" ] || fail "install --bundle wrote no $f"
done
on_node 0 env KILN_ARTIFACT_PATH="$node/store-b" "$kiln" resolve scale_dtype_f32 --device sm_90 \
  --package acme-kernels
has "store sm_90a"

on_node 0 test ! -e "$src/VERSION"

say "every check passed"
trap - ERR
rm -rf "$work"
