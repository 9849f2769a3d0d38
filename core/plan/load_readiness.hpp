#pragma once
// Whether loading can work on this machine: the verdict of `kiln doctor` and `python -m kiln
// doctor`, decided here from the facts each gathers (what the driver, the stores, the mirrors
// and NVRTC really answered), so that both reach the same one. Pure: no disk, network or driver.
//
// Loading can work when every one of these holds (docs/loader.md, "kiln doctor"):
//   1. the CUDA driver loads and reports at least one device;
//   2. the cache directory is writable, and every configured store (KILN_ARTIFACT_PATH) can be
//      read;
//   3. each device's compute capability is served by at least one tier: a readable store holding
//      an archive of the package that the target-choice rule accepts for it; or, not offline, a
//      mirror that was reached; or a usable JIT (NVRTC compiled a test program, JIT not
//      disabled). Without a device to judge for, a store counts when it holds any usable archive.
// Each that fails is one entry of `missing`, naming what is absent and why.
#include <string>
#include <vector>

namespace kiln::plan {

struct StoreFacts {
  std::string dir;
  std::string source;     // where it comes from: "artifact path", "cache directory", ...
  bool required = false;  // configured by the user: unreadable is missing, not only reported
  bool readable = false;  // listed (an absent store is not readable)
  std::string problem;    // why it is not readable
  std::vector<std::string> targets;  // targets of its usable archives of the package judged
};

struct MirrorFacts {
  std::string url;
  bool reachable = false;  // probed, and it served; false when not contacted
  std::string detail;      // what the probe found, or why it was not contacted
};

struct LoadFacts {
  bool driver_loads = false;
  std::string driver_problem;   // why not, when !driver_loads
  std::vector<int> device_ccs;  // compute capabilities of the devices (90 = 9.0)
  std::string cache_dir;
  std::string cache_problem;  // "" when a file was really written and removed there
  std::vector<StoreFacts> stores;
  bool offline = false;
  std::vector<MirrorFacts> mirrors;
  bool jit_usable = false;  // NVRTC compiled a test program and JIT is not disabled
  std::string jit_problem;  // why not
};

struct LoadVerdict {
  bool ok = false;
  std::vector<std::string> missing;  // in the order of the rules above
};

LoadVerdict judge_loading(const LoadFacts& facts);

}  // namespace kiln::plan
