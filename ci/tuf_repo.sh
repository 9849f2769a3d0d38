#!/usr/bin/env bash
# The TUF repository of a staged release mirror, signed with THROWAWAY test keys: what
# ci/release.sh publishes as release/tuf/ (docs/tuf.md), and what the loopback tests fetch
# from (tests/integration/tuf_loopback_test.cpp, TufFetch.*), so both run the same commands.
#   ci/tuf_repo.sh KILN MIRROR_DIR TUF_DIR KEYS_DIR
# Root 2-of-3 ecdsa, snapshot ecdsa, targets and timestamp ed25519, consistent snapshots;
# root and targets keys in KEYS_DIR/offline, snapshot and timestamp keys in KEYS_DIR/online.
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: ci/tuf_repo.sh KILN MIRROR_DIR TUF_DIR KEYS_DIR" >&2
  exit 2
fi
kiln="$1" mirror="$2" tuf="$3" keys="$4"
tuf_repo() {
  "$kiln" tuf-repo --dir "$tuf" --offline-keys "$keys/offline" --online-keys "$keys/online" \
    "$@" >/dev/null
}
tuf_repo --keys root=3 --threshold root=2 --scheme root=ecdsa-sha2-nistp256 \
  --scheme snapshot=ecdsa-sha2-nistp256 init
printf 'Keys made by ci/tuf_repo.sh for testing only: never publish or trust them.\n' \
  >"$keys/README"
tuf_repo add "$mirror"
