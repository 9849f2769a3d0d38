#include "plan/doctor_probes.hpp"

#include "fetch/fetch.hpp"
#include "plan/resolver.hpp"

namespace kiln {

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
  FetchOptions fo = mirror_fetch_options(cfg, installed_tuf_root());
  fo.package = package;
  fo.version = version;
  for (const auto& p : probe_mirrors(fo)) out.push_back({p.mirror, p.reachable, p.detail});
  return out;
}

}  // namespace kiln
