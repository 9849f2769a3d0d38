#!/usr/bin/env bash
# What a user of this machine notices of a release's runtime wheels (docs/wheels.md, "The runtime
# wheels"): for each interpreter given, a fresh venv, `pip install --no-index --find-links DIR
# kiln` (pip picks the wheel of that Python and this machine's architecture from all of them),
# then `python -m kiln doctor`, which must answer with its first line
# "kiln <version> (Python runtime, ...)" and exit 0 (all there) or 5 (something missing, e.g.
# no GPU here); and import kiln.
#   scripts/check_runtime_wheels.sh DIR PYTHON...
# DIR: a directory of wheels (the release's mirror or dist). Prints one line per interpreter:
# the Python, the wheel pip chose, doctor's exit code.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DIR PYTHON..." >&2; exit 2; }
dir="$(cd "$1" && pwd)"
shift
version="$(cat "$(dirname "$0")/../VERSION")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0
for python in "$@"; do
  v="$work/venv-$(basename "$python")-$RANDOM"
  pyver="$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
  if ! "$python" -m venv "$v" >"$work/log" 2>&1; then
    echo "$python ($pyver): no venv:" >&2; cat "$work/log" >&2; failed=1; continue
  fi
  if ! "$v/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
      --find-links "$dir" "kiln==$version" >"$work/log" 2>&1; then
    echo "$python ($pyver): pip install kiln==$version from $dir failed:" >&2
    cat "$work/log" >&2
    failed=1
    continue
  fi
  wheel="$("$v/bin/python" -c 'import importlib.metadata as m; d = m.distribution("kiln"); print(d.read_text("WHEEL").split("Tag: ")[1].split()[0])')"
  rc=0
  (cd "$work" && "$v/bin/python" -m kiln doctor) >"$work/doctor" 2>&1 || rc=$?
  first="$(head -n 1 "$work/doctor")"
  if [[ "$first" != "kiln $version (Python runtime, "* ]] || { [ "$rc" != 0 ] && [ "$rc" != 5 ]; }; then
    echo "$python ($pyver): python -m kiln doctor did not answer (exit $rc):" >&2
    cat "$work/doctor" >&2
    failed=1
    continue
  fi
  (cd "$work" && "$v/bin/python" -c 'import kiln, kiln._kiln') ||
    { echo "$python ($pyver): import kiln failed" >&2; failed=1; continue; }
  echo "$python ($pyver): kiln $wheel, doctor exit $rc: $first"
done
exit "$failed"
