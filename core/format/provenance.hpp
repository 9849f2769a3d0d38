#pragma once
// How a release was built: the "provenance" object of a release index (format 4 on) and of a
// build shard, and the words `kiln inspect` and `kiln compat` show for it. Its JSON form is read
// and written with the index (manifest.hpp); manifests/README.md, "Provenance", is the grammar.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::format {

// How a release was built (index format 4 on), as `kiln build` and `kiln merge` saw it. Nothing
// in it changes between two builds of one tree on one kind of host, so the index stays
// byte-reproducible (manifests/README.md, "Provenance").
struct BuildTool {
  std::string name;     // the compiler that built the archives: "nvcc"
  std::string version;  // its full version, e.g. "13.0.88"
};
struct Provenance {
  std::string source_commit;         // `git rev-parse HEAD` of the project; "" outside git
  std::optional<bool> source_dirty;  // tracked files differed from the commit; nullopt outside git
  std::string kiln_version;          // of the kiln that built the release
  std::vector<BuildTool> toolkits;     // sorted by name, then version
  std::vector<std::string> hosts;    // "x86_64-linux": sorted, unique (shards may come from several)
  std::int64_t build_time = 0;       // the manifests' build_time
  std::string build_time_origin;     // "SOURCE_DATE_EPOCH", "git commit time", "fixed (no git commit)"
  std::vector<std::string> targets;  // the targets asked for, in the order given
};

// One line for a person: "kiln 0.1.0, nvcc 13.0.88, on x86_64-linux, from commit 1a2b...
// (clean), build time 1733000000 (git commit time), targets sm_80,sm_90a".
std::string describe_provenance(const Provenance& p);
// The warning a release built from a changed tree deserves, naming its commit; nullopt when the
// tree was clean or unknown.
std::optional<std::string> dirty_build_warning(const Provenance& p);

}  // namespace kiln::format
