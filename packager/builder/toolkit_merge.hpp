#pragma once
// A release of several toolkits, published one toolkit at a time: which archives of the other
// toolkits a publish into --dist keeps from the index already there, and the provenance of the
// merged index. publish_release (build.hpp) uses it, so `kiln build` and `kiln merge` agree;
// docs/decisions.md, "Publishing several toolkits into one index".
#include <filesystem>
#include <string>
#include <vector>

#include "builder/build.hpp"
#include "format/manifest.hpp"

namespace kiln::builder {

// What the index in dist holds of toolkits other than the one being published, and is still
// part of this release: its archives, the build tools that made them, and the lines saying what
// was left out and why.
struct KeptToolkits {
  std::vector<format::IndexEntry> archives;  // of the kept toolkits, as the old index lists them
  std::vector<format::BuildTool> tools;      // of the old provenance, for the kept toolkits
  std::vector<std::string> targets;          // the old provenance's targets (when anything is kept)
  std::vector<std::string> hosts;            // the old provenance's hosts (when anything is kept)
  std::vector<std::string> dropped;          // "CUDA 12.9 archives of the index in DIST left out: ..."
};

// The previous index of `id`'s release in `dist` (none: nothing kept). An archive of another
// toolkit than `cuda_version` is kept when the old index is of the same build (git commit, the
// package's description, and provenance: source commit and state, kiln version, build time)
// and the archive file is there under its own name (package, version, toolkit, target: the
// index's reader refuses any other) with the size and sha256 the old index gives. Anything
// else is left out of the new index with a line in `dropped`: an unreadable index (one naming
// a foreign file included), another build (a stale toolkit: built from other sources or at
// another build time), a missing or changed (foreign) archive. The
// archives of `cuda_version` itself are this publish's. Reads and hashes; changes nothing.
KeptToolkits kept_toolkits(const std::filesystem::path& dist, const PackageIdentity& id,
                           const std::string& cuda_version);

// The provenance of the merged index: `now` (this publish's) with the kept toolkits' tools
// added (sorted by name and version, each once), the hosts merged (sorted, each once), and the
// targets of the previous index that `now` does not list appended in their order. Pure.
format::Provenance merged_provenance(const format::Provenance& now, const KeptToolkits& kept);

// MAJOR.MINOR of a build tool's full version ("12.9.86" -> "12.9"); the text itself otherwise.
std::string tool_cuda_version(const std::string& full_version);

}  // namespace kiln::builder
