#pragma once
// The members every JSON file of a release opens with, written in one place: manifest.json,
// the release index, and the packager's build shard files.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kiln::format {

// A JSON object holding, in this order, the file's marker under `marker_key` ("format" for a
// manifest and an index, "kind" for a shard file), then `release`'s format_version, package,
// package_version, git_commit and cuda_version (Manifest and ShardManifest have them all).
// The caller adds the members that follow. An index of format 5 on has no top-level
// cuda_version (each archive has its own): release_identity_header is the header without it.
template <class Release>
nlohmann::ordered_json release_identity_header(const std::string& marker_key,
                                               std::string_view marker, const Release& release) {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  root[marker_key] = std::string(marker);
  root["format_version"] = release.format_version;
  root["package"] = release.package;
  root["package_version"] = release.package_version;
  root["git_commit"] = release.git_commit;
  return root;
}
template <class Release>
nlohmann::ordered_json release_json_header(const std::string& marker_key, std::string_view marker,
                                           const Release& release) {
  nlohmann::ordered_json root = release_identity_header(marker_key, marker, release);
  root["cuda_version"] = release.cuda_version;
  return root;
}

}  // namespace kiln::format
