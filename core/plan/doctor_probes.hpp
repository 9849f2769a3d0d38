#pragma once
// The facts about mirrors and stores that the doctor's verdict (load_readiness.hpp) is decided
// from, gathered the same way by `kiln doctor` and `python -m kiln doctor` (mirrors): this is the
// I/O side.
#include <string>
#include <vector>

#include "kiln/config.hpp"
#include "plan/load_readiness.hpp"
#include "plan/resolver.hpp"

namespace kiln::plan {

// Each configured mirror probed for the index of `package` `version` (fetch's probe_mirrors over
// the loader's configuration and trust anchor), or, not contacted, why: offline, or no package
// named whose index to ask for. Empty when no mirror is configured.
std::vector<MirrorFacts> probe_mirror_facts(const LoaderConfig& cfg, const std::string& package,
                                            const std::string& version);

// One store as `kiln doctor` reports it: the facts the verdict counts (the targets of its usable
// archives) and how many archives it holds, usable or not.
// Of one store, the archives of one package release built by one toolkit, and whether the
// driver runs that toolkit's code (the loader's rule, target_choice.hpp toolkit_refusal).
struct ToolkitFacts {
  std::string package, version, toolkit;  // toolkit: the manifests' cuda_version, "12.9"
  std::size_t archives = 0;
  int runnable = 0;      // of those, the archives whose code the driver runs (all: not known)
  std::string refusal;   // runnable == 0: why not, naming both versions
};

struct StoreProbe {
  StoreFacts facts;
  std::size_t archives = 0;  // archive directories of the package judged (every package's: none)
  int unusable = 0;          // of those, the ones without a usable manifest
  std::vector<ToolkitFacts> toolkits;  // by package, version and toolkit, in that order
};

// The stores the loader looks in, in its order, each scanned by `disk`: every KILN_ARTIFACT_PATH
// store ("artifact path", required: unreadable is missing); the store installed beside this
// kiln, `installed_dir`, when the config uses it and it is known ("installed beside this kiln");
// the cache directory ("cache directory").
// Of one scanned store, its archives by package, version and toolkit, each weighed against
// `driver` (cuDriverGetVersion's number; 0: not known, every archive counted runnable).
std::vector<ToolkitFacts> store_toolkits(const StoreScan& scan, int driver);

// `driver` (cuDriverGetVersion's number; 0: not known): what each toolkit's runnable counts
// against; only archives it runs go into the verdict's targets.
std::vector<StoreProbe> probe_stores(const LoaderConfig& cfg, const StoreScanner& disk,
                                     const std::string& installed_dir, int driver = 0);

}  // namespace kiln::plan
