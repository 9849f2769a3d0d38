// Loading NVRTC and the capability probe (jit.hpp: probe() is a real capability check).
#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "format/toolkit.hpp"
#include "jit/jit_internal.hpp"
#include "util/join.hpp"

namespace kiln::jit {

namespace detail {
namespace {

struct ProbeEntry {
  JitCapability cap;
  std::shared_ptr<NvrtcApi> api;  // kept for the process lifetime: NVRTC is never dlclose'd
};

std::mutex g_probe_mutex;
std::map<std::string, ProbeEntry>& probe_cache() {
  static std::map<std::string, ProbeEntry> cache;
  return cache;
}

std::vector<std::string> library_candidates(const std::string& configured) {
  if (!configured.empty()) return {configured};
  return {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
}

// Loads the first candidate that dlopens, resolves every symbol and, when the driver is known,
// makes code the driver runs (nvrtc_driver_refusal); names every attempt on failure. The newest
// NVRTC the driver refused is kept in `refused` (the JIT candidate's refusal names it).
std::shared_ptr<NvrtcApi> open_nvrtc(const std::vector<std::string>& candidates, int driver,
                                     std::string& missing,
                                     std::optional<format::CudaVersion>& refused) {
  std::string tried;
  for (const auto& name : candidates) {
    dlerror();
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + name + " not found (dlopen: " + (e ? e : "?") + ")";
      continue;
    }
    auto api = std::make_shared<NvrtcApi>();
    api->handle = h;
    std::vector<const char*> unresolved;
    auto sym = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, symbol));
      if (!fn) unresolved.push_back(symbol);
    };
    sym(api->version, "nvrtcVersion");
    sym(api->num_archs, "nvrtcGetNumSupportedArchs");
    sym(api->archs, "nvrtcGetSupportedArchs");
    sym(api->create, "nvrtcCreateProgram");
    sym(api->destroy, "nvrtcDestroyProgram");
    sym(api->compile, "nvrtcCompileProgram");
    sym(api->log_size, "nvrtcGetProgramLogSize");
    sym(api->log, "nvrtcGetProgramLog");
    sym(api->cubin_size, "nvrtcGetCUBINSize");
    sym(api->cubin, "nvrtcGetCUBIN");
    sym(api->add_name, "nvrtcAddNameExpression");
    sym(api->lowered, "nvrtcGetLoweredName");
    sym(api->error_string, "nvrtcGetErrorString");
    Dl_info info{};
    api->path =
        (api->version && dladdr(reinterpret_cast<void*>(api->version), &info) && info.dli_fname)
            ? info.dli_fname
            : name;
    if (!unresolved.empty()) {
      tried += (tried.empty() ? "" : "; ") + api->path +
               " lacks symbols: " + util::join(unresolved, ", ");
      continue;  // left loaded: dlclose of NVRTC is not known to be safe
    }
    int major = 0, minor = 0;
    if (driver > 0 && api->version(&major, &minor) == NVRTC_SUCCESS) {
      const format::CudaVersion v{major, minor};
      if (auto why = nvrtc_driver_refusal(v, driver)) {
        // libnvrtc.so is often libnvrtc.so.13 again: each library is named once.
        if (tried.find(api->path + ": ") == std::string::npos)
          tried += (tried.empty() ? "" : "; ") + api->path + ": " + *why;
        if (!refused || *refused < v) refused = v;
        continue;  // left loaded, as above
      }
    }
    return api;
  }
  missing = tried;
  return nullptr;
}

const char* kProbeSource =
    "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
    "extern \"C\" __global__ void kiln_jit_probe(__half* h, __nv_bfloat16* b) {\n"
    "  h[threadIdx.x] = __float2half(1.0f); b[threadIdx.x] = __float2bfloat16(2.0f);\n}\n";

