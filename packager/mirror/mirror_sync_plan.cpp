// `kiln mirror sync`, the decision (mirror.hpp: plan_sync): what a sync may publish, from the
// upstream's checksum file and its trusted index; pure, no I/O (mirror_sync.cpp does that).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "kiln/error.hpp"
#include "mirror/mirror.hpp"

namespace kiln::mirror {

SyncPlan plan_sync(const std::vector<ChecksumEntry>& entries, const std::string& sums_text,
                   const format::Index& index, const std::string& package, const std::string& version,
                   bool index_pinned, bool sums_pinned, const std::string& sums_origin) {
  const std::string index_name = format::index_file_name(package, version);
  const std::string sums_name = checksums_file_name(package, version);
  // What the index pins: its archives and the description.
  struct Pinned {
    ReleaseFileKind kind;
    std::uint64_t size;
    std::string sha256;
  };
  std::map<std::string, Pinned> pinned;
  for (const auto& e : index.archives)
    pinned[e.file] = {ReleaseFileKind::Archive, e.size, e.sha256};
  if (index.description)
    pinned[index.description->file] = {ReleaseFileKind::Description, index.description->size,
                                       index.description->sha256};
  const std::string index_cover = index_pinned
                                      ? "the pinned index digest (--index-sha256)"
                                      : "its line in the pinned " + sums_name + " (--sums-sha256)";
  SyncPlan plan;
  std::set<std::string> listed;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const ChecksumEntry& e = entries[i];
    listed.insert(e.name);
    // parse_checksums refuses empty lines: entry i is line i + 1.
    const auto kind = classify_release_file(e.name, package, version);
    if (!kind || *kind == ReleaseFileKind::Other || *kind == ReleaseFileKind::Checksums ||
        *kind == ReleaseFileKind::WheelMetadata || *kind == ReleaseFileKind::SimplePage)
      throw Error(ErrorKind::Format,
                  sums_origin + ": line " + std::to_string(i + 1) + ": '" + e.name +
                      "' is not a file of release " + version + " (its index " + index_name +
                      ", an archive, a wheel or a tarball of " + version +
                      "): a sync writes only the files of the release it was asked for; refused");
    if (*kind == ReleaseFileKind::Index) {
      plan.publish.push_back({e.name, *kind, e.sha256, std::nullopt, index_cover});
      continue;
    }
    if (auto a = pinned.find(e.name); a != pinned.end()) {
      if (a->second.sha256 != e.sha256)
        throw Error(ErrorKind::Integrity, e.name + ": " + sums_origin + " lists sha256 " +
                                              e.sha256 + ", " + index_name + " pins " +
                                              a->second.sha256);
      plan.publish.push_back({e.name, a->second.kind, e.sha256, a->second.size,
                              index_name + " (size and sha256), trusted through " + index_cover});
      continue;
    }
    if (*kind == ReleaseFileKind::Description) {
      plan.withheld.push_back({e.name, *kind,
                               "a description of release " + version + " that " + index_name +
                                   " does not pin: no command would trust it"});
      continue;
    }
    if (*kind == ReleaseFileKind::Archive) {
      plan.withheld.push_back({e.name, *kind,
                               "an archive of release " + version + " that " + index_name +
                                   " does not list: no loader fetches it, and nothing pins it"});
      continue;
    }
    // Wheels and tarballs: the index carries no digest for them; only a pinned checksum file.
    if (sums_pinned)
      plan.publish.push_back(
          {e.name, *kind, e.sha256, std::nullopt, "the pinned " + sums_name + " (--sums-sha256)"});
    else
      plan.withheld.push_back(
          {e.name, *kind,
           std::string("a ") + to_string(*kind) + " that nothing you trust covers: " + index_name +
               " pins only archives, and " + sums_name +
               " is not pinned (--sums-sha256 HEX, the digest `kiln mirror stage` prints)"});
  }
  for (const auto& [file, p] : pinned)
    if (!listed.count(file))
      throw Error(ErrorKind::Integrity, sums_origin + " does not list " + file + ", which " +
                                            index_name + " pins (sha256 " + p.sha256 + ")");
  if (sums_pinned && plan.withheld.empty()) {
    plan.checksums_text = sums_text;
  } else {
    std::vector<ChecksumEntry> published;
    for (const auto& f : plan.publish) published.push_back({f.name, f.sha256});
    plan.checksums_text = checksums_to_text(published);
  }
  return plan;
}

}  // namespace kiln::mirror
