#include "jit.hpp"

#include <dlfcn.h>
#include <nvrtc.h>  // types and prototypes only: libkiln never links NVRTC

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "atomic_file.hpp"
#include "file_lock.hpp"
#include "kiln/error.hpp"
#include "kiln/sha256.hpp"
#include "log.hpp"
#include "untrusted_json.hpp"

#ifndef KILN_CUDA_HOME
#define KILN_CUDA_HOME ""
#endif

namespace kiln {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
  return {"libnvrtc.so.13", "libnvrtc.so"};
}

// Loads the first candidate that dlopens; names every attempt on failure.
std::shared_ptr<NvrtcApi> open_nvrtc(const std::vector<std::string>& candidates,
                                     std::string& missing) {
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
    std::string unresolved;
    auto sym = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, symbol));
      if (!fn) unresolved += (unresolved.empty() ? "" : ", ") + std::string(symbol);
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
      tried += (tried.empty() ? "" : "; ") + api->path + " lacks symbols: " + unresolved;
      continue;  // left loaded: dlclose of NVRTC is not known to be safe
    }
    return api;
  }
  missing = tried;
  return nullptr;
}

bool has_fp16_header(const fs::path& dir) {
  std::error_code ec;
  return !dir.empty() && fs::exists(dir / "cuda_fp16.h", ec) && fs::exists(dir / "cuda_bf16.h", ec);
}

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

std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  size_t n = 0;
  if (api.log_size(prog, &n) != NVRTC_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (api.log(prog, s.data()) != NVRTC_SUCCESS) return "";
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n')) s.pop_back();
  return s;
}

struct ProgramGuard {
  const NvrtcApi& api;
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) api.destroy(&prog);
  }
};

const char* kProbeSource =
    "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
    "extern \"C\" __global__ void kiln_jit_probe(__half* h, __nv_bfloat16* b) {\n"
    "  h[threadIdx.x] = __float2half(1.0f); b[threadIdx.x] = __float2bfloat16(2.0f);\n}\n";

