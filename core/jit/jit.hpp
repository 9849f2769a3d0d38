#pragma once
// The loader's last resort: compile a specialisation from its kernel sources with NVRTC for the
// exact device arch, and keep the cubin in an on-disk cache shared by processes.
//
// NVRTC is dlopen'ed (libnvrtc.so.13, then libnvrtc.so.12, then libnvrtc.so), never linked:
// libkiln must load on machines without it. When the driver's CUDA version is known
// (NvrtcConfig::driver), the first of them whose code that driver runs is taken, so the newest
// NVRTC the driver runs (a 12.x driver gets libnvrtc.so.12 even where libnvrtc.so.13 is
// installed); when none is, JIT is unavailable, naming both versions (docs/compatibility.md).
// probe() is a real capability check (docs/rules.md, Capabilities are checked whole): the
// library loads, every symbol resolves, nvrtcVersion answers, the arch list is read, and a tiny
// program using cuda_fp16.h/cuda_bf16.h compiles to a cubin (the only step that needs
// libnvrtc-builtins and the toolkit headers).
//
// Disk cache, under <cache_dir>/jit/ (format version kJitCacheFormat):
//   <key>.cubin  the image NVRTC produced
//   <key>.json   {"format":1, "uri", "arch":"sm_90", "nvrtc":"13.0", "entries":[...],
//                 "symbols":[...lowered names, in entry order], "cubin_sha256", "cubin_size"}
//   <key>.lock   FileLock: one process compiles a key, the others wait and then read it
// key = SHA-256 over tagged fields: key format, URI, source hash, digest of the source bytes fed
// to NVRTC, NVRTC version, every option, arch. Both files are written with AtomicFile, the json
// last: a reader that finds the json finds a complete cubin, and checks its digest anyway.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/toolkit.hpp"
#include "project/registry.hpp"

