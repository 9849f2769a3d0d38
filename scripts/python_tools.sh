#!/usr/bin/env bash
# Creates (idempotently) a Python venv holding the tools the wheel integration tests check
# kiln's wheels with: `wheel` (wheel unpack verifies RECORD hashes) and check-wheel-contents;
# and python-tuf (`tuf`, with securesystemslib's crypto extra) for the TUF interoperability
# tests (the TufInterop tests in tests/integration/tuf_loopback_test.cpp, which run
# scripts/tuf_interop.py; docs/tuf.md).
#   scripts/python_tools.sh [VENV]      VENV defaults to build/pytools (under the repo root)
# Then: KILN_TEST_PYTOOLS=VENV ctest -L integration   (docs/wheels.md)
# Versions are pinned so that CI checks against the same tools every run; PYTHON picks the
# interpreter (default python3).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$repo/build/pytools}"
python="${PYTHON:-python3}"
wheel_version="0.48.0"
cwc_version="0.6.3"
tuf_version="7.0.0"
sslib_version="1.4.0"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
want="wheel==$wheel_version check-wheel-contents==$cwc_version tuf==$tuf_version securesystemslib[crypto]==$sslib_version"
# --all: plain `pip freeze` leaves out pip, setuptools and wheel.
have="$("$venv/bin/python" -m pip freeze --all --disable-pip-version-check 2>/dev/null || true)"
missing=0
for req in $want; do
  grep -qix "${req/\[crypto\]/}" <<<"$have" || missing=1
done
if [ "$missing" = 1 ]; then
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want
fi
"$venv/bin/python" -m wheel version >/dev/null
"$venv/bin/check-wheel-contents" --help >/dev/null
"$venv/bin/python" -c 'import tuf.ngclient, tuf.api.metadata, securesystemslib.signer' >/dev/null
cd "$venv" && pwd  # the absolute path, for KILN_TEST_PYTOOLS
