#include "plan/doctor_probes.hpp"

#include <map>
#include <tuple>

#include "fetch/fetch.hpp"
#include "plan/install_location.hpp"
#include "plan/resolver.hpp"
#include "plan/target_choice.hpp"

namespace kiln::plan {

std::vector<MirrorFacts> probe_mirror_facts(const LoaderConfig& cfg, const std::string& package,
                                            const std::string& version) {
  std::vector<MirrorFacts> out;
  if (cfg.offline || package.empty()) {
    const std::string why = cfg.offline
                                ? "not contacted: offline (KILN_OFFLINE=1)"
                                : "not probed: no package named whose release index to ask for "
                                  "(--source, or --package and --version)";
    for (const auto& m : cfg.mirrors) out.push_back({m, false, why});
    return out;
  }
  if (cfg.mirrors.empty()) return out;
  fetch::FetchOptions fo = mirror_fetch_options(cfg, installed_tuf_root());
  fo.package = package;
  fo.version = version;
  for (const auto& p : fetch::probe_mirrors(fo)) out.push_back({p.mirror, p.reachable, p.detail});
  return out;
}

std::vector<ToolkitFacts> store_toolkits(const StoreScan& scan, int driver) {
  std::map<std::tuple<std::string, std::string, std::string>, ToolkitFacts> by_toolkit;
  for (const auto& a : scan.archives) {
    if (!a.manifest) continue;
    const format::Manifest& m = *a.manifest;
    ToolkitFacts& t = by_toolkit[{m.package, m.package_version, m.cuda_version}];
    t.package = m.package;
    t.version = m.package_version;
    t.toolkit = m.cuda_version;
    ++t.archives;
    auto target = format::parse_target(m.target);
    std::optional<std::string> why =
        target ? toolkit_refusal(m.cuda_version, *target, driver) : std::nullopt;
    if (!why)
      ++t.runnable;
    else if (t.refusal.empty())
      t.refusal = *why;
  }
  std::vector<ToolkitFacts> out;
  for (auto& [key, t] : by_toolkit) {
    if (t.runnable) t.refusal.clear();
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<StoreProbe> probe_stores(const LoaderConfig& cfg, const StoreScanner& disk,
                                     const std::string& installed_dir, int driver) {
  std::vector<StoreProbe> out;
  auto add = [&](const std::string& dir, const std::string& source, bool required) {
    StoreScan s = disk.scan(dir, source);
    StoreProbe p{{dir, source, required, s.readable, s.problem, {}}, s.archives.size(), 0, {}};
    for (const auto& a : s.archives) {
      p.unusable += a.manifest ? 0 : 1;
      if (!a.manifest) continue;
      // Only an archive the driver runs serves a device (the verdict's targets).
      auto target = format::parse_target(a.manifest->target);
      if (!target || !toolkit_refusal(a.manifest->cuda_version, *target, driver))
        p.facts.targets.push_back(a.manifest->target);
    }
    p.toolkits = store_toolkits(s, driver);
    out.push_back(std::move(p));
  };
  for (const auto& d : cfg.artifact_path) add(d, "artifact path", true);
  // Beside this kiln (<prefix>/bin/kiln -> <prefix>/share/kiln/artifacts), where a tarball puts
  // libkiln, the reference package and their store.
  if (cfg.use_installed_store && !installed_dir.empty())
    add(installed_dir, "installed beside this kiln", false);
  add(cfg.cache_dir, "cache directory", false);
  return out;
}

}  // namespace kiln::plan
