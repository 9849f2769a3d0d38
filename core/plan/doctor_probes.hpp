#pragma once
// The facts about mirrors that the doctor's verdict (load_readiness.hpp) is decided from,
// gathered the same way by `kiln doctor` and `python -m kiln doctor`: this is the I/O side.
#include <string>
#include <vector>

#include "kiln/loader.hpp"
#include "plan/load_readiness.hpp"

namespace kiln {

// Each configured mirror probed for the index of `package` `version` (fetch's probe_mirrors over
// the loader's configuration and trust anchor), or, not contacted, why: offline, or no package
// named whose index to ask for. Empty when no mirror is configured.
std::vector<MirrorFacts> probe_mirror_facts(const LoaderConfig& cfg, const std::string& package,
                                            const std::string& version);

}  // namespace kiln