JitCapability run_probe(const NvrtcConfig& config, std::shared_ptr<NvrtcApi>& api_out) {
  JitCapability cap;
  cap.driver = config.driver;
  auto api = open_nvrtc(library_candidates(config.library), config.driver, cap.missing,
                        cap.refused_by_driver);
  if (!api) {
    if (cap.refused_by_driver)
      cap.missing = "no NVRTC that this driver (" + format::driver_words(config.driver) +
                    ") runs: " + cap.missing;
    return cap;
  }
  cap.library_path = api->path;
  if (nvrtcResult r = api->version(&cap.nvrtc_major, &cap.nvrtc_minor); r != NVRTC_SUCCESS) {
    cap.missing = "nvrtcVersion failed in " + api->path + ": " + api->err(r);
    return cap;
  }
  int n = 0;
  if (nvrtcResult r = api->num_archs(&n); r != NVRTC_SUCCESS || n <= 0) {
    cap.missing = "nvrtcGetNumSupportedArchs failed in " + api->path + ": " + api->err(r);
    return cap;
  }
  cap.supported_archs.resize(static_cast<size_t>(n));
  if (nvrtcResult r = api->archs(cap.supported_archs.data()); r != NVRTC_SUCCESS) {
    cap.missing = "nvrtcGetSupportedArchs failed in " + api->path + ": " + api->err(r);
    cap.supported_archs.clear();
    return cap;
  }
  std::string looked;
  cap.include_dir = find_include_dir(config.include_dir, config.cuda_home, api->path, looked);
  if (cap.include_dir.empty()) {
    cap.missing = "cuda_fp16.h/cuda_bf16.h not found (NVRTC has no built-in copy); looked in " +
                  looked + "; set KILN_CUDA_HOME to the CUDA toolkit";
    return cap;
  }
  // Only a compile needs libnvrtc-builtins and the headers: version and arch queries succeed
  // without them, so the probe must compile.
  ProgramGuard g{*api};
  int arch = cap.supported_archs.front();
  std::string opt_arch = "--gpu-architecture=sm_" + std::to_string(arch);
  std::string opt_inc = "-I" + cap.include_dir;
  const char* opts[] = {opt_arch.c_str(), "-std=c++17", opt_inc.c_str()};
  std::string builtins = "libnvrtc-builtins.so." + std::to_string(cap.nvrtc_major) + "." +
                         std::to_string(cap.nvrtc_minor);
  nvrtcResult r = api->create(&g.prog, kProbeSource, "kiln_jit_probe.cu", 0, nullptr, nullptr);
  if (r == NVRTC_SUCCESS) r = api->compile(g.prog, 3, opts);
  if (r != NVRTC_SUCCESS) {
    std::string log = g.prog ? program_log(*api, g.prog) : "";
    std::string what = log.find("builtins") != std::string::npos ? builtins + " missing"
                       : (log.find("cuda_fp16.h") != std::string::npos ||
                          log.find("cuda_bf16.h") != std::string::npos)
                           ? "toolkit headers in " + cap.include_dir + " unusable"
                           : "NVRTC unusable";
    cap.missing = what + ": test compile for sm_" + std::to_string(arch) + " with " + api->path +
                  " failed (" + api->err(r) + ")" + (log.empty() ? "" : ": " + log);
    return cap;
  }
  size_t size = 0;
  if (api->cubin_size(g.prog, &size) != NVRTC_SUCCESS || size == 0) {
    cap.missing =
        "test compile with " + api->path + " produced no cubin for sm_" + std::to_string(arch);
    return cap;
  }
  cap.available = true;
  api_out = api;
  return cap;
}

}  // namespace

std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  size_t n = 0;
  if (api.log_size(prog, &n) != NVRTC_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (api.log(prog, s.data()) != NVRTC_SUCCESS) return "";
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

std::pair<JitCapability, std::shared_ptr<NvrtcApi>> probe_cached(const NvrtcConfig& config) {
  std::string key;
  for (const auto& c : library_candidates(config.library)) key += c + "\n";
  key += "include:" + config.include_dir + "\ncuda_home:" + config.cuda_home +
         "\ndriver:" + std::to_string(config.driver);
  std::lock_guard<std::mutex> lock(g_probe_mutex);
  auto it = probe_cache().find(key);
  if (it == probe_cache().end()) {
    ProbeEntry e;
    e.cap = run_probe(config, e.api);
    it = probe_cache().emplace(key, std::move(e)).first;
  }
  return {it->second.cap, it->second.api};
}

}  // namespace detail

std::optional<std::string> nvrtc_driver_refusal(const format::CudaVersion& nvrtc, int driver) {
  if (driver <= 0) return std::nullopt;
  // NVRTC's result is a cubin: SASS of the NVRTC's toolkit, the SASS rule of format/toolkit.hpp.
  if (!format::driver_refuses(nvrtc, /*ptx=*/false, driver)) return std::nullopt;
  return "NVRTC " + nvrtc.str() + " compiles code that needs " +
         format::driver_needed(nvrtc, /*ptx=*/false) + "; this driver runs " +
         format::driver_words(driver);
}

bool JitCapability::supports(int cc) const {
  return std::find(supported_archs.begin(), supported_archs.end(), cc) != supported_archs.end();
}

}  // namespace kiln::jit
