#pragma once
// Shared by the `kiln mirror` files (mirror_files, mirror_verify, mirror_stage, mirror_sync):
// reading and hashing a release's files in a directory, the options every command resolves the
// same way, and the check of an archive's content against its index entry. Defined in
// mirror_files.cpp.
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "io/file_lock.hpp"
#include "mirror/mirror.hpp"
#include "store/store.hpp"

namespace kiln::mirror::detail {

// Reads a whole file, refusing one larger than `cap` (Error{Format}) or unreadable (Error{Io}).
std::string read_capped(const std::filesystem::path& p, std::size_t cap);

struct Digest {
  std::uint64_t size = 0;
  std::string sha256;
};
Digest digest_of(const std::filesystem::path& p);

bool is_regular(const std::filesystem::path& p);

// The package and release version a mirror command acts on. Both required, checked as file-name
// parts (Error{Usage} naming the missing or bad one).
ReleaseName resolved_release(const std::string& package, const std::string& version);
// A pin in lowercase (empty stays empty); Error{Usage} naming `option` unless 64 hex digits.
std::string resolved_pin(const std::string& pin, const char* option = "--index-sha256");

// Names of the files of `version` in `dir` (regular files, not hidden), with their kinds.
std::map<std::string, ReleaseFileKind> release_files_in(const std::filesystem::path& dir,
                                                        const std::string& package,
                                                        const std::string& version);

// An archive's content against its index entry: members against the manifest, package version,
// and the manifest against the index (the one check, index_entry_check.hpp).
std::vector<store::VerifyProblem> check_archive_content(const std::filesystem::path& path,
                                                 const format::IndexEntry& e, const format::Index& idx,
                                                 const std::string& version,
                                                 const std::string& index_origin);

// The lock a stage or sync holds while it writes into `mirror`: flock on the mirror directory
// itself, so that the mirror holds no lock file. Once it is held, what a stage or sync of
// `package` `version` killed mid-way left is removed: its files' temporaries ("<file>.tmp.<16
// hex>") and its staging directories (sync_staging_prefix()). Error{Io} naming the directory
// when it cannot be taken within `wait` (a sync with nothing to transfer waits for none).
io::FileLock lock_release_in_mirror(const std::filesystem::path& mirror, const std::string& package,
                                const std::string& version,
                                std::chrono::milliseconds wait = std::chrono::minutes(10));
// ".kiln-sync-<package>-<version>-": the name of a sync's staging directory, before mkdtemp's part.
std::string sync_staging_prefix(const std::string& package, const std::string& version);

// Each problem's message on a line of its own ("\n  " before each), to follow a sentence.
std::string join_problems(const std::vector<store::VerifyProblem>& problems);

}  // namespace kiln::mirror::detail
