#pragma once
// The one rule for what a store holds. Every path that scans a store (the loader's store and
// mirror tiers through StoreScanner, `kiln verify/inspect/compat/doctor/resolve` through
// scan_store or StoreScanner, fetch's "already installed?" through store_has_verified) asks these
// functions, so the loader and the CLI see the same archives and refuse the same ones.
//
//   an entry of a store directory is an archive directory when
//     its name is "<package>-<version>-..." (archive_stem's shape: a package name, then a part
//       starting with a digit), and, for a loader, <package> is its own package's name (several
//       packages share a store; one never reads another's): hidden entries (.tmp-* installs in
//       progress, .kiln-locks), the cache's jit/ and tuf/ and anything else put there are not
//       archives and are skipped without a word;
//     and it is a directory, or a symbolic link to one (stores assembled from links work);
//   an archive directory is usable when its manifest.json parses and its name is
//     archive_stem(package, package_version, cuda_version, target) of that manifest. A directory
//     whose name says another target or release than its manifest is refused (Format), never used:
//     the loader's fast path skips directories by the target in their name, so a name that lies
//     would make the fast and the full scan disagree.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/manifest.hpp"
#include "format/target.hpp"

namespace kiln::store {

// Pure: does an entry of this name count as an archive directory (when it is a directory)?
// `package` empty: of any package.
bool is_archive_dir_name(std::string_view name, std::string_view package = {});
// Pure: the target an archive directory is named for (<package>-<version>-cuda<X.Y>-<target>),
// nullopt when its last part is not a target.
std::optional<format::Target> archive_dir_target(std::string_view name);

// What listing a store directory came to: callers decide on this, never on the words.
enum class ListingStatus {
  Listed,
  Absent,         // does not exist
  NotADirectory,  // exists, is not a directory
  Unlistable,     // cannot be opened or read, or holds more entries than the limit
};

struct StoreListing {
  ListingStatus status = ListingStatus::Unlistable;
  std::string problem;  // unless Listed, in words: "does not exist", "not a directory", ...
  std::vector<std::string> archive_names;  // sorted; the directories are <store>/<name>
  // An archive-named entry was a symbolic link (or of a type the directory does not say): what
  // it leads to can change without the store directory's identity changing, so the names are
  // not kept between processes (scan_record.hpp).
  bool through_links = false;
  bool readable() const { return status == ListingStatus::Listed; }
};

// The archive directories of `store` by the rule above. Never throws: a store that does not
// exist, is not a directory, cannot be listed or holds more than io::limits::kMaxStoreEntries
// entries is reported in `status` and, in words, `problem`.
StoreListing list_store_archive_dirs(const std::filesystem::path& store,
                                     std::string_view package = {});

// Throws Error{Format}, naming the directory and the expected name, when the archive directory
// `dir` cannot be used with `manifest`: its name is not the stem the manifest gives. A string,
// not a path: the loader's fast path builds no path object.
void require_archive_dir_name(std::string_view dir, const format::Manifest& manifest);

}  // namespace kiln::store
