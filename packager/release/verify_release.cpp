#include "release/verify_release.hpp"

#include <map>
#include <memory>

#include "kiln/error.hpp"
#include "project/package.hpp"
#include "project/package_description.hpp"

namespace kiln::release {
namespace {

namespace fs = std::filesystem;

// The version each package described in `store` has there (<name>-<version>.package.json; the
// newest when several): what its archives in that store must be.
std::map<std::string, std::string> described_versions(const fs::path& store) {
  std::map<std::string, std::string> out;
  for (const auto& d : project::find_package_descriptions({store})) out.emplace(d.package, d.version);
  return out;
}

void check_release(const std::string& file, const std::string& package, const std::string& version,
                   const std::string& what, const JudgedRelease& want, ReleaseVerification& out) {
  if (package.empty()) return;  // not read: verify_*_file said why
  if (package != want.name)
    out.problems.push_back({ErrorKind::Stale, file, "package",
                            file + ": " + what + " of package " + package + ", not " + want.name +
                                " (name another with --package or --source)"});
  else if (!want.version.empty() && version != want.version)
    out.problems.push_back(
        {ErrorKind::Stale, file, "package_version",
         file + ": package_version is " + version + ", " + want.name + " is " + want.version});
}

// The release check verify_*_file did not make: a named release's package (its version is
// checked there), or the whole release for the default's own package; and the note of an input
// judged as the package it names.
void judge(const std::string& file, const std::string& package, const std::string& version,
           const std::string& what, const std::string& is, const ReleaseJudging& judged,
           ReleaseVerification& out) {
  if (judged.covers(package)) {
    if (judged.by_default || package != judged.release->name)
      check_release(file, package, version, what, *judged.release, out);
  } else if (!package.empty()) {
    out.named = NamedByInput{is, package, version};
  }
}

// What an artifact of the store says of its kernel that the description beside the store says
// too, as one line ("" when it agrees): the description has no digest in the store, so a flipped
// byte in it is found by reading it (parse errors, a file whose digest differs) or by the
// archives it describes disagreeing with it.
std::string disagreement(const kiln_package& d, const format::ArtifactEntry& a) {
  const kiln_package_kernel* k = nullptr;
  for (std::size_t i = 0; i < d.kernel_count && !k; ++i)
    if (a.uri == d.kernels[i].uri) k = &d.kernels[i];
  if (!k) return "it does not describe " + a.uri + ", which the archives hold";
  std::vector<std::pair<std::string, std::string>> params;
  for (std::size_t i = 0; i < k->param_pairs; ++i)
    params.emplace_back(k->params[2 * i], k->params[2 * i + 1]);
  std::vector<std::string> entries(k->entries, k->entries + k->entry_count);
  std::vector<std::string> names;
  for (const auto& e : a.entries) names.push_back(e.name);
  if (a.family != k->family)
    return a.uri + ": family is " + k->family + ", the archives say " + a.family;
  if (a.source_hash != k->source_hash)
    return a.uri + ": source_hash is " + k->source_hash + ", the archives say " + a.source_hash;
  if (params != a.params) return a.uri + ": its params differ from the archives'";
  if (entries != names) return a.uri + ": its entries differ from the archives'";
  return "";
}

// Each description in the store, read as a command on the node reads it, and held against the
// manifests of its own release's archives there.
void verify_store_descriptions(const fs::path& store, const std::vector<store::StoreArchive>& entries,
                               ReleaseVerification& out) {
  for (const auto& found : project::find_package_descriptions({store})) {
    const std::string file = found.file.string();
    out.checked.push_back(file);
    std::unique_ptr<project::PackageData> data;
    try {
      data = project::load_package_description(found.file);
    } catch (const Error& e) {
      out.problems.push_back({e.kind(), file, "description", e.what()});
      continue;
    }
    for (const auto& e : entries) {
      if (!e.manifest || e.manifest->package != found.package ||
          e.manifest->package_version != found.version)
        continue;
      for (const auto& a : e.manifest->artifacts)
        if (std::string why = disagreement(*data->get(), a); !why.empty()) {
          out.problems.push_back({ErrorKind::Integrity, file, "description",
                                  file + ": " + why + " (" + e.dir + "/manifest.json)"});
          break;
        }
    }
  }
}

// Every archive directory's bytes are checked; the package version against the release named,
// or, with none, against the description of its package beside the store (a store shared by
// several packages holds other releases, which their own loaders judge).
void verify_store_dir(const fs::path& p, bool single, const ReleaseJudging& judged,
                      ReleaseVerification& out) {
  std::vector<store::StoreArchive> entries;
  if (single) {
    // One unpacked archive directory, read as a store scan reads each of its entries.
    entries.push_back(store::scan_store_archive(p.filename().empty() ? p.parent_path() : p));
  } else {
    entries = store::scan_store(p);
  }
  fs::path store = single ? fs::path(entries.front().dir).parent_path() : p;
  const std::map<std::string, std::string> described = described_versions(store);
  for (const auto& e : entries) {
    out.checked.push_back(e.dir);
    auto probs = store::verify_store_archive(e);
    out.problems.insert(out.problems.end(), probs.begin(), probs.end());
    if (!e.manifest) continue;
    const std::string file = e.dir + "/manifest.json";
    if (judged.covers(e.manifest->package) &&
        (single || e.manifest->package == judged.release->name)) {
      check_release(file, e.manifest->package, e.manifest->package_version, "an archive",
                    *judged.release, out);
    } else if (judged.release && !judged.by_default) {
      continue;  // another package's, left to its own loader
    } else if (auto d = described.find(e.manifest->package); d != described.end()) {
      check_release(file, e.manifest->package, e.manifest->package_version, "an archive",
                    {d->first, d->second}, out);
    }
  }
  if (!single) verify_store_descriptions(store, entries, out);
}

// The description an index pins (present and of the pinned digest: verify_index_file), read as
// every command reads it: strictly, and of the index's package and version.
void check_indexed_description(const fs::path& index, const format::Index& idx, ReleaseVerification& out) {
  if (!idx.description) return;
  fs::path f = index.parent_path() / idx.description->file;
  out.checked.push_back(f.string());
  std::error_code ec;
  if (!fs::is_regular_file(f, ec)) return;  // reported by verify_index_file
  try {
    std::unique_ptr<project::PackageData> d = project::load_package_description(f);
    if (d->get()->name != idx.package || d->get()->version != idx.package_version)
      out.problems.push_back({ErrorKind::Stale, f.string(), "package",
                              f.string() + ": describes " + d->get()->name + " " +
                                  d->get()->version + ", the index is " + idx.package + " " +
                                  idx.package_version});
  } catch (const Error& e) {
    out.problems.push_back({e.kind(), f.string(), "description", e.what()});
  }
}

}  // namespace

bool ReleaseJudging::covers(const std::string& package) const {
  return release && (!by_default || package == release->name);
}

std::string ReleaseJudging::version_for_all() const {
  return release && !by_default ? release->version : std::string();
}

int ReleaseVerification::exit_code() const {
  auto w = worst();
  return w ? kiln::exit_code(*w) : 0;
}

ReleaseVerification verify_release_path(const fs::path& p, const ReleaseJudging& judged) {
  const std::string version = judged.version_for_all();
  ReleaseVerification c;
  c.kind = store::classify_path(p);
  switch (c.kind) {
    case store::PathKind::Archive: {
      c.checked.push_back(p.string());
      format::Manifest m;
      c.problems = store::verify_archive_file(p, version, &m);
      judge(p.string(), m.package, m.package_version, "an archive", "is of", judged, c);
      break;
    }
    case store::PathKind::Index: {
      format::Index idx;
      c.problems = store::verify_index_file(p, version, &idx);
      judge(p.string(), idx.package, idx.package_version, "the index", "is the index of", judged,
            c);
      c.checked.push_back(p.string());
      check_indexed_description(p, idx, c);
      for (const auto& a : idx.archives) c.checked.push_back((p.parent_path() / a.file).string());
      break;
    }
    case store::PathKind::Store:
      verify_store_dir(p, false, judged, c);
      // An empty store verifies nothing; saying "OK" would hide a failed install.
      if (c.checked.empty())
        c.problems.push_back({ErrorKind::NotFound, p.string(), "archives",
                              p.string() + ": no archive directories in this store"});
      break;
    case store::PathKind::StoreArchive:
      verify_store_dir(p, true, judged, c);
      break;
    default:
      throw Error(ErrorKind::Usage, "kiln verify checks archives, indexes and stores; " +
                                        p.string() + " is " + describe(c.kind) +
                                        " (try `kiln inspect`)");
  }
  return c;
}

}  // namespace kiln::release
