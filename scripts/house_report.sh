#!/usr/bin/env bash
# The house's counts (scripts/house_report.py says what each one is): arrows back up, circles,
# files spelling each op, and the longest function of each folder, measured by lizard from
# PyPI, pinned, in a venv of its own.
#   scripts/house_report.sh [BUILD_DIR]     BUILD_DIR: a configured build (default build)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$repo/build}"
venv="$build/lizard-venv"
lizard_version="1.17.13"
if [ ! -f "$build/layering.json" ]; then
  echo "house_report: $build/layering.json not found: configure a build first (cmake -S . -B build)" >&2
  exit 2
fi
if ! "$venv/bin/lizard" --version 2>/dev/null | grep -qx "$lizard_version"; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "lizard==$lizard_version"
fi
exec python3 "$repo/scripts/house_report.py" "$build" "$venv/bin/lizard"
