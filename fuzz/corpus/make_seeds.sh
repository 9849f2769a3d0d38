#!/usr/bin/env bash
# Regenerates the release-file seeds in fuzz/corpus/ from a real `kiln build` of a one-kernel
# slice (axpy_dtype_f32 for sm_80 and compute_80, real nvcc), as fuzz/corpus/README.md says.
# Seeds whose names start with "regression-" or "handmade-" are not touched. The scan_record
# seeds are about the manifest built into scan_record_fuzz, so that binary writes them (its
# --write-seeds mode; skipped with a note when $KILN_FUZZ_BUILD, default build-fuzz, has none).
#   fuzz/corpus/make_seeds.sh [path/to/kiln]     (default build/kiln)
set -euo pipefail
cd "$(dirname "$0")/../.."
kiln="$(realpath "${1:-build/kiln}")"
nvcc="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
c=fuzz/corpus

export SOURCE_DATE_EPOCH=1700000000
"$kiln" build --out "$work/kb" --targets sm_80,compute_80 --only axpy_dtype_f32 -j1 >/dev/null
"$kiln" wheel --dist "$work/kb/dist" --targets sm_80 --out "$work/kb/dist" >/dev/null
"$kiln" mirror stage "$work/kb/dist" --to "$work/mirror" >/dev/null
v="$("$kiln" --version | awk "NR == 1 {print \$2}")"
dist="$work/kb/dist"

cp "$dist/kiln-kernels-$v-index.json" "$c/index/release-index.json"
cp manifests/examples/index.json "$c/index/example-index.json"
cp manifests/examples/manifest.json "$c/manifest/example-manifest.json"
cp manifests/examples/manifest.json "$c/manifest_entry/example-manifest.json"
for t in sm_80 compute_80; do
  a="$(ls "$dist"/kiln-kernels-"$v"-cuda*-"$t".tar.zst)"
  cp "$a" "$c/archive/release-$t.tar.zst"
  zstd -q -d -c "$a" >"$c/archive/release-$t.tar"
  tar -I zstd -xOf "$a" manifest.json >"$c/manifest/release-$t-manifest.json"
  cp "$c/manifest/release-$t-manifest.json" "$c/manifest_entry/"
  tar -I zstd -xOf "$a" axpy_dtype_f32.fatbin >"$c/fatbin/release-$t.fatbin"
done
# Raw cubin and PTX of the same stub, for the ELF and PTX readers behind the fatbin reader.
stub="$work/kb/stubs/axpy_dtype_f32.kiln-stub.cu"
"$nvcc" -cubin -arch=sm_80 -I kernels -o "$c/fatbin/nvcc-sm_80.cubin" "$stub"
"$nvcc" -ptx -arch=compute_80 -I kernels -o "$c/fatbin/nvcc-compute_80.ptx" "$stub"
# A zstd-compressed fatbin for an arch-specific target (flags 0x8000 and 0x100000).
"$nvcc" -fatbin -gencode arch=compute_90a,code=sm_90a -Xfatbin=-compress-all -I kernels \
  -o "$c/fatbin/nvcc-sm_90a-compressed.fatbin" "$stub"
cp "$dist"/*.whl "$c/wheel/release-sm_80.whl"
unzip -p "$dist"/*.whl '*.dist-info/RECORD' >"$c/wheel_record/release-RECORD"
cp "$work/mirror/kiln-kernels-$v-SHA256SUMS" "$c/checksums/release-SHA256SUMS"
# A package description as kiln_add_kernel_package installs it: the example project's (small).
"$kiln" package-source --source examples/acme-kernels --symbol s --output "$work/s.c" \
  --description "$c/package_description/acme-kernels-description.json" 2>/dev/null
# The description `kiln build` publishes beside the index (the whole reference package's).
cp "$dist/kiln-kernels-$v.package.json" "$c/package_description/release-kiln-kernels-description.json"
# shard.json of the same slice built as shard 1 of 2 (`kiln build --shard`, what a CI runner
# writes and `kiln merge` reads).
"$kiln" build --out "$work/ks" --targets sm_80,compute_80 --only axpy_dtype_f32 --shard 1/2 -j1 \
  >/dev/null
cp "$(find "$work/ks" -name shard.json | head -1)" "$c/shard_manifest/release-shard-1-of-2.json"
# TUF metadata of every role: the mirror made a TUF repository by ci/tuf_repo.sh (throwaway keys),
# then a bundle of it (`kiln bundle`, as a .tar.zst, and its plain tar) trusted by its root,
# which fuzz/bundle-root.json holds for bundle_fuzz.
ci/tuf_repo.sh "$kiln" "$work/mirror" "$work/tuf" "$work/keys"
md="$work/tuf/metadata"
cp "$md/1.root.json" "$c/tuf_metadata/release-root.json"
cp "$md/timestamp.json" "$c/tuf_metadata/release-timestamp.json"
cp "$(ls "$md"/*.snapshot.json | sort -V | tail -1)" "$c/tuf_metadata/release-snapshot.json"
cp "$(ls "$md"/*.targets.json | sort -V | tail -1)" "$c/tuf_metadata/release-targets.json"
cp "$md/1.root.json" fuzz/bundle-root.json
# kiln tuf-repo signs no delegations: the delegated forms (path patterns, path_hash_prefixes,
# succinct hash bins, a bin's own targets) are the real targets metadata with a delegations block
# added, its keys the real targets key (the fuzz target parses; it checks no signature).
python3 fuzz/corpus/delegated_seeds.py "$c/tuf_metadata/release-root.json" \
  "$c/tuf_metadata/release-targets.json" "$c/tuf_metadata"
KILN_CACHE_DIR="$work/bundle-cache" "$kiln" bundle --mirror "$work/tuf" --tuf-root "$md/1.root.json" \
  --release "kiln-kernels-$v" --targets sm_80 --out "$work/bundle.tar.zst" >/dev/null
cp "$work/bundle.tar.zst" "$c/bundle/release-bundle-sm_80.tar.zst"
zstd -q -d -c "$work/bundle.tar.zst" >"$c/bundle/release-bundle-sm_80.tar"
scan_record_fuzz="${KILN_FUZZ_BUILD:-build-fuzz}/fuzz/scan_record_fuzz"
if [ -x "$scan_record_fuzz" ]; then
  "$scan_record_fuzz" --write-seeds="$c/scan_record"
else
  echo "make_seeds: no $scan_record_fuzz (scripts/fuzz.sh builds it): scan_record/ not rewritten" >&2
fi
ls -l "$c"/*/
