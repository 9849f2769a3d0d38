#!/usr/bin/env bash
# The full checks, run before an issue is resolved (docs/testing.md): what CI samples to stay
# within its budget, run whole (docs/testing.md; its own time is not yet measured).
#   scripts/full_check.sh [--no-ci]      --no-ci: only step 2
#   1. ci/test.sh with every crash point of every command, killed and under each I/O fault
#      (KILN_CRASH_SAMPLE=0), and a longer exploration per fuzz target (KILN_FUZZ_SECONDS,
#      default 300 here instead of CI's 12);
#   2. the release for the default targets (ci/release.sh) and its GPU proof
#      (scripts/gpu_release_check.sh prepare, then run), when this machine has a GPU. Without one
#      it says so and prints the commands that run the proof on a GPU machine; the step counts
#      as not done (exit 3) unless KILN_FULL_CHECK_NO_GPU=ok says that is known.
#   3. the release in the foreign userlands, every one required (scripts/userland_smoke.sh
#      --require-all: arm64 bookworm under qemu-user, x86_64 bullseye; docs/userlands.md), on
#      the release of step 2 (release/), else release-userlands/ (ci/release.sh, made when there
#      is none); needs root.
# Exit: 0 when everything ran and passed, the failing step's status otherwise, 3 when the GPU
# proof could not run here.
set -euo pipefail
cd "$(dirname "$0")/.."
run_ci=1
for a in "$@"; do
  case "$a" in
  --no-ci) run_ci=0 ;;
  *) echo "usage: $0 [--no-ci]" >&2; exit 2 ;;
  esac
done

t0=$(date +%s)
if [ "$run_ci" = 1 ]; then
  echo "full_check: ci/test.sh with every crash point (kills and I/O faults) and ${KILN_FUZZ_SECONDS:-300} s per fuzz target"
  KILN_CRASH_SAMPLE=0 KILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-300}" ci/test.sh
fi

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "full_check: the release for the default targets, then its GPU proof"
  ci/release.sh
  scripts/gpu_release_check.sh prepare release/mirror build
  scripts/gpu_release_check.sh run
else
  cat >&2 <<'EOF'
full_check: no GPU here (nvidia-smi lists none): the GPU proof did not run. On a GPU machine,
from a checkout with this build carried over (docs/gpu-runs.md records each run):
  ci/release.sh && scripts/gpu_release_check.sh prepare release/mirror build   # here
  scripts/gpu_release_check.sh run                                             # there
EOF
  if [ "${KILN_FULL_CHECK_NO_GPU:-}" != ok ]; then
    echo "full_check: not complete (exit 3): the GPU proof is missing" >&2
    exit 3
  fi
fi
echo "full_check: the release in the foreign userlands (arm64 bookworm under qemu-user, x86_64 bullseye)"
# The default release's tarballs (glibc 2.31, GCC 10's libstdc++) are the ones both userlands run.
userland_release=release
if [ ! -d release/mirror ]; then
  userland_release=release-userlands
  [ -d release-userlands/mirror ] || KILN_RELEASE_DIR=release-userlands ci/release.sh
fi
scripts/userland_smoke.sh --require-all "$userland_release"
echo "full_check: passed in $(($(date +%s) - t0)) s"
