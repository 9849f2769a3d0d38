#pragma once
// Small helpers shared by the tests: temp directories, files, running the kiln CLI.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "kiln/error.hpp"
#include "kiln/kernels.h"
#include "project/package.hpp"

// The text `hay` holds `needle`; the failure shows both.
#define EXPECT_CONTAINS(hay, needle)                          \
  EXPECT_NE(std::string(hay).find(needle), std::string::npos) \
      << "missing '" << (needle) << "' in:\n"                 \
      << (hay)

namespace kiln::test {

namespace fs = std::filesystem;

// The reference package (kiln's own kernels) as a loader sees it: the description generated at
// build time, linked into every test program (tests/CMakeLists.txt).
inline const kiln_package& reference_description() { return *kiln_kernels_package(); }
inline const project::Package& reference_package() {
  static const project::Package p(kiln_kernels_package());
  return p;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    // Read-only trees made by tests must still be removable.
    for (auto it = fs::recursive_directory_iterator(path_, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  fs::path path_;
};

inline void write_file(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line and captures its output and exit code.
inline RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string kiln_cli() { return KILN_CLI_PATH; }

// The NVRTC toolkit directory the tests build with (KILN_TEST_NVRTC_TOOLKIT, laid out by
// scripts/nvrtc_toolkit.sh; ci/test.sh sets it), or "" when unset or not such a directory.
inline std::string nvrtc_test_toolkit() {
  const char* dir = std::getenv("KILN_TEST_NVRTC_TOOLKIT");
  if (!dir || !*dir || !std::filesystem::exists(std::filesystem::path(dir) / "version.json"))
    return "";
  return dir;
}

// Prefix for a CLI run whose process really compiles with NVRTC (`kiln doctor`'s JIT probe on
// an empty cache). Under AddressSanitizer, LeakSanitizer's exit-time tracer crashes with
// SIGSEGV on the threads NVRTC leaves behind and turns a clean exit into exit code 1
// (reproduced with gcc 12 + CUDA 13.0's libnvrtc; not a leak, no report is ever printed).
// Leak checking stays on for every other child process and for the test binaries themselves.
inline std::string nvrtc_child_env() {
#if defined(__SANITIZE_ADDRESS__)
  return "ASAN_OPTIONS=detect_leaks=0 ";
#else
  return "";
#endif
}
inline std::string source_dir() { return KILN_TEST_SOURCE_DIR; }
// The folder of the stand-in libcuda.so.1 the build makes from bench/stand_in_libcuda.c
// (-DKILN_BUILD_BENCH=ON), to put first on a child's LD_LIBRARY_PATH; empty when there is none.
inline std::filesystem::path stand_in_libcuda_dir() {
  const std::filesystem::path dir =
      std::filesystem::path(KILN_TEST_BINARY_DIR) / "bench" / "stand-in";
  return std::filesystem::exists(dir / "libcuda.so.1") ? dir : std::filesystem::path();
}

// A sweep over many generated cases checks every kSweepStride-th one under the sanitizers
// (ci/test.sh's asan stage, where each case costs 50 to 100 times more); the plain build of the
// same CI run checks them all.
#ifdef KILN_SANITIZED
constexpr int kSweepStride = 8;
#else
constexpr int kSweepStride = 1;
#endif

// The message of the kiln::Error `fn` throws, which must be of `kind` (a failure otherwise).
inline std::string error_of(ErrorKind kind, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

}  // namespace kiln::test
