#pragma once
// What the files of the NVRTC JIT share; jit.hpp stays the interface the rest of the core uses.
//   nvrtc_library.cpp  loading NVRTC (candidates, dlopen, symbol table) and the capability
//                      probe, cached per process and configuration
//   jit_headers.cpp    finding the toolkit headers NVRTC 13 lacks (cuda_fp16.h, cuda_bf16.h)
//   jit_cache.cpp      the on-disk cache under <cache_dir>/jit: key, entries read and written
//   jit.cpp            the compile: target, options, source closure, the NVRTC program
#include <nvrtc.h>  // types and prototypes only: libkiln never links NVRTC

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "jit/jit.hpp"
#include "project/registry.hpp"

namespace kiln::jit::detail {

// --- nvrtc_library.cpp

// Every NVRTC entry point compile() and probe() use; all must resolve or JIT is unavailable.
struct NvrtcApi {
  void* handle = nullptr;
  std::string path;
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetNumSupportedArchs) num_archs = nullptr;
  decltype(&nvrtcGetSupportedArchs) archs = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcAddNameExpression) add_name = nullptr;
  decltype(&nvrtcGetLoweredName) lowered = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;

  std::string err(nvrtcResult r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? s : "NVRTC error " + std::to_string(static_cast<int>(r));
  }
};

// Destroys the program it holds, if any.
struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) api.destroy(&prog);
  }
};

// The program's log without trailing NULs and newlines; "" when there is none.
std::string program_log(const NvrtcApi& api, nvrtcProgram prog);

// The probe's verdict for `config`, run once per process and configuration, and the loaded
// library when it is available (null otherwise; never dlclose'd).
std::pair<JitCapability, std::shared_ptr<NvrtcApi>> probe_cached(const NvrtcConfig& config);

// --- jit_headers.cpp

// The directory holding cuda_fp16.h and cuda_bf16.h: `configured` alone when set, else beside
// the NVRTC library, <cuda_home>/include, the toolkit libkiln was built with, /usr/local/cuda.
// "" when none has them; `looked` lists every directory tried.
std::string find_include_dir(const std::string& configured, const std::string& cuda_home,
                             const std::string& library_path, std::string& looked);

// --- jit_cache.cpp

// A cache entry whose json and cubin agree with each other and with the request, or nullopt.
// `problem` says why an existing entry was refused (empty on a plain miss).
std::optional<JitResult> read_entry(const std::filesystem::path& cubin_path,
                                    const std::filesystem::path& json_path,
                                    const project::Specialisation& spec, const std::string& arch,
                                    std::string& problem);

// Removes the temporaries of `key`'s files in `dir`. Only under the key's lock: they are then
// left by a writer that died mid-write, and would otherwise stay forever.
void remove_orphaned_temporaries(const std::filesystem::path& dir, const std::string& key);

// Writes `res` (image and symbols) as the entry for `spec` on `arch`: the cubin first, the json
// last, so that the json's presence promises a complete cubin.
void write_entry(const std::filesystem::path& cubin_path, const std::filesystem::path& json_path,
                 const project::Specialisation& spec, const std::string& arch,
                 const std::string& nvrtc_version, const JitResult& res);

}  // namespace kiln::jit::detail
