#!/usr/bin/env bash
# Prints the path of a CPython X.Y interpreter with its headers (Python.h), the one that builds
# the runtime wheel for that version (scripts/build_manylinux_wheel.sh; docs/wheels.md, "Where
# the interpreters come from"):
#   scripts/find_python.sh X.Y
# It takes, in this order: $KILN_PYTHON<X><Y> (e.g. KILN_PYTHON310), pythonX.Y on PATH, then
# $(pyenv root)/versions/X.Y.*/bin/python3 (the newest patch release). A candidate counts only
# when it runs, is version X.Y and has its headers. Nothing found: exit 1, naming every place it
# looked and how to get one.
set -euo pipefail
[ $# -eq 1 ] && [[ "$1" =~ ^3\.[0-9]+$ ]] || { echo "usage: $0 X.Y (e.g. 3.10)" >&2; exit 2; }
want="$1"
var="KILN_PYTHON${want/./}"
looked=()
fits() {
  "$1" -c "import sys, sysconfig, os
ok = '%d.%d' % sys.version_info[:2] == '$want' and sys.implementation.name == 'cpython'
ok = ok and os.path.isfile(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))
sys.exit(0 if ok else 1)" 2>/dev/null
}
# The interpreter itself, not a launcher in front of it (pyenv's shims).
real() { "$1" -c 'import sys; print(sys.executable)'; }
if [ -n "${!var:-}" ]; then
  if fits "${!var}"; then real "${!var}"; exit 0; fi
  echo "$var='${!var}' is not a CPython $want that runs and has its headers (Python.h)" >&2
  exit 1
fi
looked+=("\$$var (unset)" "python$want on PATH")
if p="$(command -v "python$want")" && fits "$p"; then real "$p"; exit 0; fi
root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
looked+=("$root/versions/$want.*/bin/python3")
for d in $(ls -d "$root/versions/$want".* 2>/dev/null | sort -rV); do
  if fits "$d/bin/python3"; then real "$d/bin/python3"; exit 0; fi
done
echo "no CPython $want with its headers; looked at ${looked[*]}." >&2
echo "Get one with pyenv (pyenv install $want), or your distribution's python$want and" \
  "python$want-dev (and python$want-venv on Debian), or set $var to its path." >&2
exit 1
