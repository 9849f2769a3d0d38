#pragma once
// An NVRTC toolkit: a directory laid out as a CUDA install without nvcc (scripts/nvrtc_toolkit.sh
// makes one from PyPI's NVRTC, ptxas and header wheels): lib64/libnvrtc.so.<major>, bin/ptxas,
// include/ (cuda_fp16.h, cuda_bf16.h, crt/), nvvm/, and version.json naming each component's
// full version. NVRTC is dlopen'ed from that directory and its version read from it (the
// library's nvrtcVersion must agree with version.json's "cuda_nvrtc"). What `kiln build` does
// with it is nvrtc_backend.hpp. docs/packager.md, "Toolkits".
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "builder/toolkit.hpp"

namespace kiln::builder {

// One NVRTC compile's outcome: the PTX when it succeeded, NVRTC's log either way.
struct NvrtcOutput {
  bool ok = false;
  std::string ptx;
  std::string log;
};

// libnvrtc, loaded with dlopen (never dlclose'd: NVRTC keeps threads and state). Thread-safe:
// each compile is its own program.
class NvrtcLibrary {
 public:
  // Loads `path` and the symbols kiln uses; throws Error{Unsupported} naming the path and what
  // is missing.
  static std::shared_ptr<NvrtcLibrary> open(const std::string& path);
  int major() const { return major_; }
  int minor() const { return minor_; }
  std::vector<int> supported_archs() const;  // nvrtcGetSupportedArchs: 50, ..., 90, 100, ...
  // `source` under the program name `name` (what its errors say), with `options`, to PTX;
  // each of `name_expressions` (a kernel, e.g. "kiln::axpy_kernel<float>") is instantiated
  // (nvrtcAddNameExpression).
  NvrtcOutput compile_to_ptx(const std::string& source, const std::string& name,
                             const std::vector<std::string>& options,
                             const std::vector<std::string>& name_expressions) const;

 private:
  struct Api;
  std::shared_ptr<Api> api_;
  int major_ = 0, minor_ = 0;
};

// "12.9.86" from a CUDA install's version.json text (its "cuda_nvrtc" component), or nullopt.
std::optional<std::string> nvrtc_version_from_json(const std::string& text);

// The toolkit in `dir`: probes once (version.json, the library and its version, ptxas and its
// version, the targets both know) and keeps the library loaded for the compiles.
class NvrtcToolkit : public Toolkit {
 public:
  // `found_via` says how the user named it, for messages ("nvrtc:DIR", "KILN_NVRTC_TOOLKIT_12_9").
  NvrtcToolkit(std::string dir, std::string found_via)
      : dir_(std::move(dir)), found_via_(std::move(found_via)) {}
  const ToolkitInfo& info() override;
  // The loaded library (info() first).
  const NvrtcLibrary& library();

 private:
  std::string dir_, found_via_;
  std::optional<ToolkitInfo> info_;
  std::shared_ptr<NvrtcLibrary> lib_;
};

// The codes an NVRTC toolkit builds: ptxas's --gpu-name values (sm_*, compute_*, a/f variants;
// lto_* left out) whose arch NVRTC also supports. Sorted, unique.
std::vector<std::string> nvrtc_codes(const std::vector<std::string>& ptxas_gpu_names,
                                     const std::vector<int>& nvrtc_archs);

}  // namespace kiln::builder
