// The toolkit headers NVRTC needs and does not ship (cuda_fp16.h, cuda_bf16.h).
#include <filesystem>
#include <system_error>
#include <vector>

#include "jit/jit_internal.hpp"

#ifndef KILN_CUDA_HOME
#define KILN_CUDA_HOME ""
#endif

namespace kiln::jit::detail {
namespace fs = std::filesystem;

namespace {

bool has_fp16_header(const fs::path& dir) {
  std::error_code ec;
  return !dir.empty() && fs::exists(dir / "cuda_fp16.h", ec) && fs::exists(dir / "cuda_bf16.h", ec);
}

}  // namespace

// NVRTC 13 ships no cuda_fp16.h; the toolkit headers are found beside the library first so
// that headers and compiler come from one installation.
std::string find_include_dir(const std::string& configured, const std::string& cuda_home,
                             const std::string& library_path, std::string& looked) {
  std::vector<fs::path> candidates;
  if (!configured.empty()) {
    candidates.push_back(configured);
  } else {
    fs::path libdir = fs::path(library_path).parent_path();
    if (!libdir.empty()) {
      candidates.push_back(libdir.parent_path() / "include");
      candidates.push_back(libdir.parent_path() / "targets" / "x86_64-linux" / "include");
      candidates.push_back(libdir.parent_path() / "targets" / "sbsa-linux" / "include");
    }
    if (!cuda_home.empty()) candidates.push_back(fs::path(cuda_home) / "include");
    if (*KILN_CUDA_HOME) candidates.push_back(fs::path(KILN_CUDA_HOME) / "include");
    candidates.push_back("/usr/local/cuda/include");
  }
  for (const auto& c : candidates) {
    looked += (looked.empty() ? "" : ", ") + c.string();
    if (has_fp16_header(c)) return c.lexically_normal().string();
  }
  return "";
}

}  // namespace kiln::jit::detail
