// `kiln doctor [--json] [--require-gpu]`: every capability kiln needs, each line a fact that
// was checked (the library loaded and answered, the binary ran, a file was really created);
// whether loading can work is decided from them by judge_loading (plan/load_readiness.hpp).
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "builder/tool_probe.hpp"
#include "commands/commands.hpp"
#include "format/toolkit.hpp"
#include "io/write_probe.hpp"
#include "jit/jit.hpp"
#include "kiln/config.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "plan/doctor_probes.hpp"
#include "plan/load_readiness.hpp"
#include "plan/resolver.hpp"
#include "runtime/driver.hpp"
#include "runtime/lazy_libs.hpp"

namespace kiln::commands {

void add_doctor_command(CLI::App& app, int& rc);

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kDoctorHelp =
    "check every capability kiln needs on this machine: CUDA driver (the CUDA version it runs) "
    "and devices, NVRTC (the one this driver runs), "
    "nvcc/ptxas/nvlink/fatbinary, the cache directory (really writes a file), the "
    "configured stores (and of each package release there, which toolkits this driver runs) "
    "and mirrors, whether libcurl and libarchive load (libkiln loads them "
    "only for mirrors and archives). Exit 0 when loading can work here: the driver loads "
    "and reports a device, the cache directory is writable, every KILN_ARTIFACT_PATH store "
    "is readable, and each device is served by a store holding an archive that runs on it, "
    "a mirror that was reached, or a usable JIT; else 5 (unsupported), each missing piece "
    "named (`missing` in --json).";

struct DoctorOpts {
  bool json = false;
  bool require_gpu = false;
  PackageOptions pkg;
};

// The driver and its devices, into `j` and `facts`; the driver's number (cuDriverGetVersion,
// 12080 for CUDA 12.8), 0 when there is no driver.
int examine_driver(Json& j, plan::LoadFacts& facts) {
  auto driver = runtime::make_cuda_driver();
  Json jd;
  std::vector<runtime::DeviceInfo> devs;
  int v = 0;
  try {
    driver->init();
    v = driver->driver_version();
    devs = driver->devices();
    jd = {{"available", true},
          {"library", runtime::kCudaDriverLibrary},
          {"version", std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10)},
          {"cuda_version", format::driver_cuda_version(v).str()}};
    facts.driver_loads = true;
  } catch (const Error& e) {
    jd = {{"available", false}, {"library", runtime::kCudaDriverLibrary}, {"detail", e.what()}};
    facts.driver_problem = e.what();
    v = 0;
  }
  for (const auto& d : devs) facts.device_ccs.push_back(d.cc);
  j["driver"] = jd;
  j["devices"] = Json::array();
  for (const auto& d : devs)
    j["devices"].push_back({{"ordinal", d.ordinal},
                            {"name", d.name},
                            {"compute_capability", plan::cc_string(d.cc)},
                            {"target", plan::device_target(d.cc)}});
  return v;
}

// NVRTC (the real probe compiles a test program), the CUDA tools, the lazily loaded libraries.
// `driver`: cuDriverGetVersion's number (0: no driver); the NVRTC taken is one it runs.
void examine_compilers(const LoaderConfig& cfg, int driver, Json& j, plan::LoadFacts& facts) {
  jit::NvrtcConfig nc;
  nc.library = cfg.nvrtc_library;
  nc.cuda_home = cfg.cuda_home;
  nc.driver = driver;
  auto jit = jit::make_nvrtc_compiler(std::move(nc));
  jit::JitCapability cap = jit->probe();
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
    builder::ToolFact t = builder::probe_tool(name);  // builder/tool_probe.hpp
    j["tools"].push_back({{"name", t.name},
                          {"path", t.path},
                          {"runnable", t.runnable},
                          {"version", t.version},
                          {"detail", t.detail}});
  }
  // libkiln loads these on first use: loading from stores works without them, so a missing
  // one is reported, not counted as missing.
  j["libraries"] = Json::array();
  for (auto lib : {runtime::lazy_libs::Library::Curl, runtime::lazy_libs::Library::Archive}) {
    runtime::lazy_libs::LibraryFacts f = runtime::lazy_libs::facts(lib);
    std::optional<std::string> problem = runtime::lazy_libs::load_problem(lib);
    j["libraries"].push_back({{"name", f.name},
                              {"soname", f.soname},
                              {"loaded", !problem},
                              {"package", f.package},
                              {"needed_for", f.used_for},
                              {"detail", problem.value_or("")}});
  }
}

