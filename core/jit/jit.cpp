// The JIT compile itself: the target and options for a family, the closure of its sources, the
// NVRTC program, and the cache entry it reads or leaves (jit_internal.hpp names the other files).
#include "jit/jit.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "io/file_lock.hpp"
#include "io/sha256.hpp"
#include "jit/jit_internal.hpp"
#include "kiln/error.hpp"
#include "runtime/log.hpp"

namespace kiln::jit {
namespace fs = std::filesystem;
using detail::ProgramGuard;

namespace {

void default_log(JitLogLevel level, const std::string& line) {
  log(level == JitLogLevel::Warn ? runtime::LogLevel::Warn : runtime::LogLevel::Info, line);
}

// The family's sources and the kernels/ headers they include (same rule as the registry's
// source hash: beside the including file, then at kernels/ root).
std::vector<std::string> source_closure(const project::Family& family, const project::SourceTree& tree) {
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
    for (const auto& inc : project::quoted_includes(*text)) {
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

}  // namespace

namespace {
format::Target exact_sass(int cc, char suffix) {
  format::Target t;
  t.kind = format::Target::Kind::Sass;
  t.arch = cc;
  t.suffix = suffix;
  return t;
}
}  // namespace

std::optional<format::Target> jit_target(const project::Family& family, int cc) {
  for (char suffix : {'\0', 'a'})
    if (!project::undeclared_target(family, exact_sass(cc, suffix))) return exact_sass(cc, suffix);
  return std::nullopt;
}

std::string jit_refusal_reason(const project::Family& family, int cc) {
  // The family's own rule (project/registry.hpp), in its words: the plan's JIT tier refuses
  // with the same sentence before any compile is asked for.
  return project::undeclared_target(family, exact_sass(cc, 0)).value_or(project::declared_only(family));
}

std::vector<std::string> nvrtc_options(const project::Family& family, const format::Target& target,
                                       const std::string& include_dir) {
  std::vector<std::string> opts = {"--gpu-architecture=" + target.str(), "-std=c++17"};
  if (!include_dir.empty()) opts.push_back("-I" + include_dir);
  opts.insert(opts.end(), family.flags.begin(), family.flags.end());
  return opts;
}

NvrtcCompiler::NvrtcCompiler(NvrtcConfig config) : config_(std::move(config)) {
  if (!config_.log) config_.log = default_log;
}

JitCapability NvrtcCompiler::probe() { return detail::probe_cached(config_).first; }

JitResult NvrtcCompiler::compile(const project::Specialisation& spec, const project::Family& family, int cc,
                                 const std::string& cache_dir) {
  auto [cap, api] = detail::probe_cached(config_);
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
  const std::optional<format::Target> target = jit_target(family, cc);
  if (!target)
    throw Error(ErrorKind::Unsupported, "cannot JIT-compile " + spec.uri + " for " + arch_name(cc) +
                                            ": " + jit_refusal_reason(family, cc));
  const std::string arch = target->str();
  if (cache_dir.empty())
    throw Error(ErrorKind::Usage, "cannot JIT-compile " + spec.uri + ": no cache directory given");

  // Sources: a generated main file including the family's sources, every kernels/ file it
  // reaches passed as a named header.
  if (!config_.sources)
    throw Error(ErrorKind::Unsupported,
                "JIT for " + spec.uri + ": no kernel sources were given to this compiler");
  const project::SourceTree& tree = *config_.sources;
  std::string main_name = "kiln_jit_" + family.name + ".cu";
  std::string main_text;
  for (const auto& s : family.sources) main_text += "#include \"" + s + "\"\n";
  std::vector<std::string> names = source_closure(family, tree), contents;
  io::Sha256 bytes;
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
  const fs::path cubin_path = dir / (key + ".cubin");
  const fs::path json_path = dir / (key + ".json");
  // A cache that cannot be written (read-only, full, not a directory) costs the disk entry, not
  // the kernel: the result is compiled and handed back from memory, with the reason in not_kept
  // (docs/loader.md, "When the cache cannot be written"). An entry already there still serves.
  std::string not_kept;
  std::string problem;
  std::optional<io::FileLock> lock;
  std::error_code ec;
  if (auto hit = detail::read_entry(cubin_path, json_path, spec, arch, problem))
    return std::move(*hit);
  for (const fs::path& d : {dir, lock_dir}) {
    fs::create_directories(d, ec);
    if (ec) {
      not_kept = "cannot create " + d.string() + ": " + ec.message();
      break;
    }
  }
  if (not_kept.empty()) {
    // Lock, look again (another process may have finished meanwhile), compile, write, unlock.
    try {
      lock.emplace(io::FileLock::acquire(lock_dir / (key + ".lock"), config_.lock_timeout));
    } catch (const Error& e) {
      // The lock file could not be created or opened (a read-only or full directory): no disk
      // entry. A lock held past its timeout by a live compile stays the error it was.
      if (e.kind() != ErrorKind::Io || std::string_view(e.what()).rfind("cannot open lock file", 0) != 0)
        throw;
      not_kept = e.what();
    }
  }
  if (lock) {
    if (auto hit = detail::read_entry(cubin_path, json_path, spec, arch, problem))
      return std::move(*hit);
    detail::remove_orphaned_temporaries(dir, key);
    if (!problem.empty()) {
      config_.log(JitLogLevel::Warn, "JIT cache entry " + json_path.string() + " for " + spec.uri +
                                         " is unusable (" + problem +
                                         "); removing it and compiling again");
      fs::remove(json_path, ec);
      fs::remove(cubin_path, ec);
    }
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
    std::string log = detail::program_log(*api, g.prog);
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

  if (not_kept.empty()) {
    try {
      detail::write_entry(cubin_path, json_path, spec, arch,
                          std::to_string(cap.nvrtc_major) + "." + std::to_string(cap.nvrtc_minor),
                          res);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Io) throw;
      not_kept = e.what();
      fs::remove(json_path, ec);  // a cubin without its json is a miss; leave neither
      fs::remove(cubin_path, ec);
    }
  }
  res.from_cache = false;
  if (!not_kept.empty()) {
    config_.log(JitLogLevel::Info, "JIT-compiled " + where + " in memory only (" + not_kept + ")");
    res.not_kept = std::move(not_kept);
    return res;
  }
  config_.log(JitLogLevel::Info, "JIT-compiled " + where + " into " + cubin_path.string());
  res.cache_path = cubin_path.string();
  return res;
}

std::unique_ptr<JitCompiler> make_nvrtc_compiler() { return std::make_unique<NvrtcCompiler>(); }

std::unique_ptr<JitCompiler> make_nvrtc_compiler(NvrtcConfig config) {
  return std::make_unique<NvrtcCompiler>(std::move(config));
}

}  // namespace kiln::jit
