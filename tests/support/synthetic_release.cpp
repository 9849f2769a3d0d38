#include "synthetic_release.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "io/sha256.hpp"
#include "kiln/version.hpp"
#include "project/registry.hpp"
#include "test_util.hpp"

namespace kiln::test {

namespace fs = std::filesystem;

ReleaseSpec::ReleaseSpec() : version(kiln::version()), cuda_version(kiln::cuda_version()) {}

ReleaseSpec& ReleaseSpec::with_artifacts(std::vector<SyntheticArtifact> same_for_every_target) {
  artifacts = [arts = std::move(same_for_every_target)](const std::string&) { return arts; };
  return *this;
}

std::vector<SyntheticArtifact> default_artifacts(const std::string& target) {
  return {{"axpy_dtype_f16", "f16-image-" + target}, {"axpy_dtype_f32", "f32-image-" + target}};
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t v = rng();
    std::memcpy(&s[i], &v, std::min<std::size_t>(8, n - i));
  }
  return s;
}

std::vector<SyntheticArtifact> release_artifacts(const ReleaseSpec& rel,
                                                 const std::string& target) {
  std::vector<SyntheticArtifact> out =
      rel.artifacts ? rel.artifacts(target) : default_artifacts(target);
  std::sort(out.begin(), out.end(),
            [](const SyntheticArtifact& a, const SyntheticArtifact& b) { return a.uri < b.uri; });
  return out;
}

format::Manifest release_manifest(const ReleaseSpec& rel, const std::string& target) {
  format::Manifest m;
  m.format_version = rel.format_version;
  m.package = rel.package;
  m.package_version = rel.version;
  m.git_commit = rel.git_commit;
  m.cuda_version = rel.cuda_version;
  m.target = target;
  m.build_time = rel.build_time;
  for (const auto& art : release_artifacts(rel, target)) {
    format::ArtifactEntry a;
    a.uri = art.uri;
    const project::Specialisation* spec = reference_package().spec(art.uri);
    // A URI the registry does not know: "<family>_..._<dtype>".
    a.family = spec ? spec->family : art.uri.substr(0, art.uri.find('_'));
    a.params = spec ? spec->params
                    : std::vector<std::pair<std::string, std::string>>{
                          {"dtype", art.uri.substr(art.uri.rfind('_') + 1)}};
    a.entries = {{"kiln::axpy_kernel<float>", "_ZN4kiln11axpy_kernelIfEEvxfPKT_PS1_"}};
    a.source_hash = rel.source_hash;
    if (rel.loadable && spec) {
      a.source_hash = spec->source_hash;
      a.entries.clear();
      for (const auto& e : spec->entries) a.entries.push_back({e, "_Z" + e});
    }
    if (auto it = rel.source_hash_override.find(art.uri); it != rel.source_hash_override.end())
      a.source_hash = it->second;
    a.flags = rel.flags;
    a.file = art.uri + ".fatbin";
    a.size = art.bytes.size();
    a.sha256 = io::sha256_hex(art.bytes);
    m.artifacts.push_back(std::move(a));
  }
  return m;
}

std::vector<format::ArchiveMember> release_members(const ReleaseSpec& rel, const std::string& target) {
  std::vector<format::ArchiveMember> members{
      {"manifest.json", format::manifest_to_json(release_manifest(rel, target))}};
  for (const auto& art : release_artifacts(rel, target))
    members.push_back({art.uri + ".fatbin", art.bytes});
  return members;
}

fs::path write_release_archive(const fs::path& dir, const ReleaseSpec& rel,
                               const std::string& target,
                               const std::vector<format::ArchiveMember>& members) {
  fs::create_directories(dir);
  fs::path p = dir / format::archive_file_name(rel.package, rel.version, rel.cuda_version, target);
  format::write_archive(p, members, rel.archive_mtime, rel.zstd_level);
  return p;
}

