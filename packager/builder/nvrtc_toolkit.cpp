// An NVRTC toolkit directory and its library (nvrtc_toolkit.hpp).
#include "builder/nvrtc_toolkit.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_file.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

// The NVRTC entry points kiln calls, by their C signatures (nvrtc.h; nvrtcProgram is a pointer,
// nvrtcResult an int).
struct NvrtcLibrary::Api {
  using Program = void*;
  int (*version)(int*, int*) = nullptr;
  int (*num_archs)(int*) = nullptr;
  int (*archs)(int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*,
                const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*add_name)(Program, const char*) = nullptr;
  int (*ptx_size)(Program, std::size_t*) = nullptr;
  int (*ptx)(Program, char*) = nullptr;
  int (*log_size)(Program, std::size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

std::shared_ptr<NvrtcLibrary> NvrtcLibrary::open(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = ::dlerror();
    throw Error(ErrorKind::Unsupported,
                "cannot load NVRTC from " + path + ": " + (why ? why : "dlopen failed"));
  }
  auto api = std::make_shared<Api>();
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
    if (!fn) throw Error(ErrorKind::Unsupported, path + " lacks the NVRTC function " + name);
  };
  sym(api->version, "nvrtcVersion");
  sym(api->num_archs, "nvrtcGetNumSupportedArchs");
  sym(api->archs, "nvrtcGetSupportedArchs");
  sym(api->create, "nvrtcCreateProgram");
  sym(api->compile, "nvrtcCompileProgram");
  sym(api->add_name, "nvrtcAddNameExpression");
  sym(api->ptx_size, "nvrtcGetPTXSize");
  sym(api->ptx, "nvrtcGetPTX");
  sym(api->log_size, "nvrtcGetProgramLogSize");
  sym(api->log, "nvrtcGetProgramLog");
  sym(api->destroy, "nvrtcDestroyProgram");
  sym(api->error_string, "nvrtcGetErrorString");
  auto lib = std::shared_ptr<NvrtcLibrary>(new NvrtcLibrary());
  if (api->version(&lib->major_, &lib->minor_) != 0)
    throw Error(ErrorKind::Unsupported, "nvrtcVersion failed in " + path);
  lib->api_ = std::move(api);
  return lib;
}

std::vector<int> NvrtcLibrary::supported_archs() const {
  int n = 0;
  if (api_->num_archs(&n) != 0 || n < 0 || n > 1000) return {};
  std::vector<int> out(static_cast<std::size_t>(n));
  if (n > 0 && api_->archs(out.data()) != 0) return {};
  return out;
}

NvrtcOutput NvrtcLibrary::compile_to_ptx(const std::string& source, const std::string& name,
                                         const std::vector<std::string>& options,
                                         const std::vector<std::string>& name_expressions) const {
  NvrtcOutput out;
  Api::Program prog = nullptr;
  int rc = api_->create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != 0) {
    out.log = std::string("nvrtcCreateProgram: ") + api_->error_string(rc);
    return out;
  }
  for (const auto& e : name_expressions) {
    rc = api_->add_name(prog, e.c_str());
    if (rc != 0) {
      out.log = "nvrtcAddNameExpression(" + e + "): " + api_->error_string(rc);
      api_->destroy(&prog);
      return out;
    }
  }
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  rc = api_->compile(prog, static_cast<int>(argv.size()), argv.data());
  std::size_t n = 0;
  if (api_->log_size(prog, &n) == 0 && n > 1) {
    std::string log(n, '\0');
    if (api_->log(prog, log.data()) == 0) out.log = log.substr(0, n - 1);
  }
  if (rc == 0 && api_->ptx_size(prog, &n) == 0 && n > 1) {
    std::string ptx(n, '\0');
    if (api_->ptx(prog, ptx.data()) == 0) {
      out.ptx = ptx.substr(0, n - 1);
      out.ok = true;
    }
  }
  if (rc != 0)
    out.log += (out.log.empty() || out.log.back() == '\n' ? "" : "\n") +
               std::string("nvrtcCompileProgram: ") + api_->error_string(rc) + "\n";
  api_->destroy(&prog);
  return out;
}

std::optional<std::string> nvrtc_version_from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("cuda_nvrtc") || !j["cuda_nvrtc"].is_object()) return std::nullopt;
  const auto& v = j["cuda_nvrtc"]["version"];
  if (!v.is_string()) return std::nullopt;
  return v.get<std::string>();
}

std::vector<std::string> nvrtc_codes(const std::vector<std::string>& ptxas_gpu_names,
                                     const std::vector<int>& nvrtc_archs) {
  std::set<std::string> out;
  for (const auto& n : ptxas_gpu_names) {
    auto t = format::parse_target(n);
    if (!t) continue;  // lto_* and anything else ptxas lists
    if (std::find(nvrtc_archs.begin(), nvrtc_archs.end(), t->arch) != nvrtc_archs.end())
      out.insert(n);
  }
  return {out.begin(), out.end()};
}

