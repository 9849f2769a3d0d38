#pragma once
// A store's scan, kept in the cache directory between processes (docs/decisions.md, "The store
// scan kept between processes"). identity_cache.hpp remembers, within a process, a store's
// listing and the manifests read from it while their identities (device, inode, size, mtime,
// ctime) stay the same. A fresh process has nothing remembered, so its first get() lists the
// store directory.
//
// A scan record keeps the listing on disk, one file per (package, store directory) under
// <cache_dir>/scan/: the directory's identity and its archive directory names. A later process
// whose stat() of the directory gives the same identity uses the names without listing it.
// Manifests need no record: get() looks one URI up in a manifest without reading it whole
// (ManifestEntries::open), from its own bytes, in every process. (Version 1 also kept each
// manifest's layout, the place of every artifact's object: a record as large as the manifest's
// artifact count, read whole by every fresh process; docs/decisions.md, "Manifests looked up,
// not read".)
//
// Only a directory identity settled for kRecordSettledNs is written (identity_cache.hpp's rule,
// with a wider margin), so the same identity means the same names; names only when the listing
// went through no symbolic link (a link's target can change and the directory's identity not).
//
// A record is a cache: absent, unreadable, of another format or writer, truncated, for another
// store or package, not owned by this user, or writable by others, it is ignored (and
// rewritten when a scan lists the directory). It supplies names, never a value that reaches the
// driver: names are opened as directories and held to the store rule. What a forged one can do
// is in docs/security.md: hide an archive (the loader then takes the next candidate).
//
// The format (text, one fact per line, every number decimal):
//   kiln-scan-record 3
//   writer kiln <version of the libkiln that wrote it> manifest-format <kManifestFormat>
//   package <package>
//   store <store directory, as the loader names it>
//   dir <dev> <ino> <size> <mtime_ns> <ctime_ns>
//   name <archive directory name>                      (each, sorted, unique)
//   end <SHA-256 of every byte before this line>       (a flipped byte is an ignored record)
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/identity_cache.hpp"

namespace kiln::store {

struct ScanRecord {
  std::string package;
  std::string store;
  io::FileIdentity dir;
  std::vector<std::string> names;  // sorted, unique
  bool operator==(const ScanRecord& o) const {
    return package == o.package && store == o.store && dir == o.dir && names == o.names;
  }
};

// The largest record read: far above a store's (a name per archive directory), and a bound on
// what a hostile file can make a reader do.
constexpr std::size_t kMaxScanRecordBytes = std::size_t{4} << 20;

// How long before a scan a file or directory must have last changed for its identity to be
// recorded: longer than identity_cache.hpp's in-process kSettledNs, since a record outlives the
// process (vfat keeps mtime in 2 s steps; a rewrite within the step would keep the identity).
constexpr std::int64_t kRecordSettledNs = 3'000'000'000;

// The most records one scan/ directory keeps (a record per package and store: a machine has a
// handful). Writing one more removes the least recently written beyond kKeepScanRecords, and
// temporary files left by writers that died, so that stores used once (temporary directories)
// do not fill the cache. A record removed costs its store one slower process.
constexpr std::size_t kMaxScanRecords = 256;
constexpr std::size_t kKeepScanRecords = 192;

// <cache_dir>/scan/<16 hex digits of FNV-1a 64 over "<package>\n<store>">. The record names
// its package and store itself: a file whose key collides is for another store and ignored.
std::string scan_record_path(std::string_view cache_dir, std::string_view package,
                             std::string_view store);

// Pure: the text of a record; nullopt when it cannot be one that parse_scan_record takes back:
// a package, store or name that does not fit one line (empty, or holding '\n'; a name with a
// space), a name that is not an archive directory name of the package (store_scan.hpp), names
// not sorted and unique.
std::optional<std::string> format_scan_record(const ScanRecord& record);
// Pure: the record `text` holds when it is a whole record of this format for `package` and
// `store`, every name an archive directory name of the package, names sorted and unique;
// nullopt otherwise. Never throws.
std::optional<ScanRecord> parse_scan_record(std::string_view text, std::string_view package,
                                            std::string_view store);

// What one of get()'s store scans found (resolver.cpp, StoreScanner::scan_impl).
struct ScanLearned {
  io::FileIdentity dir;                 // the store directory's identity, taken before the scan
  bool dir_settled = false;         // unchanged for kRecordSettledNs before the scan
  std::vector<std::string> names;   // the archive directory names the scan worked on
  bool listed_now = false;          // names listed from the directory by this scan
  bool through_links = false;       // that listing went through a symbolic link
};

// Pure: the record to write after a scan, from the one on disk (nullopt: none or unusable), or
// nullopt when there is nothing to write: names are kept when the directory is settled and they
// were listed through no link, or are the record's own for this identity; otherwise nothing is
// written (the record on disk, for another identity, is not used).
std::optional<ScanRecord> next_scan_record(const std::optional<ScanRecord>& on_disk,
                                           std::string_view package, std::string_view store,
                                           ScanLearned now);

// The record at `path`, when it is a regular file owned by this process's effective user,
// writable by no one else, at most kMaxScanRecordBytes, and parse_scan_record accepts it;
// nullopt otherwise (a link is not followed). Never throws.
std::optional<ScanRecord> read_scan_record(const std::string& path, std::string_view package,
                                           std::string_view store);
// Writes the record to `path` (its directory created with mode 0700 when missing) so that a
// reader sees the old file or the whole new one: a temporary file in the same directory,
// renamed over it. Not fsync'ed: a record lost or cut short by a crash is ignored by its reader
// and written again. Returns why it could not, or nullopt; never throws. A directory owned by
// another user is not written into. Then keeps the directory within kMaxScanRecords (above).
std::optional<std::string> write_scan_record(const std::string& path, const ScanRecord& record);

}  // namespace kiln::store