JitCapability run_probe(const NvrtcConfig& config, std::shared_ptr<NvrtcApi>& api_out) {
  JitCapability cap;
  auto api = open_nvrtc(library_candidates(config.library), cap.missing);
  if (!api) return cap;
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

std::pair<JitCapability, std::shared_ptr<NvrtcApi>> probe_cached(const NvrtcConfig& config) {
  std::string key;
  for (const auto& c : library_candidates(config.library)) key += c + "\n";
  key += "include:" + config.include_dir + "\ncuda_home:" + config.cuda_home;
  std::lock_guard<std::mutex> lock(g_probe_mutex);
  auto it = probe_cache().find(key);
  if (it == probe_cache().end()) {
    ProbeEntry e;
    e.cap = run_probe(config, e.api);
    it = probe_cache().emplace(key, std::move(e)).first;
  }
  return {it->second.cap, it->second.api};
}

void default_log(JitLogLevel level, const std::string& line) {
  log(level == JitLogLevel::Warn ? LogLevel::Warn : LogLevel::Info, line);
}

// Cache files are untrusted local bytes: regular files of bounded size only (a FIFO or a link
// to /dev/zero is a miss, and the entry is rebuilt and renamed over it).
std::optional<std::string> read_whole(const fs::path& p) {
  try {
    return read_whole_file(p, limits::kMaxLocalArtifactBytes);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The family's sources and the kernels/ headers they include (same rule as the registry's
// source hash: beside the including file, then at kernels/ root).
std::vector<std::string> source_closure(const Family& family, const SourceTree& tree) {
  if (!family.hashed_files.empty()) return family.hashed_files;
  std::set<std::string> files;
  std::vector<std::string> todo(family.sources.begin(), family.sources.end());
  while (!todo.empty()) {
    std::string path = todo.back();
    todo.pop_back();
    if (!files.insert(path).second) continue;
    auto text = tree.read(path);
    if (!text) continue;  // reported by the caller
    std::string dir = fs::path(path).parent_path().string();
    for (const auto& inc : quoted_includes(*text)) {
      std::string beside = dir.empty() ? inc : dir + "/" + inc;
      if (tree.read(beside))
        todo.push_back(fs::path(beside).lexically_normal().string());
      else if (tree.read(inc))
        todo.push_back(fs::path(inc).lexically_normal().string());
    }
  }
  return {files.begin(), files.end()};
}

std::string arch_name(int cc) { return "sm_" + std::to_string(cc); }

// A cache entry whose json and cubin agree with each other and with the request, or nullopt.
// `problem` says why an existing entry was refused (empty on a plain miss).
std::optional<JitResult> read_entry(const fs::path& cubin_path, const fs::path& json_path,
                                    const Specialisation& spec, const std::string& arch,
                                    std::string& problem) {
  problem.clear();
  auto meta_text = read_whole(json_path);
  if (!meta_text) return std::nullopt;
  try {
    json meta = parse_untrusted_json<json>(*meta_text, json_path.string());
    if (meta.at("format").get<int>() != kJitCacheFormat) {
      problem =
          "format " + quote_json(meta.at("format")) + " is not " + std::to_string(kJitCacheFormat);
      return std::nullopt;
    }
    if (meta.at("uri").get<std::string>() != spec.uri || meta.at("arch") != arch ||
        meta.at("entries").get<std::vector<std::string>>() != spec.entries) {
      problem = "it describes another kernel (" + meta.at("uri").get<std::string>() + ", " +
                meta.at("arch").get<std::string>() + ")";
      return std::nullopt;
    }
    auto image = read_whole(cubin_path);
    if (!image) {
      problem = "its cubin is missing";
      return std::nullopt;
    }
    std::string want = meta.at("cubin_sha256").get<std::string>();
    std::string got = sha256_hex(*image);
    if (got != want || image->size() != meta.at("cubin_size").get<size_t>()) {
      problem = "cubin sha256 " + got + " (" + std::to_string(image->size()) +
                " bytes) does not match the recorded " + want;
      return std::nullopt;
    }
    JitResult res;
    res.image = std::move(*image);
    res.symbols = meta.at("symbols").get<std::vector<std::string>>();
    if (res.symbols.size() != spec.entries.size()) {
      problem = "it lists " + std::to_string(res.symbols.size()) + " symbols for " +
                std::to_string(spec.entries.size()) + " entries";
      return std::nullopt;
    }
    res.cache_path = cubin_path.string();
    res.from_cache = true;
    return res;
  } catch (const json::exception& e) {
    problem = std::string("its json is malformed: ") + e.what();
    return std::nullopt;
  } catch (const Error& e) {
    problem = std::string("its json is refused: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace

bool JitCapability::supports(int cc) const {
  return std::find(supported_archs.begin(), supported_archs.end(), cc) != supported_archs.end();
}

std::optional<Target> jit_target(const Family& family, int cc) {
  for (char suffix : {'\0', 'a'}) {
    Target t;
    t.kind = Target::Kind::Sass;
    t.arch = cc;
    t.suffix = suffix;
    if (rule_allows(family.targets, t)) return t;
  }
  return std::nullopt;
}

std::vector<std::string> nvrtc_options(const Family& family, const Target& target,
                                       const std::string& include_dir) {
  std::vector<std::string> opts = {"--gpu-architecture=" + target.str(), "-std=c++17"};
  if (!include_dir.empty()) opts.push_back("-I" + include_dir);
  opts.insert(opts.end(), family.flags.begin(), family.flags.end());
  return opts;
}

std::string jit_cache_key(const JitKeyInputs& in) {
  Sha256 h;
  h.field("kiln-jit-key", std::to_string(kJitCacheFormat));
  h.field("uri", in.uri);
  h.field("source_hash", in.source_hash);
  h.field("source_bytes", in.source_bytes_sha256);
  h.field("nvrtc", std::to_string(in.nvrtc_major) + "." + std::to_string(in.nvrtc_minor));
  for (const auto& o : in.options) h.field("option", o);
  h.field("arch", std::to_string(in.arch));
  return h.hex();
}

NvrtcCompiler::NvrtcCompiler(NvrtcConfig config) : config_(std::move(config)) {
  if (!config_.sources) config_.sources = std::make_shared<EmbeddedSourceTree>();
  if (!config_.log) config_.log = default_log;
}

JitCapability NvrtcCompiler::probe() { return probe_cached(config_).first; }

JitResult NvrtcCompiler::compile(const Specialisation& spec, const Family& family, int cc,
                                 const std::string& cache_dir) {
  auto [cap, api] = probe_cached(config_);
  if (!cap.available)
    throw Error(ErrorKind::Unsupported,
                "cannot JIT-compile " + spec.uri + ": NVRTC is unavailable: " + cap.missing);
  if (!cap.supports(cc)) {
    std::string list;
    for (int a : cap.supported_archs) list += (list.empty() ? "" : " ") + arch_name(a);
    throw Error(ErrorKind::Unsupported, "cannot JIT-compile " + spec.uri + " for " + arch_name(cc) +
                                            ": NVRTC " + std::to_string(cap.nvrtc_major) + "." +
                                            std::to_string(cap.nvrtc_minor) + " at " +
                                            cap.library_path + " supports only " + list);
  }
  const std::optional<Target> target = jit_target(family, cc);
  if (!target) {
    std::string rules;
    for (const auto& t : family.targets) rules += (rules.empty() ? "" : ", ") + t.text;
    throw Error(ErrorKind::Unsupported, "cannot JIT-compile " + spec.uri + " for " + arch_name(cc) +
                                            ": family '" + family.name + "' is declared only for " +
                                            rules);
  }
  const std::string arch = target->str();
  if (cache_dir.empty())
    throw Error(ErrorKind::Usage, "cannot JIT-compile " + spec.uri + ": no cache directory given");

  // Sources: a generated main file including the family's sources, every kernels/ file it
  // reaches passed as a named header.
  const SourceTree& tree = *config_.sources;
  std::string main_name = "kiln_jit_" + family.name + ".cu";
  std::string main_text;
  for (const auto& s : family.sources) main_text += "#include \"" + s + "\"\n";
  std::vector<std::string> names = source_closure(family, tree), contents;
  Sha256 bytes;
  bytes.field("main", main_text);
  for (const auto& n : names) {
    auto data = tree.read(n);
    if (!data)
      throw Error(ErrorKind::NotFound, "cannot JIT-compile " + spec.uri + ": kernel source '" + n +
                                           "' not found in " + tree.describe());
    bytes.field("file", n);
    bytes.field("content", *data);
    contents.push_back(std::move(*data));
  }

  JitKeyInputs ki;
  ki.uri = spec.uri;
  ki.source_hash = spec.source_hash;
  ki.source_bytes_sha256 = bytes.hex();
  ki.nvrtc_major = cap.nvrtc_major;
  ki.nvrtc_minor = cap.nvrtc_minor;
  ki.options = nvrtc_options(family, *target, cap.include_dir);
  ki.arch = cc;
  const std::string key = jit_cache_key(ki);

  const fs::path dir = fs::path(cache_dir) / "jit";
  const fs::path lock_dir = config_.lock_dir.empty() ? dir : fs::path(config_.lock_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(ErrorKind::Io,
                "cannot create JIT cache directory " + dir.string() + ": " + ec.message());
  fs::create_directories(lock_dir, ec);
  if (ec)
    throw Error(ErrorKind::Io,
                "cannot create lock directory " + lock_dir.string() + ": " + ec.message());
  const fs::path cubin_path = dir / (key + ".cubin");
  const fs::path json_path = dir / (key + ".json");

  std::string problem;
  if (auto hit = read_entry(cubin_path, json_path, spec, arch, problem)) return std::move(*hit);

  // Lock, look again (another process may have finished meanwhile), compile, write, unlock.
  FileLock lock = FileLock::acquire(lock_dir / (key + ".lock"), config_.lock_timeout);
  if (auto hit = read_entry(cubin_path, json_path, spec, arch, problem)) return std::move(*hit);
  // Under this key's lock nobody else writes its files: temporaries left are from a writer
  // that died mid-write, and would otherwise stay forever.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(key + ".cubin.tmp.", 0) == 0 || name.rfind(key + ".json.tmp.", 0) == 0)
      fs::remove(e.path(), ec);
  }
  if (!problem.empty()) {
    config_.log(JitLogLevel::Warn, "JIT cache entry " + json_path.string() + " for " + spec.uri +
                                       " is unusable (" + problem +
                                       "); removing it and compiling again");
    fs::remove(json_path, ec);
    fs::remove(cubin_path, ec);
  }

  ProgramGuard g{*api};
  std::vector<const char*> hdr_data, hdr_names;
  for (size_t i = 0; i < names.size(); ++i) {
    hdr_data.push_back(contents[i].c_str());
    hdr_names.push_back(names[i].c_str());
  }
  const std::string where = spec.uri + " for " + arch + " (NVRTC " +
                            std::to_string(cap.nvrtc_major) + "." +
                            std::to_string(cap.nvrtc_minor) + ")";
  nvrtcResult r = api->create(&g.prog, main_text.c_str(), main_name.c_str(),
                              static_cast<int>(names.size()), hdr_data.data(), hdr_names.data());
  if (r != NVRTC_SUCCESS)
    throw Error(ErrorKind::Compile, "nvrtcCreateProgram failed for " + where + ": " + api->err(r));
  for (const auto& e : spec.entries)
    if ((r = api->add_name(g.prog, e.c_str())) != NVRTC_SUCCESS)
      throw Error(ErrorKind::Compile,
                  "nvrtcAddNameExpression('" + e + "') failed for " + where + ": " + api->err(r));
  std::vector<const char*> opts;
  for (const auto& o : ki.options) opts.push_back(o.c_str());
  ++compiles_;
  r = api->compile(g.prog, static_cast<int>(opts.size()), opts.data());
  if (r != NVRTC_SUCCESS) {
    std::string log = program_log(*api, g.prog);
    throw Error(ErrorKind::Compile, "NVRTC failed to compile " + where + " (" + api->err(r) +
                                        "), sources from " + tree.describe() + ":\n" + log);
  }
  size_t size = 0;
  if ((r = api->cubin_size(g.prog, &size)) != NVRTC_SUCCESS || size == 0)
    throw Error(ErrorKind::Compile,
                "NVRTC produced no cubin for " + where + " (" + api->err(r) + ")");
  JitResult res;
  res.image.resize(size);
  if ((r = api->cubin(g.prog, res.image.data())) != NVRTC_SUCCESS)
    throw Error(ErrorKind::Compile, "nvrtcGetCUBIN failed for " + where + ": " + api->err(r));
  for (const auto& e : spec.entries) {
    const char* lowered = nullptr;
    if ((r = api->lowered(g.prog, e.c_str(), &lowered)) != NVRTC_SUCCESS || !lowered)
      throw Error(ErrorKind::Compile, "no lowered name for entry '" + e + "' of " + where + ": " +
                                          api->err(r) + " (is it a __global__ function?)");
    res.symbols.emplace_back(lowered);
  }

  json meta = {{"format", kJitCacheFormat},
               {"uri", spec.uri},
               {"arch", arch},
               {"nvrtc", std::to_string(cap.nvrtc_major) + "." + std::to_string(cap.nvrtc_minor)},
               {"entries", spec.entries},
               {"symbols", res.symbols},
               {"cubin_sha256", sha256_hex(res.image)},
               {"cubin_size", res.image.size()}};
  // cubin first, json last: the json's presence promises a complete cubin.
  write_file_atomically(cubin_path, res.image);
  write_file_atomically(json_path, meta.dump(2) + "\n");
  config_.log(JitLogLevel::Info, "JIT-compiled " + where + " into " + cubin_path.string());
  res.cache_path = cubin_path.string();
  res.from_cache = false;
  return res;
}

std::unique_ptr<JitCompiler> make_nvrtc_compiler() { return std::make_unique<NvrtcCompiler>(); }

std::unique_ptr<JitCompiler> make_nvrtc_compiler(NvrtcConfig config) {
  return std::make_unique<NvrtcCompiler>(std::move(config));
}

}  // namespace kiln
