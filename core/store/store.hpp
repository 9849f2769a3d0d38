#pragma once
// The store: a directory of unpacked, verified archives the loader reads from.
//
//   <store>/
//     <package>-<version>-cuda<M.m>-<target>/   one per archive, named archive_stem(...)
//       manifest.json                               the archive's manifest, byte for byte
//       <uri>.fatbin ...                            every artifact the manifest lists
//     .tmp-XXXXXX/                                  an install in progress (ignored by readers)
//     .kiln-locks/install.lock                      held by the one installer at work
//
// Installs unpack into a hidden temp directory inside the store and rename it into place, so a
// reader sees either the old directory, the new one, or none: never a partial one.
// Written down in manifests/README.md ("Store layout").
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "io/file_lock.hpp"
#include "kiln/error.hpp"

namespace kiln::store {

// One problem found while verifying; checks go on after one so every problem is reported.
struct VerifyProblem {
  ErrorKind kind = ErrorKind::Integrity;
  std::string file;     // the file at fault (archive, member, store path)
  std::string field;    // the field that differed ("sha256", "size", "package_version", ...)
  std::string message;  // full sentence, names both values where there are two
};

// The most severe kind among problems, for the exit code: Integrity > Stale > Format >
// NotFound > Io > anything else. nullopt when there are none.
std::optional<ErrorKind> most_severe(const std::vector<VerifyProblem>& problems);

// One archive directory of a store, as a scan read it: the CLI's (scan_store) and the loader's
// (plan's StoreScanner) alike.
struct StoreArchive {
  std::string dir;  // <store>/<name>
  // Set when manifest.json parsed and matches the name. Shared with the process-wide memory of
  // parsed manifests (identity_cache.hpp): immutable. The loader's fast path holds the header
  // and the one artifact it asked for.
  std::shared_ptr<const format::Manifest> manifest;
  ErrorKind error_kind = ErrorKind::Format;  // when !manifest
  std::string error;                         // why the entry is unusable; empty with a manifest
};

// Lists the archive directories of a store, sorted by name, by the one store rule the loader
// also uses (core/store/store_scan.hpp): directories (or links to one) named <package>-<version>-*;
// hidden entries (".tmp-*"), the cache's jit/, other directories and plain files are skipped.
// A broken entry (no manifest, unparsable, stale format, name that does not match its
// manifest) is returned with `error` set so callers can report it and go on. A store directory
// that does not exist gives an empty list; one that cannot be read throws Error{Io}. Artifact
// digests are not checked here (see verify_store_archive).
std::vector<StoreArchive> scan_store(const std::filesystem::path& store);

// One archive directory, read as scan_store reads each of its entries (whatever its name is
// told apart by the manifest check: `kiln verify DIR` on one unpacked archive).
StoreArchive scan_store_archive(const std::filesystem::path& dir);

// Every artifact listed by the manifest: present, size and sha256 as recorded. Returns the
// problems (empty: all good). A StoreArchive with `error` set gives that error as a problem.
std::vector<VerifyProblem> verify_store_archive(const StoreArchive& entry);

// Archive members against their manifest: manifest.json first, every artifact present with the
// recorded size and sha256, no member the manifest does not list. `origin` names the archive.
// The manifest is parsed from the first member; on success `manifest_out` receives it.
std::vector<VerifyProblem> verify_archive_members(const std::vector<format::ArchiveMember>& members,
                                                  const std::string& origin,
                                                  format::Manifest* manifest_out = nullptr);

// Reads one artifact of an unpacked archive and checks its size and sha256 against the
// manifest entry: Error{NotFound} when missing, Error{Integrity} naming the file and both
// digests when it differs. What the loader hands to the driver comes through here.
std::string read_verified_artifact(const std::filesystem::path& archive_dir,
                                   const format::ArtifactEntry& artifact);

// True when <store>/<stem>/ holds a manifest that parses, matches the name, and every artifact
// it lists with the recorded size and sha256 (verify_store_archive finds nothing).
bool store_has_verified(const std::filesystem::path& store, const std::string& stem);

struct InstallResult {
  std::filesystem::path directory;  // <dest>/<stem>
  format::Manifest manifest;
  enum class Action { Installed, Replaced, Unchanged } action = Action::Installed;
};

// Verifies an archive (its sha256 when `expected_sha256` is given, before anything is
// decompressed) and streams it, manifest first, into a temp dir of the store under the store's
// install lock, checking limits (docs/security.md) from the manifest before any other member is
// read and every member against the manifest as it is written; the temp dir is renamed to
// <dest_store>/<stem>/ only when all matched. Temp dirs of installers that died are removed
// under the same lock. An existing identical copy is left as it is; a differing one is replaced
// atomically. Any refusal (digest mismatch, bad entry, missing or misplaced manifest, a limit)
// throws and leaves the store's archive directories exactly as they were (Error{Limit} for a
// limit).
// Error kinds: Integrity (digests), Format (archive/manifest), Stale (format version),
// NotFound (archive), Io (store not writable).
// An archive of another package or package version than `required` names (empty fields: not
// checked) is refused with Error{Stale} naming both values, before the store is touched.
struct RequiredRelease {
  std::string package;
  std::string version;
};
// Remove: the archive is a download kept only to be installed (kiln fetch, the loader's mirror
// tier); it is removed once unpacked and verified, before the directory is renamed into place,
// so that a kill at any point leaves the archive or the store directory, never both (crash
// points, tests/crash/). A refused archive is left for the caller.
enum class ArchiveAfterInstall { Keep, Remove };
InstallResult install_archive(const std::filesystem::path& archive,
                              const std::filesystem::path& dest_store,
                              const std::optional<std::string>& expected_sha256 = std::nullopt,
                              const RequiredRelease& required = {},
                              ArchiveAfterInstall after = ArchiveAfterInstall::Keep);

// The lock every writer of the file <store>/<file> holds while writing it (an archive `kiln
// fetch` downloads, a package description): <store>/.kiln-locks/<file>.lock. Whoever takes it
// may remove the <file>.tmp.* that a writer killed mid-write left (remove_orphaned_temps).
std::filesystem::path store_file_lock_path(const std::filesystem::path& store,
                                           const std::string& file);
// Takes that lock within `timeout` (FileLock::acquire: Error{Io} naming it on timeout), its
// directory created first (Error{Io} naming the directory when it cannot be), then removes the
// <file>.tmp.* a killed writer left; what was removed goes to `removed` when given. Every writer
// of a store file takes it through here.
// `on_wait` runs once when the lock is held by another holder, before waiting for it (a caller
// says it waits only when it does).
io::FileLock lock_store_file(const std::filesystem::path& store, const std::string& file,
                         std::chrono::milliseconds timeout,
                         std::vector<std::filesystem::path>* removed = nullptr,
                         const std::function<void()>& on_wait = {});

// Writes a release's description (index format 3: `pin`, whose file name parse_index derived from
// the package and version) into `dest_store` as <store>/<pin.file>, atomically, after checking
// `bytes` against the pin (Error{Integrity} naming `origin`, the index and both values), under
// store_file_lock_path(), removing what a killed writer of it left. The store directory is
// created when missing. Returns the file written. Its content is read strictly wherever it is
// used (project/package_description.hpp).
std::filesystem::path install_description(std::string_view bytes, const format::IndexFile& pin,
                                          const std::filesystem::path& dest_store,
                                          const std::string& origin,
                                          const std::string& index_origin);

// A release from its index (`index_path`, parsed as `index`), all or nothing: nothing is written
// into `dest_store` (not even its lock directory) before every file the index pins beside it is
// present with the pinned size and sha256, the package description included (Error{NotFound},
// Error{Integrity} naming the file, the index and both values, as `kiln verify INDEX` words it),
// and every archive's manifest agrees with the index (require_manifest_matches_index). Then,
// under the store's install lock, every archive is unpacked and checked member by member into a
// temp dir of its own; only when all passed are they renamed into place, one by one, and the
// description is written last. A refusal throws one Error of the most severe kind naming every
// file refused (fields: those of the first refusal of that kind) and leaves the store as it
// was; a kill at any point leaves archive directories that verify and temp dirs the next
// installer removes, never a description without its archives.
struct ReleaseInstallResult {
  std::vector<InstallResult> archives;               // in the index's order
  std::optional<std::filesystem::path> description;  // written, when the index pins one
};
ReleaseInstallResult install_release(const std::filesystem::path& index_path, const format::Index& index,
                                     const std::filesystem::path& dest_store);

// Whole-file checks used by `kiln verify` (and anyone re-checking a download). Every problem is
// collected; nothing stops at the first. `expected_package_version` empty: any version passes;
// otherwise a differing package_version is a Stale problem naming both values.
std::vector<VerifyProblem> verify_archive_file(const std::filesystem::path& archive,
                                               const std::string& expected_package_version,
                                               format::Manifest* manifest_out = nullptr);
// The index, then each file it pins, looked up beside it: the package description (index format
// 3) and each archive, present (NotFound), size and sha256 as pinned (Integrity); each archive's
// manifest agreeing with the index entry (target, package and CUDA version), then
// verify_archive_file. The description's content is the caller's to read (project/).
std::vector<VerifyProblem> verify_index_file(const std::filesystem::path& index,
                                             const std::string& expected_package_version,
                                             format::Index* index_out = nullptr);

// What a path given to the CLI holds: decided from its content where that says (magic bytes, an
// index or manifest's "format"), else from its name (<...>-index.json, manifest.json, .tar.zst),
// so a corrupt index is an index whose parser names the fault; Unknown when neither says.
enum class PathKind { Fatbin, Cubin, Archive, Index, Manifest, Store, StoreArchive, Unknown };
const char* to_string(PathKind kind);
// The kind in a sentence, with its article: "an index", "a fatbin", "a file of no kind kiln
// reads" (Unknown).
const char* describe(PathKind kind);
// Throws Error{NotFound} when the path does not exist.
PathKind classify_path(const std::filesystem::path& path);

}  // namespace kiln::store