// The cache directory (really written), the stores and the mirrors of the package judged; each
// store's toolkits weighed against `driver` (cuDriverGetVersion's number; 0: no driver).
void examine_storage(const LoaderConfig& cfg, const DoctorOpts& o, int driver, Json& j,
                     plan::LoadFacts& facts) {
  std::string cache_problem = io::write_probe(cfg.cache_dir);  // io/write_probe.hpp
  j["cache_dir"] = {
      {"path", cfg.cache_dir}, {"writable", cache_problem.empty()}, {"detail", cache_problem}};
  facts.cache_dir = cfg.cache_dir;
  facts.cache_problem = cache_problem;
  // The package whose stores and mirror index are judged (--source/--package/--version, or
  // the default project's); without one, every package's archives are counted.
  std::optional<ChosenPackage> chosen;
  try {
    chosen = choose_package(o.pkg, o.json);
  } catch (const Error& e) {
    if (!o.pkg.source.empty() || !o.pkg.package.empty()) throw;
  }
  j["package"] = chosen ? Json{{"name", chosen->name}, {"version", chosen->version}} : Json();
  plan::StoreScanner disk = chosen ? plan::StoreScanner(chosen->name, chosen->version) : plan::StoreScanner();
  const std::string installed =
      cfg.use_installed_store
          ? plan::installed_store_dir(reinterpret_cast<const void*>(&add_doctor_command))
          : std::string();
  j["stores"] = Json::array();
  for (auto& s : plan::probe_stores(cfg, disk, installed, driver)) {  // plan/doctor_probes.hpp
    Json toolkits = Json::array();
    for (const auto& t : s.toolkits)
      toolkits.push_back({{"package", t.package},
                          {"version", t.version},
                          {"cuda_version", t.toolkit},
                          {"archives", t.archives},
                          {"driver_runs", driver > 0 ? Json(t.runnable > 0) : Json()},
                          {"runnable_archives", driver > 0 ? Json(t.runnable) : Json()},
                          {"detail", t.refusal}});
    j["stores"].push_back({{"dir", s.facts.dir},
                           {"source", s.facts.source},
                           {"readable", s.facts.readable},
                           {"archives", s.archives},
                           {"unusable_archives", s.unusable},
                           {"toolkits", std::move(toolkits)},
                           {"detail", s.facts.problem}});
    facts.stores.push_back(std::move(s.facts));
  }
  j["offline"] = cfg.offline;
  facts.offline = cfg.offline;
  j["mirrors"] = Json::array();
  facts.mirrors = plan::probe_mirror_facts(cfg, chosen ? chosen->name : std::string(),
                                     chosen ? chosen->version : std::string());
  for (const auto& m : facts.mirrors)
    j["mirrors"].push_back({{"url", m.url},
                            {"reachable", cfg.offline ? Json(nullptr) : Json(m.reachable)},
                            {"detail", m.detail}});
}

