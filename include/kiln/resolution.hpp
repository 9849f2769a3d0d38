#pragma once
// Where a kernel came from, and why every other place was passed over: what `Loader::resolve`,
// `kiln resolve --explain` and a NotFound error report. Part of the vocabulary below the loader;
// to_json is defined in core/api/resolution.cpp.
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"

namespace kiln {

// One place a kernel could come from, and why it was or was not taken.
struct Candidate {
  // Tiers, in resolution order.
  std::string tier;    // "memory", "store", "mirror", "jit"
  std::string target;  // "sm_90a", "compute_80", "" when not applicable
  std::string path;    // file or directory or URL looked at
  std::string reason;  // empty for the chosen one
};

struct Resolution {
  std::string uri;
  std::string device;  // target name for the device, e.g. "sm_90"
  std::optional<Candidate> chosen;
  std::vector<Candidate> rejected;
  std::vector<std::string> searched;     // every directory/mirror searched, in order
  // What the node's driver runs, "CUDA 12.8" (each candidate's toolkit was weighed against it);
  // "" when the driver could not say.
  std::string driver;
  KILN_API std::string to_json() const;  // {uri, device, driver, chosen, rejected: [...]}
};

}  // namespace kiln
