// Which release `kiln install` accepts, and the install of one input (install_acceptance.hpp).
#include "plan/install_acceptance.hpp"

#include "io/atomic_file.hpp"
#include "io/limits.hpp"
#include "kiln/error.hpp"
#include "project/package_description.hpp"
#include "store/index_entry_check.hpp"

namespace kiln::plan {

namespace fs = std::filesystem;

store::RequiredRelease InstallAcceptance::required_for(const std::string& package) const {
  const store::RequiredRelease none;
  if (any_version) return none;
  if (given || (named && package == named->package)) return named.value_or(none);
  auto d = described.find(package);
  if (d == described.end()) return none;
  return {package, d->second};
}

InstallAcceptance install_acceptance(bool any_version, bool given,
                                     std::optional<store::RequiredRelease> named, const fs::path& dest) {
  InstallAcceptance rule;
  rule.any_version = any_version;
  rule.given = given;
  if (any_version) return rule;
  rule.named = std::move(named);
  if (!given)
    for (auto& d : project::find_package_descriptions({dest}))
      rule.described.emplace(d.package, d.version);  // newest first: the first one stays
  return rule;
}

void require_index_accepted(const format::Index& idx, const store::RequiredRelease& wanted,
                            const std::string& origin) {
  if (!wanted.package.empty() && idx.package != wanted.package)
    throw Error(ErrorKind::Stale, origin + ": the index of package " + idx.package + ", not " +
                                      wanted.package +
                                      " (name it with --package or --source, or pass "
                                      "--any-version)");
  if (!wanted.version.empty() && idx.package_version != wanted.version)
    throw Error(ErrorKind::Stale, origin + ": package_version is " + idx.package_version + ", " +
                                      wanted.package + " wanted is " + wanted.version +
                                      " (the version named or described beside --dest; "
                                      "name this one with --version " +
                                      idx.package_version +
                                      ", or pass --any-version to keep both)");
  if (idx.archives.empty()) throw Error(ErrorKind::NotFound, origin + " lists no archives");
}

InputInstall install_input(const fs::path& input, const fs::path& dest,
                           const InstallAcceptance& rule) {
  InputInstall out;
  const store::PathKind kind = store::classify_path(input);
  if (kind == store::PathKind::Archive) {
    // Its manifest, read ahead only where the package whose description beside `dest` pins it
    // must be known before unpacking.
    std::optional<format::Manifest> m;
    if (!rule.described.empty()) m = store::read_leading_manifest(input);
    out.archives.emplace_back(
        input, store::install_archive(input, dest, std::nullopt, rule.required_for(m ? m->package : "")));
    return out;
  }
  if (kind != store::PathKind::Index)
    throw Error(ErrorKind::Usage, input.string() + " is " + describe(kind) +
                                      ", not an archive (.tar.zst) or an index");
  format::Index idx = format::parse_index(io::read_whole_file(input, io::limits::kMaxLocalFileBytes), input.string());
  require_index_accepted(idx, rule.required_for(idx.package), input.string());
  // All or nothing: every archive and the description checked against the index before anything
  // is written (install_release).
  store::ReleaseInstallResult r = store::install_release(input, idx, dest);
  for (std::size_t i = 0; i < r.archives.size(); ++i)
    out.archives.emplace_back(input.parent_path() / idx.archives[i].file, r.archives[i]);
  if (r.description)
    out.description.emplace(input.parent_path() / idx.description->file, *r.description);
  return out;
}

}  // namespace kiln::plan
