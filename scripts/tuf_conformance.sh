#!/usr/bin/env bash
# Runs the TUF conformance suite (theupdateframework/tuf-conformance, vendored unmodified)
# against `kiln tuf-client` (docs/tuf.md).
#   scripts/tuf_conformance.sh [KILN] [-- PYTEST ARGS...]   KILN defaults to build/kiln
# The suite comes from $KILN_TUF_CONFORMANCE, else a vendored copy in a directory beside the
# checkout (../*/vendor/tuf-conformance), else under /work (/work/*/vendor/tuf-conformance, where
# these machines keep it); without any of them the script says
# so and exits 77 (skipped). Its Python dependencies come from PyPI, pinned (the versions in
# the suite's pyproject.toml), into a venv under build/; `faketime` comes from Debian
# (scripts/bootstrap.sh). Writes build/tuf-conformance/report.txt (pytest's summary lines).
# Then scripts/tuf_interop.py: python-tuf's client reads a repository kiln wrote.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
kiln="$repo/build/kiln"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then kiln="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; shift; fi
[ "${1:-}" = "--" ] && shift

suite=""
for c in "${KILN_TUF_CONFORMANCE:-}" "$repo"/../*/vendor/tuf-conformance \
         /work/*/vendor/tuf-conformance; do
  if [ -n "$c" ] && [ -f "$c/pyproject.toml" ] && [ -d "$c/tuf_conformance" ]; then
    suite="$(cd "$c" && pwd)"
    break
  fi
done
if [ -z "$suite" ]; then
  echo "tuf_conformance: skipped: the suite is not vendored here (set KILN_TUF_CONFORMANCE)" >&2
  exit 77
fi
[ -x "$kiln" ] || { echo "tuf_conformance: error: no kiln binary at $kiln" >&2; exit 1; }
command -v faketime >/dev/null || { echo "tuf_conformance: error: faketime missing (scripts/bootstrap.sh)" >&2; exit 1; }

out="$repo/build/tuf-conformance"
venv="$out/venv"
mkdir -p "$out"
if [ ! -x "$venv/bin/python" ]; then "${PYTHON:-python3}" -m venv "$venv"; fi
want="securesystemslib[crypto]==1.4.0 tuf==7.0.0 pytest==9.1.1 pytest-json-report==1.5.0"
if ! "$venv/bin/python" -c 'import tuf, securesystemslib, pytest' 2>/dev/null; then
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check $want
fi

# The entrypoint is split at spaces by the suite; a wrapper keeps paths with spaces working.
entry="$out/kiln-tuf-client"
printf '#!/bin/sh\nexec "%s" tuf-client "$@"\n' "$kiln" >"$entry"
chmod +x "$entry"

cd "$suite"
set +e
"$venv/bin/python" -m pytest tuf_conformance --entrypoint "$entry" -p no:cacheprovider -q \
  "$@" 2>&1 | tee "$out/report.txt"
rc=${PIPESTATUS[0]}
set -e
tail -1 "$out/report.txt"
[ "$rc" -eq 0 ] || exit "$rc"
# Interoperability: python-tuf (pinned above) reads a repository written by `kiln tuf-repo`.
rm -rf "$out/interop"
"$venv/bin/python" "$repo/scripts/tuf_interop.py" "$kiln" "$out/interop"
