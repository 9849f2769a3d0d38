#!/usr/bin/env bash
# Prints the path of a CPython >= 3.12 interpreter that runs: $KILN_PYTHON, else python3.12 or
# python3.13 on PATH, else $(pyenv root)/versions/3.1[2-9]*/bin/python3. The runtime wheel is
# abi3 for CPython >= 3.12 (docs/python.md), so nothing older can build or test it.
set -euo pipefail
looked=()
runs() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }
if [ -n "${KILN_PYTHON:-}" ]; then
  if runs "$KILN_PYTHON"; then echo "$KILN_PYTHON"; exit 0; fi
  echo "KILN_PYTHON='$KILN_PYTHON' is not a CPython >= 3.12 that runs" >&2
  exit 1
fi
for name in python3.12 python3.13; do
  looked+=("$name on PATH")
  if p="$(command -v "$name")" && runs "$p"; then echo "$p"; exit 0; fi
done
root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
looked+=("$root/versions/3.1[2-9]*/bin/python3")
# The oldest that qualifies: the floor of the abi3 wheel, and the GPU node's version.
for p in $(ls -d "$root"/versions/3.1[2-9]* 2>/dev/null | sort -V); do
  if runs "$p/bin/python3"; then echo "$p/bin/python3"; exit 0; fi
done
echo "no CPython >= 3.12 found; looked at \$KILN_PYTHON (unset), ${looked[*]}." >&2
echo "Install one (Debian: apt-get install python3.12 where packaged; or pyenv install 3.12)" \
  "or set KILN_PYTHON to its path." >&2
exit 1
