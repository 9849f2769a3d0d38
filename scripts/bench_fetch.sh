#!/usr/bin/env bash
# Download throughput of `kiln fetch` from nginx on loopback, next to curl fetching the same
# file in the same run. Makes a release with one ~100 MB archive (incompressible bytes), starts
# nginx with a CA made on the spot, then times over http and https:
#   curl -o file, libkiln's transport + SHA-256 (no disk), and fetch_targets (download into a
#   temp file, verify, rename, unpack and re-verify into a store).
# Usage: scripts/bench_fetch.sh [build-dir]   (KILN_BENCH_MB=N changes the size)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
if [ ! -x "$build/tests/kiln_integration_tests" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$build" kiln_integration_tests
fi
for tool in nginx openssl curl; do
  command -v "$tool" >/dev/null || { echo "bench_fetch: $tool is missing (scripts/bootstrap.sh)" >&2; exit 5; }
done
"$build/tests/kiln_integration_tests" --gtest_also_run_disabled_tests \
  --gtest_filter='FetchBench.DISABLED_LargeArchiveFromNginxVersusCurl' 2>&1 |
  grep -vE '^\[|^Running main|^Note:|^$'
