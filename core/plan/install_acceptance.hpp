#pragma once
// Which release `kiln install` accepts for each input it is given, and the install of one input
// (an archive or an index) under that rule. The command parses options and prints; what it
// installs and refuses is decided here.
//
// The rule, in order:
//   1. --any-version: every input installs its own package and version;
//   2. --source, --package or --version given: every input must be of the release named;
//   3. else the release named (the project in the current directory) holds for inputs of its own
//      package; an input of another package installs its own package, except that a package
//      described beside the destination store (<name>-<version>.package.json, which its loader
//      judges freshness by) must be of the version described.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "format/manifest.hpp"
#include "store/store.hpp"

namespace kiln::plan {

struct InstallAcceptance {
  bool any_version = false;                      // rule 1
  bool given = false;                            // rule 2: `named` holds for every input
  std::optional<store::RequiredRelease> named;          // the release named, when one is
  std::map<std::string, std::string> described;  // package -> version described beside the store

  // The release an input of `package` must be ("" fields: not checked). `package` may be ""
  // (not known): then only a given release applies.
  store::RequiredRelease required_for(const std::string& package) const;
};

// The rule for installing into `dest`: the descriptions beside it are read (their names only,
// the newest version of each package) unless rule 1 or 2 decides every input.
InstallAcceptance install_acceptance(bool any_version, bool given,
                                     std::optional<store::RequiredRelease> named,
                                     const std::filesystem::path& dest);

// An index (read from `origin`) against the release it must be: Error{Stale} naming both
// packages or both versions and how to install it anyway; Error{NotFound} when it lists no
// archive.
void require_index_accepted(const format::Index& index, const store::RequiredRelease& wanted,
                            const std::string& origin);

// What installing one input did: each archive (its path: the input, or beside the index) and
// what became of it; the description an index pins, from where to where.
struct InputInstall {
  std::vector<std::pair<std::filesystem::path, store::InstallResult>> archives;
  std::optional<std::pair<std::filesystem::path, std::filesystem::path>> description;
};

// Installs one input into `dest` under `rule`: a bare archive against its own manifest (read
// ahead only where a description beside `dest` may pin its package); an index all or nothing
// (install_release) once require_index_accepted passed. Throws Error{Usage} for any other kind
// of file, and whatever the install refuses with.
InputInstall install_input(const std::filesystem::path& input, const std::filesystem::path& dest,
                           const InstallAcceptance& rule);

}  // namespace kiln::plan
