#pragma once
// `kiln verify`'s judgement: an archive, an index with the files it pins, or a store checked
// whole (store/store.hpp: every problem, not only the first), and its package and version
// against the release it is judged as: the one named on the command line, the project here for
// inputs of its own package, else what the input names itself (in a store, the version described
// beside it). Unit-tested in tests/verify_cli_test.cpp.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace kiln::release {

// The release inputs are judged as: named (--source, --package [--version]; an empty version:
// any), every input then of it; or the project here, a default only for inputs of its own
// package; or none: each input is judged by what it names itself, a store by the descriptions
// beside it.
struct JudgedRelease {
  std::string name;
  std::string version;  // "": any
};
struct ReleaseJudging {
  std::optional<JudgedRelease> release;
  bool by_default = false;  // the project here, not named on the command line
  // Whether an input of `package` is judged as the release (else as what it names itself).
  bool covers(const std::string& package) const;
  // The version verify_*_file checks for every input: only a release named for all.
  std::string version_for_all() const;
};

// An archive or index that names a package it is judged as itself (not covered by the judging):
// worth a line on stderr. `is`: "is of" (an archive), "is the index of".
struct NamedByInput {
  std::string is;
  std::string package;
  std::string version;
};

struct ReleaseVerification {
  store::PathKind kind = store::PathKind::Unknown;
  std::vector<std::string> checked;  // what was looked at, for the report
  std::vector<store::VerifyProblem> problems;
  std::optional<NamedByInput> named;
  std::optional<ErrorKind> worst() const { return store::most_severe(problems); }
  int exit_code() const;  // 0, or the most severe problem's
};

// Checks `path` (an archive, an index, a store, or one unpacked archive directory) as judged.
// An empty store is a NotFound problem (saying "OK" would hide a failed install). Throws
// Error{Usage} for a path of another kind (naming it and `kiln inspect`), Error{NotFound} when it
// does not exist.
ReleaseVerification verify_release_path(const std::filesystem::path& path,
                                        const ReleaseJudging& judged);

}  // namespace kiln::release
