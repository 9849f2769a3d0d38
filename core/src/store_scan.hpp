#pragma once
// The one rule for what a store holds. Every path that scans a store (the loader's store and
// mirror tiers through DiskStoreFs, `kiln verify/inspect/compat/doctor/resolve` through
// scan_store or DiskStoreFs, fetch's "already installed?" through store_has_verified) asks these
// functions, so the loader and the CLI see the same archives and refuse the same ones.
//
//   an entry of a store directory is an archive directory when
//     its name starts with "kiln-kernels-" (archive_stem's prefix): hidden entries (.tmp-*
//       installs in progress, .kiln-locks), the cache's jit/ and anything else put there are
//       not archives and are skipped without a word;
//     and it is a directory, or a symbolic link to one (stores assembled from links work);
//   an archive directory is usable when its manifest.json parses and its name is
//     archive_stem(package_version, cuda_version, target) of that manifest. A directory whose
//     name says another target or release than its manifest is refused (Format), never used:
//     the loader's fast path skips directories by the target in their name, so a name that lies
//     would make the fast and the full scan disagree.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/manifest.hpp"

namespace kiln {

// The prefix every archive directory's name starts with (archive_stem in manifest.cpp).
inline constexpr std::string_view kArchiveDirPrefix = "kiln-kernels-";

// Pure: does an entry of this name count as an archive directory (when it is a directory)?
bool is_archive_dir_name(std::string_view name);

struct StoreListing {
  bool readable = false;
  std::string problem;                              // when !readable: "does not exist", ...
  std::vector<std::filesystem::path> archive_dirs;  // sorted by name
};

// The archive directories of `store` by the rule above. Never throws: a store that does not
// exist, is not a directory or cannot be listed is reported in `problem`.
StoreListing list_store_archive_dirs(const std::filesystem::path& store);

// Pure: why the archive directory `dir` cannot be used with `manifest` (its name is not the
// stem the manifest gives), naming the directory and the expected name; nullopt when it can.
std::optional<std::string> archive_dir_name_problem(const std::filesystem::path& dir,
                                                    const Manifest& manifest);

}  // namespace kiln