namespace kiln::jit {

struct JitCapability {
  bool available = false;
  // The missing piece named, e.g. "libnvrtc.so.13 not found (dlopen: ...)" or
  // "libnvrtc-builtins.so.13.0 missing: test compile failed: ...". Empty when available.
  std::string missing;
  int nvrtc_major = 0, nvrtc_minor = 0;
  std::string library_path;
  std::vector<int> supported_archs;  // nvrtcGetSupportedArchs, e.g. {75, 80, ..., 121}
  std::string include_dir;           // where cuda_fp16.h was found
  // The driver weighed (cuDriverGetVersion's number; 0: not known, not weighed), and the newest
  // NVRTC found whose code it does not run (set only when no NVRTC it runs was found: `missing`
  // then names each library and both versions).
  int driver = 0;
  std::optional<format::CudaVersion> refused_by_driver;
  bool supports(int cc) const;
};

// Why a driver of `driver` (cuDriverGetVersion's number) cannot run what NVRTC `nvrtc` compiles
// (a cubin: the SASS rule of format/toolkit.hpp driver_refuses): "NVRTC 13.0 compiles code that
// needs a driver >= 580 (CUDA 13.0); this driver runs CUDA 12.8"; nullopt when it can, or when
// the driver is not known (0).
std::optional<std::string> nvrtc_driver_refusal(const format::CudaVersion& nvrtc, int driver);

struct JitResult {
  std::string image;                 // cubin bytes
  std::vector<std::string> symbols;  // lowered names of the spec's entries, in order
  std::string cache_path;            // the .cubin file; empty when not_kept
  bool from_cache = false;
  // Why the result has no disk entry: the cache directory could not be written (the path and the
  // system's words, "cannot create /c/jit: Read-only file system"). Empty when it was kept.
  std::string not_kept;
};

class JitCompiler {
 public:
  virtual ~JitCompiler() = default;
  virtual JitCapability probe() = 0;
  // cc = 90 for compute capability 9.0. Throws Error: Unsupported (NVRTC unusable, or arch not
  // in its list), Compile (with NVRTC's log, URI and arch), NotFound (a source missing), Io.
  virtual JitResult compile(const project::Specialisation& spec, const project::Family& family, int cc,
                            const std::string& cache_dir) = 0;
};

constexpr int kJitCacheFormat = 1;

enum class JitLogLevel { Warn, Info };

struct NvrtcConfig {
  // "" = "libnvrtc.so.13", "libnvrtc.so.12", then "libnvrtc.so". When set (the Loader passes
  // LoaderConfig::nvrtc_library, KILN_NVRTC_LIBRARY) only that one is tried.
  std::string library;
  // The driver's CUDA version (cuDriverGetVersion's number, 12080 for CUDA 12.8): a library
  // whose code that driver does not run is passed over (nvrtc_driver_refusal). 0: not known;
  // the first library that loads is taken.
  int driver = 0;
  // Where compile() reads kernels/ files (the loader's package: PackageSourceTree); null =
  // none, and compile() fails with Error{Unsupported}.
  std::shared_ptr<const project::SourceTree> sources;
  // Directory holding cuda_fp16.h (NVRTC 13 has no built-in copy); "" = found next to NVRTC,
  // then <cuda_home>/include, the toolkit libkiln was built with, /usr/local/cuda.
  std::string include_dir;
  // A toolkit to look in for headers (LoaderConfig::cuda_home: KILN_CUDA_HOME, CUDA_HOME or
  // CUDA_PATH); "" = none.
  std::string cuda_home;
  // Lock files go here instead of <cache_dir>/jit (e.g. off a network filesystem).
  std::string lock_dir;
  std::chrono::milliseconds lock_timeout{std::chrono::minutes(10)};
  // Receives warnings (corrupt cache entries) and info lines (compiles); null = the loader's
  // log (log.hpp: warnings unless KILN_LOG=error, info only with KILN_LOG=info|debug).
  std::function<void(JitLogLevel, const std::string&)> log;
};

class NvrtcCompiler : public JitCompiler {
 public:
  explicit NvrtcCompiler(NvrtcConfig config = {});
  JitCapability probe() override;  // cached per process and library
  JitResult compile(const project::Specialisation& spec, const project::Family& family, int cc,
                    const std::string& cache_dir) override;
  // nvrtcCompileProgram calls made by compile() on this object (the probe's not counted).
  int compiles() const { return compiles_.load(); }

 private:
  NvrtcConfig config_;
  std::atomic<int> compiles_{0};
};

std::unique_ptr<JitCompiler> make_nvrtc_compiler();  // NvrtcConfig defaults: no sources
std::unique_ptr<JitCompiler> make_nvrtc_compiler(NvrtcConfig config);

// Pure: the cache key for one compile (hex SHA-256).
struct JitKeyInputs {
  std::string uri;
  std::string source_hash;
  std::string source_bytes_sha256;  // over the (name, content) pairs handed to NVRTC
  int nvrtc_major = 0, nvrtc_minor = 0;
  std::vector<std::string> options;
  int arch = 0;
};
std::string jit_cache_key(const JitKeyInputs& in);

// Pure: the exact-device target JIT builds for a family on compute capability cc: sm_<cc> if
// the family's declared targets admit it (undeclared_target, project/registry.hpp), else
// sm_<cc>a (a family declared only for sm_90a still JITs on a 9.0 device, which is exactly what
// the 'a' target runs on); nullopt when neither is admitted. The loader's JIT tier
// (plan/resolver.hpp jit_refusal) and compile() both ask it.
std::optional<format::Target> jit_target(const project::Family& family, int cc);
// Why jit_target has none: the family's refusal, "family 'x' is declared only for sm_90a".
std::string jit_refusal_reason(const project::Family& family, int cc);
// Pure: the NVRTC options for one family and target (include_dir may be empty).
std::vector<std::string> nvrtc_options(const project::Family& family, const format::Target& target,
                                       const std::string& include_dir);

}  // namespace kiln::jit
