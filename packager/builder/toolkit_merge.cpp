// Keeping the other toolkits' archives when one toolkit is published (toolkit_merge.hpp).
#include "builder/toolkit_merge.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"

namespace kiln::builder {
namespace fs = std::filesystem;

namespace {

// The first field in which the old index's build differs from this one; "" when none does.
std::string other_build(const format::Index& old, const PackageIdentity& id) {
  if (old.git_commit != id.git_commit)
    return "git commit " + (old.git_commit.empty() ? std::string("(none)") : old.git_commit) +
           ", this build's " + (id.git_commit.empty() ? std::string("(none)") : id.git_commit);
  const std::string desc = id.description_json.empty() ? "" : io::sha256_hex(id.description_json);
  const std::string old_desc = old.description ? old.description->sha256 : "";
  if (desc != old_desc) return "another package description (registry/package.json, kernels.json)";
  if (!old.provenance) return "no provenance (an index older than format 4)";
  const format::Provenance& p = *old.provenance;
  const format::Provenance& n = id.provenance;
  if (p.source_commit != n.source_commit || p.source_dirty != n.source_dirty)
    return "another source tree state (commit " + p.source_commit +
           (p.source_dirty.value_or(false) ? ", changed" : "") + ")";
  if (p.kiln_version != n.kiln_version)
    return "kiln " + p.kiln_version + ", this build's kiln " + n.kiln_version;
  if (p.build_time != n.build_time)
    return "build time " + std::to_string(p.build_time) + ", this build's " +
           std::to_string(n.build_time);
  return "";
}

}  // namespace

std::string tool_cuda_version(const std::string& full_version) {
  auto dot = full_version.find('.');
  if (dot == std::string::npos) return full_version;
  auto second = full_version.find('.', dot + 1);
  return second == std::string::npos ? full_version : full_version.substr(0, second);
}

KeptToolkits kept_toolkits(const fs::path& dist, const PackageIdentity& id,
                           const std::string& cuda_version) {
  KeptToolkits kept;
  const fs::path index_path = dist / format::index_file_name(id.name, id.version);
  std::error_code ec;
  if (!fs::exists(index_path, ec)) return kept;
  format::Index old;
  try {
    old = format::parse_index(io::read_whole_file(index_path, io::limits::kMaxJsonBytes),
                              index_path.string());
  } catch (const Error& e) {
    kept.dropped.push_back("the index in " + dist.string() +
                           " cannot be read, so no other toolkit's archives are kept: " + e.what());
    return kept;
  }
  // The old index's archives of other toolkits, by toolkit.
  std::map<std::string, std::vector<const format::IndexEntry*>> others;
  for (const auto& a : old.archives)
    if (a.cuda_version != cuda_version) others[a.cuda_version].push_back(&a);
  if (others.empty()) return kept;
  const std::string differs = other_build(old, id);
  std::set<std::string> kept_versions;
  for (const auto& [version, entries] : others) {
    if (!differs.empty()) {
      kept.dropped.push_back("CUDA " + version + " archives of the index in " + dist.string() +
                             " left out: another build (" + differs +
                             "); build that toolkit again into this --dist");
      continue;
    }
    for (const format::IndexEntry* a : entries) {
      // parse_index has checked the name: <package>-<version>-cuda<toolkit>-<target>.tar.zst.
      std::string why;
      {
        const fs::path file = dist / a->file;
        if (!fs::is_regular_file(file, ec)) {
          why = "the file is missing";
        } else {
          std::uint64_t size = 0;
          std::string digest;
          try {
            digest = io::sha256_file(file, &size);
          } catch (const Error& e) {
            why = std::string("the file cannot be read: ") + e.what();
          }
          if (why.empty() && (size != a->size || digest != a->sha256))
            why = "the file is not what the index pinned (sha256 " + digest + ", " +
                  std::to_string(size) + " bytes; the index says " + a->sha256 + ", " +
                  std::to_string(a->size) + " bytes)";
        }
      }
      if (!why.empty()) {
        kept.dropped.push_back("CUDA " + a->cuda_version + " " + a->target + " (" + a->file +
                               ") left out: " + why);
        continue;
      }
      kept.archives.push_back(*a);
      kept_versions.insert(a->cuda_version);
    }
  }
  if (kept.archives.empty()) return kept;
  for (const auto& t : old.provenance->toolkits)
    if (kept_versions.count(tool_cuda_version(t.version))) kept.tools.push_back(t);
  kept.targets = old.provenance->targets;
  kept.hosts = old.provenance->hosts;
  return kept;
}

format::Provenance merged_provenance(const format::Provenance& now, const KeptToolkits& kept) {
  format::Provenance p = now;
  for (const auto& t : kept.tools) p.toolkits.push_back(t);
  std::sort(p.toolkits.begin(), p.toolkits.end(), [](const auto& x, const auto& y) {
    return x.name != y.name ? x.name < y.name : x.version < y.version;
  });
  p.toolkits.erase(std::unique(p.toolkits.begin(), p.toolkits.end(),
                               [](const auto& x, const auto& y) {
                                 return x.name == y.name && x.version == y.version;
                               }),
                   p.toolkits.end());
  for (const auto& h : kept.hosts) p.hosts.push_back(h);
  std::sort(p.hosts.begin(), p.hosts.end());
  p.hosts.erase(std::unique(p.hosts.begin(), p.hosts.end()), p.hosts.end());
  for (const auto& t : kept.targets)
    if (std::find(p.targets.begin(), p.targets.end(), t) == p.targets.end()) p.targets.push_back(t);
  return p;
}

}  // namespace kiln::builder
