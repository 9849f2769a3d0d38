#!/usr/bin/env bash
# kiln's main job from a fresh checkout: installs dependencies, builds the kiln CLI and lists
# the kernel registry. (Building the packages for ci/targets.txt arrives with `kiln build`.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF >/dev/null
ninja -C build kiln_cli
build/kiln --version
build/kiln registry list