// The report as text, from its JSON form.
void print_doctor(const LoaderConfig& cfg, const Json& j, const plan::LoadVerdict& verdict) {
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  auto str = [](const Json& v) { return v.get<std::string>(); };
  std::cout << "kiln " << version() << " (CUDA " << cuda_full_version() << ")\n";
  const Json& jd = j["driver"];
  if (jd["available"].get<bool>())
    std::cout << "driver: " << runtime::kCudaDriverLibrary << " loaded, runs CUDA "
              << str(jd["cuda_version"]) << " (each archive's toolkit is weighed against it)\n";
  else
    std::cout << "driver: not available: " << str(jd["detail"]) << "\n";
  if (j["devices"].empty()) std::cout << "gpu: none\n";
  for (const auto& d : j["devices"])
    std::cout << "gpu " << d["ordinal"].get<int>() << ": " << str(d["name"])
              << ", compute capability " << str(d["compute_capability"]) << " (" << str(d["target"])
              << ")\n";
  const Json& nv = j["nvrtc"];
  if (nv["available"].get<bool>())
    std::cout << "nvrtc: " << str(nv["version"]) << " at " << str(nv["library"])
              << ", test compile ok"
              << (cfg.disable_jit ? " (JIT disabled by KILN_DISABLE_JIT)" : "") << "\n";
  else
    std::cout << "nvrtc: not usable: " << str(nv["detail"]) << "\n";
  for (const auto& t : j["tools"]) {
    std::cout << str(t["name"]) << ": ";
    if (t["runnable"].get<bool>())
      std::cout << str(t["path"]) << ", " << str(t["version"]);
    else
      std::cout << "not usable: " << str(t["detail"]);
    std::cout << "\n";
  }
  for (const auto& l : j["libraries"]) {
    std::cout << str(l["name"]) << ": " << str(l["soname"]);
    if (l["loaded"].get<bool>())
      std::cout << " loads";
    else
      std::cout << " does not load: " << str(l["detail"]) << "; install "
                << (str(l["package"]).empty() ? "the package that provides it" : str(l["package"]));
    std::cout << " (needed only for " << str(l["needed_for"]) << ")\n";
  }
  const std::string cache_problem = str(j["cache_dir"]["detail"]);
  std::cout << "cache directory: " << cfg.cache_dir << ", writable: " << yes(cache_problem.empty())
            << (cache_problem.empty() ? "" : " (" + cache_problem + ")") << "\n";
  for (const auto& s : j["stores"]) {
    std::cout << "store (" << str(s["source"]) << "): " << str(s["dir"]) << ": ";
    if (s["readable"].get<bool>())
      std::cout << s["archives"].get<size_t>() << " archive(s)"
                << (s["unusable_archives"].get<int>()
                        ? ", " + std::to_string(s["unusable_archives"].get<int>()) + " unusable"
                        : "");
    else
      std::cout << str(s["detail"]);
    std::cout << "\n";
    // Which toolkits of each package release there this driver runs.
    for (const auto& t : s["toolkits"]) {
      std::cout << "  " << str(t["package"]) << " " << str(t["version"]) << ", CUDA "
                << str(t["cuda_version"]) << ": " << t["archives"].get<size_t>() << " archive(s), ";
      if (t["driver_runs"].is_null())
        std::cout << "not weighed (no driver)";
      else if (t["runnable_archives"].get<size_t>() == t["archives"].get<size_t>())
        std::cout << "this driver runs them";
      else if (t["driver_runs"].get<bool>())
        std::cout << "this driver runs " << t["runnable_archives"].get<int>() << " of them";
      else
        std::cout << "this driver runs none: " << str(t["detail"]);
      std::cout << "\n";
    }
  }
  if (cfg.mirrors.empty()) std::cout << "mirrors: none configured\n";
  for (const auto& m : j["mirrors"])
    std::cout << "mirror " << str(m["url"]) << ": " << str(m["detail"]) << "\n";
  std::cout << "offline: " << yes(cfg.offline) << "\n";
  if (verdict.ok)
    std::cout << "ok: loading can work here\n";
  else
    for (const auto& m : verdict.missing) std::cout << "missing: " << m << "\n";
}

}  // namespace

void add_doctor_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("doctor", kDoctorHelp);
  auto o = std::make_shared<DoctorOpts>();
  add_package_options(cmd, o->pkg);
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->add_flag("--require-gpu", o->require_gpu,
                "exit 5 unless the driver loads and reports at least one device (always "
                "required now; kept for scripts that pass it)");
  cmd->callback([o, &rc] {
    const LoaderConfig cfg = LoaderConfig::from_env();
    plan::LoadFacts facts;  // what the verdict is decided from (plan/load_readiness.hpp)
    Json j;
    j["kiln"] = {{"version", version()}, {"commit", git_commit()}, {"cuda", cuda_full_version()}};
    const int driver = examine_driver(j, facts);
    examine_compilers(cfg, driver, j, facts);
    examine_storage(cfg, *o, driver, j, facts);
    const plan::LoadVerdict verdict = plan::judge_loading(facts);
    j["missing"] = verdict.missing;
    j["ok"] = verdict.ok;
    rc = verdict.ok ? 0 : exit_code(ErrorKind::Unsupported);
    if (o->json)
      std::cout << j.dump(2) << "\n";
    else
      print_doctor(cfg, j, verdict);
  });
}

}  // namespace kiln::commands