fs::path write_release_archive(const fs::path& dir, const ReleaseSpec& rel,
                               const std::string& target) {
  return write_release_archive(dir, rel, target, release_members(rel, target));
}

format::Provenance sample_provenance(std::vector<std::string> targets) {
  format::Provenance p;
  p.source_commit = "3f9c2a1d5e7b8c9a0f1e2d3c4b5a69788796a5b4";
  p.source_dirty = false;
  p.kiln_version = kiln::version();
  p.toolkits = {{"nvcc", kiln::cuda_full_version()}};
  p.hosts = {"x86_64-linux"};
  p.build_time = 1764547200;
  p.build_time_origin = "git commit time";
  p.targets = std::move(targets);
  return p;
}

format::Index release_index(const ReleaseSpec& rel, std::vector<format::IndexEntry> entries) {
  format::Index idx;
  idx.package = rel.package;
  idx.package_version = rel.version;
  idx.git_commit = rel.git_commit;
  std::sort(entries.begin(), entries.end(),
            [](const format::IndexEntry& a, const format::IndexEntry& b) { return a.target < b.target; });
  std::vector<std::string> targets;
  for (const auto& e : entries)  // each once: a release of two toolkits lists a target twice
    if (std::find(targets.begin(), targets.end(), e.target) == targets.end())
      targets.push_back(e.target);
  idx.provenance = sample_provenance(std::move(targets));
  idx.archives = std::move(entries);
  return idx;
}

format::IndexEntry release_index_entry(const ReleaseSpec& rel, const std::string& target,
                               const std::string& archive_bytes) {
  return {format::archive_file_name(rel.package, rel.version, rel.cuda_version, target), target,
          rel.cuda_version, archive_bytes.size(), io::sha256_hex(archive_bytes)};
}

SyntheticDist write_release_dist(const fs::path& dir, const ReleaseSpec& rel,
                                 const std::vector<std::string>& targets) {
  SyntheticDist d;
  d.dir = dir;
  d.package = rel.package;
  d.version = rel.version;
  d.cuda_version = rel.cuda_version;
  fs::create_directories(dir);
  std::vector<format::IndexEntry> entries;
  for (const auto& t : targets) {
    fs::path p = write_release_archive(dir, rel, t);
    std::size_t size = 0;
    std::string sha = io::sha256_file(p, &size);
    entries.push_back({p.filename().string(), t, rel.cuda_version, size, sha});
    d.archive[t] = p.filename().string();
    for (const auto& art : release_artifacts(rel, t))
      d.artifacts[t][art.uri + ".fatbin"] = art.bytes;
  }
  d.index_json = format::index_to_json(release_index(rel, std::move(entries)));
  d.index_path = dir / format::index_file_name(rel.package, rel.version);
  write_file(d.index_path, d.index_json);
  d.index_sha256 = io::sha256_hex(d.index_json);
  return d;
}

void describe_release(SyntheticDist& dist, const std::string& description_json) {
  format::Index idx = format::parse_index(dist.index_json, dist.index_path.string());
  std::string name = format::description_file_name(dist.package, dist.version);
  write_file(dist.dir / name, description_json);
  idx.description = format::IndexFile{name, description_json.size(), io::sha256_hex(description_json)};
  dist.index_json = format::index_to_json(idx);
  write_file(dist.index_path, dist.index_json);
  dist.index_sha256 = io::sha256_hex(dist.index_json);
}

std::string SyntheticDist::stem(const std::string& target) const {
  return format::archive_stem(package, version, cuda_version, target);
}

fs::path write_store_entry(const fs::path& store, const ReleaseSpec& rel,
                           const std::string& target) {
  fs::path dir = store / format::archive_stem(rel.package, rel.version, rel.cuda_version, target);
  write_file(dir / "manifest.json", format::manifest_to_json(release_manifest(rel, target)));
  for (const auto& art : release_artifacts(rel, target))
    write_file(dir / (art.uri + ".fatbin"), art.bytes);
  return dir;
}

}  // namespace kiln::test
