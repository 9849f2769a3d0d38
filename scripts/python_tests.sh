#!/usr/bin/env bash
# The Python runtime's tests (tests/python/, pytest) against the runtime wheel as a user gets
# it: builds the wheel into OUTDIR (scripts/build_runtime_wheel.sh; incremental after the
# first build) unless KILN_TEST_RUNTIME_WHEEL names one, pip-installs it into a fresh venv of
# the CPython >= 3.12 interpreter (scripts/find_python312.sh), and runs pytest from an empty
# directory, so `kiln` can only come from that venv (a test asserts it). pytest, numpy, mypy and
# torch come from the pinned tools venv (scripts/python_build_tools.sh), made visible to the
# test venv by a .pth file; kiln is not installed there.
#   scripts/python_tests.sh OUTDIR [PYTEST_ARGS...]
# Environment for the tests: KILN_TEST_RUNTIME_WHEEL, KILN_TEST_KILN_CLI (default build/kiln),
# KILN_TEST_PYTHON, KILN_TEST_SOURCE_DIR, KILN_TEST_PYBUILD. ctest: python.RuntimeWheel.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 1 ] || { echo "usage: $0 OUTDIR [PYTEST_ARGS...]" >&2; exit 2; }
out="$1"
shift
python="$("$repo/scripts/find_python312.sh")"
tools="$("$repo/scripts/python_build_tools.sh" "${KILN_PYBUILD_VENV:-$repo/build/pybuild}")"
wheel="${KILN_TEST_RUNTIME_WHEEL:-}"
if [ -z "$wheel" ]; then
  wheel="$("$repo/scripts/build_runtime_wheel.sh" "$out" | tail -n 1)"
fi
cli="${KILN_TEST_KILN_CLI:-$repo/build/kiln}"
[ -x "$cli" ] || { echo "$0: no kiln CLI at $cli (build kiln_cli, or set KILN_TEST_KILN_CLI)" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/kiln-pytest.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index \
  --find-links "$(dirname "$wheel")" "kiln==$(basename "$wheel" | cut -d- -f2)"
site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
tools_site="$("$tools/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$tools_site" >"$site/kiln-test-tools.pth"

mkdir "$work/run"
cd "$work/run"
KILN_REQUIRE_PYTHON_TESTS=1 KILN_TEST_RUNTIME_WHEEL="$wheel" KILN_TEST_KILN_CLI="$cli" \
  KILN_TEST_PYTHON="$python" KILN_TEST_SOURCE_DIR="$repo" KILN_TEST_PYBUILD="$tools" \
  KILN_TEST_WORK="$work" \
  XDG_CACHE_HOME="$work/cache" \
  "$work/venv/bin/python" -m pytest -p no:cacheprovider \
  --rootdir "$repo/tests/python" "$repo/tests/python" "$@"
