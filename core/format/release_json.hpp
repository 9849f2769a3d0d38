#pragma once
// The members every JSON file of a release opens with, written in one place: manifest.json,
// the release index, and the packager's build shard files.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kiln::format {

// A JSON object holding, in this order, the file's marker under `marker_key` ("format" for a
// manifest and an index, "kind" for a shard file), then `release`'s format_version, package,
// package_version, git_commit and cuda_version (Manifest, Index, ShardManifest all have them).
// The caller adds the members that follow.
template <class Release>
nlohmann::ordered_json release_json_header(const std::string& marker_key, std::string_view marker,
                                           const Release& release) {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  root[marker_key] = std::string(marker);
  root["format_version"] = release.format_version;
  root["package"] = release.package;
  root["package_version"] = release.package_version;
  root["git_commit"] = release.git_commit;
  root["cuda_version"] = release.cuda_version;
  return root;
}

}  // namespace kiln::format
