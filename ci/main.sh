#!/usr/bin/env bash
# kiln's main job from a fresh checkout: installs dependencies, builds the kiln CLI, then
# builds every registered kernel for the default targets (ci/targets.txt) into one versioned
# archive per target plus the release index under dist/, and verifies what it published.
# Extra arguments go to `kiln build` (e.g. --targets sm_90a --jobs 4).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_BENCH=OFF >/dev/null
ninja -C build kiln_cli
# Reproducible by default: the archives' build time is the commit time unless the caller set it.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
build/kiln build --out kiln-build --dist dist "$@"
build/kiln verify "dist/kiln-kernels-$(cat VERSION)-index.json"