namespace {

std::string run_nvrtc_tool(const std::string& path, const std::vector<std::string>& args) {
  if (::access(path.c_str(), X_OK) != 0)
    throw Error(ErrorKind::Unsupported, path + " is missing or not executable (an NVRTC toolkit "
                                               "needs its ptxas; scripts/nvrtc_toolkit.sh lays one out)");
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run_process(argv);
  if (r.exit_code != 0)
    throw Error(ErrorKind::Unsupported, path + " failed with exit code " +
                                            std::to_string(r.exit_code) + ":\n" + r.output);
  return r.output;
}

}  // namespace

const ToolkitInfo& NvrtcToolkit::info() {
  if (info_) return *info_;
  ToolkitInfo tk;
  tk.kind = ToolkitInfo::Kind::Nvrtc;
  tk.root = fs::absolute(dir_).lexically_normal().string();
  tk.found_via = found_via_;
  const fs::path root(tk.root);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw Error(ErrorKind::Unsupported, "NVRTC toolkit " + tk.root + " (" + found_via_ +
                                            ") is not a directory; scripts/nvrtc_toolkit.sh DIR "
                                            "lays one out");
  const fs::path vj = root / "version.json";
  std::string text;
  try {
    text = io::read_whole_file(vj, std::uint64_t{1} << 20);
  } catch (const Error& e) {
    throw Error(ErrorKind::Unsupported, "NVRTC toolkit " + tk.root + " has no readable "
                                            "version.json naming its NVRTC: " + e.what());
  }
  auto full = nvrtc_version_from_json(text);
  auto dot = full ? full->find('.') : std::string::npos;
  auto dot2 = full && dot != std::string::npos ? full->find('.', dot + 1) : std::string::npos;
  if (!full || dot == std::string::npos)
    throw Error(ErrorKind::Unsupported, vj.string() + " names no \"cuda_nvrtc\" version");
  tk.full_version = *full;
  tk.version = full->substr(0, dot2);
  const std::string major = full->substr(0, dot);
  for (const char* lib : {"lib64", "lib"}) {
    fs::path p = root / lib / ("libnvrtc.so." + major);
    if (fs::exists(p, ec)) {
      tk.nvrtc_library = p.string();
      break;
    }
  }
  if (tk.nvrtc_library.empty())
    throw Error(ErrorKind::Unsupported, "NVRTC toolkit " + tk.root + " has no lib64/libnvrtc.so." +
                                            major + " (its version.json says NVRTC " + *full + ")");
  lib_ = NvrtcLibrary::open(tk.nvrtc_library);
  const std::string loaded = std::to_string(lib_->major()) + "." + std::to_string(lib_->minor());
  if (loaded != tk.version)
    throw Error(ErrorKind::Unsupported, tk.nvrtc_library + " is NVRTC " + loaded + ", but " +
                                            vj.string() + " says " + *full);
  tk.ptxas = (root / "bin" / "ptxas").string();
  auto pv = parse_nvcc_version(run_nvrtc_tool(tk.ptxas, {"--version"}));
  if (!pv || pv->first != tk.version)
    throw Error(ErrorKind::Unsupported, tk.ptxas + " is not the ptxas of CUDA " + tk.version +
                                            " (NVRTC " + *full + ")");
  tk.ptxas_version = pv->second;
  tk.codes = nvrtc_codes(parse_allowed_values(run_nvrtc_tool(tk.ptxas, {"--help"}), "--gpu-name"),
                         lib_->supported_archs());
  if (tk.codes.empty())
    throw Error(ErrorKind::Unsupported, "NVRTC toolkit " + tk.root + ": its NVRTC and ptxas "
                                            "share no target");
  if (!fs::exists(root / "include" / "cuda_fp16.h", ec))
    throw Error(ErrorKind::Unsupported, "NVRTC toolkit " + tk.root + " has no include/cuda_fp16.h "
                                            "(the CUDA runtime headers NVRTC needs)");
  tk.include_dirs = {(root / "include").string()};
  // The probe compiles: a library whose builtins are missing still answers its version and
  // archs, and fails only here (docs/decisions.md, "The probe compiles").
  NvrtcOutput probe = lib_->compile_to_ptx(
      "#include <cuda_fp16.h>\nextern \"C\" __global__ void kiln_probe() {}\n", "kiln_probe.cu",
      {"-std=c++17", "-I" + tk.include_dirs.front()}, {});
  if (!probe.ok)
    throw Error(ErrorKind::Unsupported, "NVRTC " + *full + " at " + tk.nvrtc_library +
                                            " cannot compile a test kernel:\n" + probe.log);
  info_ = std::move(tk);
  return *info_;
}

const NvrtcLibrary& NvrtcToolkit::library() {
  info();
  return *lib_;
}

}  // namespace kiln::builder
