#include "plan/load_readiness.hpp"

#include <algorithm>

#include "plan/target_choice.hpp"
#include "util/join.hpp"

namespace kiln::plan {

namespace {

// Why no store serves: the stores searched, or that there is none.
std::string no_store_reason(const LoadFacts& f, const std::string& runs_there) {
  if (f.stores.empty()) return "no store configured";
  return "no store holds an archive" + runs_there + " (searched " +
         util::join(f.stores, ", ", [](const StoreFacts& s) { return s.dir; }) + ")";
}

std::string no_mirror_reason(const LoadFacts& f) {
  if (f.mirrors.empty()) return "no mirror configured";
  if (f.offline) return "mirrors not used: offline (KILN_OFFLINE=1)";
  return "no mirror reached (" +
         util::join(f.mirrors, "; ", [](const MirrorFacts& m) { return m.url + ": " + m.detail; }) +
         ")";
}

bool mirror_serves(const LoadFacts& f) {
  return !f.offline && std::any_of(f.mirrors.begin(), f.mirrors.end(),
                                   [](const MirrorFacts& m) { return m.reachable; });
}

// A readable store holds an archive the target choice accepts for `cc` (any usable archive when
// `cc` is 0: no device to choose for).
bool store_serves(const LoadFacts& f, int cc) {
  for (const auto& s : f.stores) {
    if (!s.readable || s.targets.empty()) continue;
    if (cc == 0 || !choose_named_targets(cc, s.targets).candidates.empty()) return true;
  }
  return false;
}

}  // namespace

LoadVerdict judge_loading(const LoadFacts& f) {
  LoadVerdict v;
  if (!f.driver_loads)
    v.missing.push_back("CUDA driver (" + f.driver_problem + ")");
  else if (f.device_ccs.empty())
    v.missing.push_back("a CUDA device (the driver reports none)");
  if (!f.cache_problem.empty())
    v.missing.push_back("writable cache directory " + f.cache_dir + " (" + f.cache_problem + ")");
  for (const auto& s : f.stores)
    if (s.required && !s.readable) v.missing.push_back("store " + s.dir + " (" + s.problem + ")");

  std::vector<int> ccs = f.device_ccs;
  std::sort(ccs.begin(), ccs.end());
  ccs.erase(std::unique(ccs.begin(), ccs.end()), ccs.end());
  if (ccs.empty()) ccs.push_back(0);
  const bool mirror = mirror_serves(f);
  for (int cc : ccs) {
    if (mirror || f.jit_usable || store_serves(f, cc)) continue;
    const std::string device =
        cc == 0 ? std::string() : " for " + device_target(cc) + " (CC " + cc_string(cc) + ")";
    v.missing.push_back(
        "a source of kernels" + device + ": " +
        no_store_reason(f, cc == 0 ? std::string(" of the package") : " that runs there") + "; " +
        no_mirror_reason(f) + "; no usable JIT (" + f.jit_problem + ")");
  }
  v.ok = v.missing.empty();
  return v;
}

}  // namespace kiln::plan
