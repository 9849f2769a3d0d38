// `kiln doctor [--json] [--require-gpu]`: every capability kiln needs, each line a fact that
// was checked (the library loaded and answered, the binary ran, a file was really created);
// whether loading can work is decided from them by judge_loading (plan/load_readiness.hpp).
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands/commands.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "kiln/version.hpp"
#include "plan/doctor_probes.hpp"
#include "plan/load_readiness.hpp"
#include "plan/resolver.hpp"
#include "runtime/driver.hpp"
#include "runtime/environment.hpp"
#include "runtime/lazy_libs.hpp"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct ToolFact {
  std::string name, path, version, detail;
  bool runnable = false;
};

std::string find_tool(const std::string& name) {
  std::vector<std::string> dirs;
  const Environment env = read_environment();  // the one table of variables (environment.hpp)
  if (!env.cuda_home.empty()) dirs.push_back(env.cuda_home + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  {
    std::string cur;
    for (const char* c = env.path.c_str();; ++c) {
      if (*c == ':' || *c == 0) {
        if (!cur.empty()) dirs.push_back(cur);
        cur.clear();
        if (!*c) break;
      } else {
        cur += *c;
      }
    }
  }
  for (const auto& d : dirs) {
    std::string path = d + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

ToolFact probe_tool(const std::string& name) {
  ToolFact t;
  t.name = name;
  t.path = find_tool(name);
  if (t.path.empty()) {
    t.detail = "not found in $CUDA_HOME/bin, /usr/local/cuda/bin or PATH";
    return t;
  }
  std::string out;
  FILE* p = ::popen(("'" + t.path + "' --version 2>&1").c_str(), "r");
  if (!p) {
    t.detail = "cannot run";
    return t;
  }
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = ::pclose(p);
  std::string last;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t e = out.find('\n', pos);
    std::string line = out.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
    // "Cuda compilation tools, release 13.0, V13.0.88" is the line that names the version.
    if (!line.empty() &&
        (last.find("release ") == std::string::npos || line.find("release ") != std::string::npos))
      last = line;
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  if (st != 0) {
    t.detail = "`" + name + " --version` failed (status " + std::to_string(st) + "): " + last;
    return t;
  }
  t.runnable = true;
  t.version = last;
  return t;
}

// Really creates and deletes a file: permissions bits alone do not tell (read-only mounts,
// quotas, root).
std::string check_writable(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create it: " + ec.message();
  std::string probe = dir + "/.kiln-doctor-" + std::to_string(static_cast<long>(::getpid()));
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) return std::string("cannot create a file in it: ") + std::strerror(errno);
  bool ok = std::fputs("probe\n", f) >= 0;
  ok = (std::fclose(f) == 0) && ok;
  if (std::remove(probe.c_str()) != 0 || !ok) return "cannot write and delete a file in it";
  return "";
}

}  // namespace

void add_doctor_command(CLI::App& app, int& rc);
void add_doctor_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "check every capability kiln needs on this machine: CUDA driver and devices, NVRTC, "
      "nvcc/ptxas/nvlink/fatbinary, the cache directory (really writes a file), the "
      "configured stores and mirrors, whether libcurl and libarchive load (libkiln loads them "
      "only for mirrors and archives). Exit 0 when loading can work here: the driver loads "
      "and reports a device, the cache directory is writable, every KILN_ARTIFACT_PATH store "
      "is readable, and each device is served by a store holding an archive that runs on it, "
      "a mirror that was reached, or a usable JIT; else 5 (unsupported), each missing piece "
      "named (`missing` in --json).");
  struct Opts {
    bool json = false;
    bool require_gpu = false;
    PackageOptions pkg;
  };
  auto o = std::make_shared<Opts>();
  add_package_options(cmd, o->pkg);
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->add_flag("--require-gpu", o->require_gpu,
                "exit 5 unless the driver loads and reports at least one device (always "
                "required now; kept for scripts that pass it)");
  cmd->callback([o, &rc] {
    LoaderConfig cfg = LoaderConfig::from_env();
    LoadFacts facts;  // what the verdict is decided from (plan/load_readiness.hpp)
    Json j;
    j["kiln"] = {{"version", version()}, {"commit", git_commit()}, {"cuda", cuda_full_version()}};

    // Driver and devices.
    auto driver = make_cuda_driver();
    Json jd;
    std::vector<DeviceInfo> devs;
    try {
      driver->init();
      int v = driver->driver_version();
      devs = driver->devices();
      jd = {{"available", true},
            {"library", kCudaDriverLibrary},
            {"version", std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10)}};
      facts.driver_loads = true;
    } catch (const Error& e) {
      jd = {{"available", false}, {"library", kCudaDriverLibrary}, {"detail", e.what()}};
      facts.driver_problem = e.what();
    }
    for (const auto& d : devs) facts.device_ccs.push_back(d.cc);
    j["driver"] = jd;
    j["devices"] = Json::array();
    for (const auto& d : devs)
      j["devices"].push_back({{"ordinal", d.ordinal},
                              {"name", d.name},
                              {"compute_capability", cc_string(d.cc)},
                              {"target", device_target(d.cc)}});

    // NVRTC: the real probe compiles a test program.
    NvrtcConfig nc;
    nc.library = cfg.nvrtc_library;
    nc.cuda_home = cfg.cuda_home;
    auto jit = make_nvrtc_compiler(std::move(nc));
    JitCapability cap = jit->probe();
    j["nvrtc"] = {{"available", cap.available},
                  {"version", cap.available ? std::to_string(cap.nvrtc_major) + "." +
                                                  std::to_string(cap.nvrtc_minor)
                                            : ""},
                  {"library", cap.library_path},
                  {"detail", cap.missing},
                  {"jit_disabled", cfg.disable_jit}};
    facts.jit_usable = cap.available && !cfg.disable_jit;
    facts.jit_problem = cap.available ? "disabled by KILN_DISABLE_JIT" : cap.missing;

    j["tools"] = Json::array();
    for (const char* name : {"nvcc", "ptxas", "nvlink", "fatbinary"}) {
      ToolFact t = probe_tool(name);
      j["tools"].push_back({{"name", t.name},
                            {"path", t.path},
                            {"runnable", t.runnable},
                            {"version", t.version},
                            {"detail", t.detail}});
    }

    // libkiln loads these on first use: loading from stores works without them, so a missing
    // one is reported, not counted as missing.
    j["libraries"] = Json::array();
    for (auto lib : {lazy_libs::Library::Curl, lazy_libs::Library::Archive}) {
      lazy_libs::LibraryFacts f = lazy_libs::facts(lib);
      std::optional<std::string> problem = lazy_libs::load_problem(lib);
      j["libraries"].push_back({{"name", f.name},
                                {"soname", f.soname},
                                {"loaded", !problem},
                                {"package", f.package},
                                {"needed_for", f.used_for},
                                {"detail", problem.value_or("")}});
    }

    std::string cache_problem = check_writable(cfg.cache_dir);
    j["cache_dir"] = {
        {"path", cfg.cache_dir}, {"writable", cache_problem.empty()}, {"detail", cache_problem}};
    facts.cache_dir = cfg.cache_dir;
    facts.cache_problem = cache_problem;

    // The package whose stores and mirror index are judged (--source/--package/--version, or
    // the default project's); without one, every package's archives are counted.
    std::optional<ChosenPackage> chosen;
    try {
      chosen = choose_package(o->pkg, o->json);
    } catch (const Error& e) {
      if (!o->pkg.source.empty() || !o->pkg.package.empty()) throw;
    }
    j["package"] = chosen ? Json{{"name", chosen->name}, {"version", chosen->version}} : Json();
    StoreScanner disk = chosen ? StoreScanner(chosen->name, chosen->version) : StoreScanner();
    j["stores"] = Json::array();
    auto add_store = [&](const std::string& dir, const std::string& source, bool required) {
      StoreScan s = disk.scan(dir, source);
      int bad = 0;
      StoreFacts sf{dir, source, required, s.readable, s.problem, {}};
      for (const auto& a : s.archives) {
        bad += a.manifest ? 0 : 1;
        if (a.manifest) sf.targets.push_back(a.manifest->target);
      }
      facts.stores.push_back(std::move(sf));
      j["stores"].push_back({{"dir", dir},
                             {"source", source},
                             {"readable", s.readable},
                             {"archives", s.archives.size()},
                             {"unusable_archives", bad},
                             {"detail", s.problem}});
    };
    for (const auto& d : cfg.artifact_path) add_store(d, "artifact path", true);
    if (cfg.use_installed_store) {
      // Beside this kiln (<prefix>/bin/kiln -> <prefix>/share/kiln/artifacts), where a tarball
      // puts libkiln, the reference package and their store.
      std::string inst = installed_store_dir(reinterpret_cast<const void*>(&add_doctor_command));
      if (!inst.empty()) add_store(inst, "installed beside this kiln", false);
    }
    add_store(cfg.cache_dir, "cache directory", false);

    j["offline"] = cfg.offline;
    facts.offline = cfg.offline;
    j["mirrors"] = Json::array();
    facts.mirrors = probe_mirror_facts(cfg, chosen ? chosen->name : std::string(),
                                       chosen ? chosen->version : std::string());
    for (const auto& m : facts.mirrors)
      j["mirrors"].push_back({{"url", m.url},
                              {"reachable", cfg.offline ? Json(nullptr) : Json(m.reachable)},
                              {"detail", m.detail}});
    const LoadVerdict verdict = judge_loading(facts);
    j["missing"] = verdict.missing;
    j["ok"] = verdict.ok;
    rc = verdict.ok ? 0 : exit_code(ErrorKind::Unsupported);

    if (o->json) {
      std::cout << j.dump(2) << "\n";
      return;
    }
    auto yes = [](bool b) { return b ? "yes" : "no"; };
    std::cout << "kiln " << version() << " (CUDA " << cuda_full_version() << ")\n";
    if (jd["available"].get<bool>())
      std::cout << "driver: " << kCudaDriverLibrary << " loaded, version "
                << jd["version"].get<std::string>() << "\n";
    else
      std::cout << "driver: not available: " << jd["detail"].get<std::string>() << "\n";
    if (devs.empty()) std::cout << "gpu: none\n";
    for (const auto& d : devs)
      std::cout << "gpu " << d.ordinal << ": " << d.name << ", compute capability "
                << cc_string(d.cc) << " (" << device_target(d.cc) << ")\n";
    if (cap.available)
      std::cout << "nvrtc: " << cap.nvrtc_major << "." << cap.nvrtc_minor << " at "
                << cap.library_path << ", test compile ok"
                << (cfg.disable_jit ? " (JIT disabled by KILN_DISABLE_JIT)" : "") << "\n";
    else
      std::cout << "nvrtc: not usable: " << cap.missing << "\n";
    for (const auto& t : j["tools"]) {
      std::cout << t["name"].get<std::string>() << ": ";
      if (t["runnable"].get<bool>())
        std::cout << t["path"].get<std::string>() << ", " << t["version"].get<std::string>();
      else
        std::cout << "not usable: " << t["detail"].get<std::string>();
      std::cout << "\n";
    }
    for (const auto& l : j["libraries"]) {
      std::cout << l["name"].get<std::string>() << ": " << l["soname"].get<std::string>();
      if (l["loaded"].get<bool>())
        std::cout << " loads";
      else
        std::cout << " does not load: " << l["detail"].get<std::string>() << "; install "
                  << (l["package"].get<std::string>().empty() ? "the package that provides it"
                                                              : l["package"].get<std::string>());
      std::cout << " (needed only for " << l["needed_for"].get<std::string>() << ")\n";
    }
    std::cout << "cache directory: " << cfg.cache_dir
              << ", writable: " << yes(cache_problem.empty())
              << (cache_problem.empty() ? "" : " (" + cache_problem + ")") << "\n";
    for (const auto& s : j["stores"]) {
      std::cout << "store (" << s["source"].get<std::string>()
                << "): " << s["dir"].get<std::string>() << ": ";
      if (s["readable"].get<bool>())
        std::cout << s["archives"].get<size_t>() << " archive(s)"
                  << (s["unusable_archives"].get<int>()
                          ? ", " + std::to_string(s["unusable_archives"].get<int>()) + " unusable"
                          : "");
      else
        std::cout << s["detail"].get<std::string>();
      std::cout << "\n";
    }
    if (cfg.mirrors.empty()) std::cout << "mirrors: none configured\n";
    for (const auto& m : j["mirrors"])
      std::cout << "mirror " << m["url"].get<std::string>() << ": "
                << m["detail"].get<std::string>() << "\n";
    std::cout << "offline: " << yes(cfg.offline) << "\n";
    if (verdict.ok)
      std::cout << "ok: loading can work here\n";
    else
      for (const auto& m : verdict.missing) std::cout << "missing: " << m << "\n";
  });
}

}  // namespace kiln::cli
