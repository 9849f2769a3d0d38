#!/usr/bin/env bash
# Cost of TUF on loopback (docs/tuf.md "Cost of a refresh", docs/performance.md):
#  1. `kiln tuf-client refresh` against a digest-pinned index fetch (curl | sha256sum);
#  2. `kiln fetch` of one archive through TUF (no metadata yet, and the metadata of the run
#     before) against `kiln fetch --index-sha256`, from the integration test binary beside KILN
#     (TufBench.DISABLED_FetchThroughTufAgainstADigestPin; KILN_BENCH_KB sets the artifact size).
# Prints the median of RUNS (default 9) runs, in ms.
#   scripts/tuf_bench.sh [KILN] [RUNS]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kiln="$(realpath "${1:-$repo/build/kiln}")"
runs="${2:-9}"
work="$(mktemp -d)"
srv=""
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
# The repository ci/release.sh writes: root 2-of-3 ecdsa, snapshot ecdsa, consistent snapshots.
"$kiln" tuf-repo --dir repo --keys root=3 --threshold root=2 --scheme root=ecdsa-sha2-nistp256 \
  --scheme snapshot=ecdsa-sha2-nistp256 init >/dev/null
head -c 2000 /dev/urandom | base64 >kiln-0.1.0-index.json
"$kiln" tuf-repo --dir repo add kiln-0.1.0-index.json >/dev/null
cp kiln-0.1.0-index.json repo/  # where a digest-pinned node fetches it
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 -d repo >/dev/null 2>&1 &
srv=$!
sleep 1
url="http://127.0.0.1:$port"
ms() { echo $((($2 - $1) / 1000000)); }
for _ in $(seq "$runs"); do
  rm -rf md && mkdir md
  "$kiln" tuf-client --metadata-dir md init repo/metadata/1.root.json
  a=$(date +%s%N); "$kiln" tuf-client --metadata-dir md --metadata-url "$url/metadata" refresh
  b=$(date +%s%N); "$kiln" tuf-client --metadata-dir md --metadata-url "$url/metadata" refresh
  c=$(date +%s%N); "$kiln" --version >/dev/null
  d=$(date +%s%N); curl -fsS "$url/kiln-0.1.0-index.json" | sha256sum >/dev/null
  e=$(date +%s%N)
  echo "$(ms "$a" "$b") $(ms "$b" "$c") $(ms "$c" "$d") $(ms "$d" "$e")"
done >times.txt
python3 - <<'PY'
import statistics
rows = [list(map(int, l.split())) for l in open("times.txt")]
names = ["cold refresh", "warm refresh", "kiln --version", "curl | sha256sum index"]
for i, n in enumerate(names):
    print(f"{n}: median {statistics.median(r[i] for r in rows)} ms")
PY
tests="$(dirname "$kiln")/tests/kiln_integration_tests"
if [ -x "$tests" ]; then
  KILN_BENCH_RUNS="$runs" "$tests" --gtest_also_run_disabled_tests \
    --gtest_filter='TufBench.DISABLED_FetchThroughTufAgainstADigestPin' 2>&1 |
    grep -vE '^\[|^Running main|^Note:|^$'
else
  echo "fetch rows skipped: $tests not built (ninja -C $(dirname "$kiln") kiln_integration_tests)"
fi
