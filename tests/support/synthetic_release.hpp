#pragma once
// One builder for the synthetic releases the tests need: fake fatbin bytes under real URIs,
// their manifests, archives, the index pinning them, and unpacked store entries. No nvcc: the
// bytes are whatever the test says, and every size and digest matches them unless the test
// corrupts something on purpose afterwards.
//
//   ReleaseSpec rel;                       // this kiln's version, CUDA, two axpy artifacts
//   rel.version = "0.0.1";                 // what the tests vary: version, format, hashes...
//   auto members = release_members(rel, "sm_80");                 // manifest.json + fatbins
//   fs::path a = write_release_archive(dir, rel, "sm_90a");        // one archive
//   SyntheticDist d = write_release_dist(dir, rel, {"sm_80", "sm_90a"});  // archives + index
//   write_store_entry(store, rel, "sm_90");                        // an unpacked store entry
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "format/archive.hpp"
#include "format/manifest.hpp"

namespace kiln::test {

// One artifact: a URI and the bytes that stand for its fatbin.
struct SyntheticArtifact {
  std::string uri;
  std::string bytes;
};

// Everything about a release that the tests vary.
struct ReleaseSpec {
  std::string package = "kiln-kernels";  // the reference package's name unless a test says
  std::string version;                   // default: this kiln's version
  std::string cuda_version;              // default: this kiln's CUDA version
  std::string git_commit = "3f9c2a1";
  std::int64_t build_time = 1764403200;  // 2025-11-29T08:00:00Z
  int format_version = format::kManifestFormat;
  // Every artifact's source hash...
  std::string source_hash = std::string(64, 'c');
  // ...unless `loadable`: then family, params, source hash and entries are what the reference
  // package (kiln_kernels_package()) gives the URI, so a Loader of it accepts the artifact.
  bool loadable = false;
  std::map<std::string, std::string> source_hash_override;  // uri -> hash (stale releases)
  std::vector<std::string> flags;                           // every artifact's compile flags
  // The artifacts of one target; empty: default_artifacts.
  std::function<std::vector<SyntheticArtifact>(const std::string& target)> artifacts;
  // How archives are written (write_archive's mtime and zstd level).
  std::int64_t archive_mtime = 0;
  int zstd_level = 19;

  ReleaseSpec();
  // The same artifacts for every target.
  ReleaseSpec& with_artifacts(std::vector<SyntheticArtifact> same_for_every_target);
};

// axpy_dtype_f16 and axpy_dtype_f32 with distinct bytes per target ("f16-image-<target>").
std::vector<SyntheticArtifact> default_artifacts(const std::string& target);
// `n` pseudo-random bytes, the same for the same seed.
std::string random_bytes(std::size_t n, unsigned seed);

// The artifacts `rel` gives `target`, sorted by URI (manifest order).
std::vector<SyntheticArtifact> release_artifacts(const ReleaseSpec& rel, const std::string& target);
// The manifest of `target`'s archive: every field set, each artifact's size and sha256 those of
// its bytes.
format::Manifest release_manifest(const ReleaseSpec& rel, const std::string& target);
// The archive's members: manifest.json first, then "<uri>.fatbin" for each artifact.
std::vector<format::ArchiveMember> release_members(const ReleaseSpec& rel, const std::string& target);

// Writes `members` as `dir`/<archive file name of rel and target>; returns the path.
std::filesystem::path write_release_archive(const std::filesystem::path& dir,
                                            const ReleaseSpec& rel, const std::string& target,
                                            const std::vector<format::ArchiveMember>& members);
// Same, with release_members(rel, target).
std::filesystem::path write_release_archive(const std::filesystem::path& dir,
                                            const ReleaseSpec& rel, const std::string& target);

// A dist directory as `kiln build --dist` leaves it: one archive per target and the index
// pinning them (index entries sorted by target).
struct SyntheticDist {
  std::filesystem::path dir;
  std::string package;       // the release's (ReleaseSpec::package)
  std::string version;       // the release's (ReleaseSpec::version)
  std::string cuda_version;  // the release's (ReleaseSpec::cuda_version)
  std::filesystem::path index_path;
  std::string index_json;
  std::string index_sha256;
  std::map<std::string, std::string> archive;  // target -> archive file name
  std::map<std::string, std::map<std::string, std::string>> artifacts;  // target -> file -> bytes
  // The name of `target`'s archive without .tar.zst: its store entry's directory name.
  std::string stem(const std::string& target) const;
};
SyntheticDist write_release_dist(const std::filesystem::path& dir, const ReleaseSpec& rel,
                                 const std::vector<std::string>& targets);

// Publishes `description_json` as the release's description, as `kiln build` does: the file
// <package>-<version>.package.json beside the index, pinned by the index (rewritten; format 3);
// the dist's index fields are updated.
void describe_release(SyntheticDist& dist, const std::string& description_json);

// The index of `rel` listing `entries` (sorted by target).
// What a build of kiln's tree at a clean commit on this host would record (index format 4).
format::Provenance sample_provenance(std::vector<std::string> targets);
format::Index release_index(const ReleaseSpec& rel, std::vector<format::IndexEntry> entries);
// The index entry pinning `archive_bytes` as `target`'s archive of `rel`: its derived file name,
// size and sha256 (for tests whose archives are stand-in bytes, never unpacked).
format::IndexEntry release_index_entry(const ReleaseSpec& rel, const std::string& target,
                               const std::string& archive_bytes);

// An unpacked store entry, as `kiln install` leaves it: `store`/<archive stem>/manifest.json
// and each artifact's file. Returns the directory.
std::filesystem::path write_store_entry(const std::filesystem::path& store, const ReleaseSpec& rel,
                                        const std::string& target);

}  // namespace kiln::test
