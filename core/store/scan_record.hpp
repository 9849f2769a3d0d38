#pragma once
// A store's scan, kept in the cache directory between processes (docs/decisions.md, "The store
// scan kept between processes"). identity_cache.hpp remembers, within a process, a store's
// listing and the manifests read from it while their identities (device, inode, size, mtime,
// ctime) stay the same. A fresh process has nothing remembered, so its first get() lists the
// store and checks the whole manifest text (every artifact) before using one entry: the largest
// share of what a fresh process pays beyond reading and hashing the artifact.
//
// A scan record keeps the same facts on disk, one file per (package, store directory) under
// <cache_dir>/scan/: the directory's identity and its archive directory names, and for each
// manifest checked whole, its identity and layout (manifest_entry.hpp: where the artifacts
// array and each artifact's object lie, and each object's URI). A later process whose stat()
// gives the same identity uses the names without listing, and reads the manifest with its
// layout: only the header and the asked-for artifact's object are read (pread), strictly, from
// the file's own bytes; the other artifacts are neither read nor checked again.
//
// Only identities settled for kRecordSettledNs are written (identity_cache.hpp's rule, with a
// wider margin), so the same identity means the same bytes; names only when the listing went
// through no symbolic link (a link's target can change and the directory's identity not).
//
// A record is a cache: absent, unreadable, of another format or writer, truncated, for another
// store or package, not owned by this user, or writable by others, it is ignored (and
// rewritten when a scan learns something). It supplies positions, names and URIs, never a value
// that reaches the driver: names are opened as directories, the header and the entry are read
// from the manifest's own bytes, artifact bytes are hashed against that entry. What a forged
// one can do is in docs/security.md: hide an archive or an artifact (the loader then takes the
// next candidate), and spare the check of the artifacts not asked for.
//
// The format (text, one fact per line, every number decimal):
//   kiln-scan-record 1
//   writer kiln <version of the libkiln that wrote it> manifest-format <kManifestFormat>
//   package <package>
//   store <store directory, as the loader names it>
//   dir <dev> <ino> <size> <mtime_ns> <ctime_ns>        (all 0: the names are not to be used,
//                                                       e.g. the listing went through links)
//   name <archive directory name>                      (each, sorted, unique)
//   manifest <name> <dev> <ino> <size> <mtime_ns> <ctime_ns> <artifacts_begin> <artifacts_end> <n>
//   span <begin> <end> <uri_pos> <uri_len> <uri>       (n of them, after their manifest; the
//                                                       URI is the rest of the line)
//   end
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/manifest_entry.hpp"
#include "io/identity_cache.hpp"

namespace kiln {

struct ScanRecord {
  struct RecordedManifest {
    FileIdentity id;
    ManifestLayout layout;
    bool operator==(const RecordedManifest& o) const { return id == o.id && layout == o.layout; }
  };
  std::string package;
  std::string store;
  FileIdentity dir;
  std::vector<std::string> names;                     // sorted, unique
  std::map<std::string, RecordedManifest> manifests;  // by archive directory name, one of names
  bool operator==(const ScanRecord& o) const {
    return package == o.package && store == o.store && dir == o.dir && names == o.names &&
           manifests == o.manifests;
  }
};

// The largest record read, and the most spans one manifest may have: far above a release's
// (33 artifacts per target today), and a bound on what a hostile file can make a reader do.
constexpr std::size_t kMaxScanRecordBytes = std::size_t{4} << 20;
constexpr std::size_t kMaxScanRecordSpans = 100000;

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
// a package, store, name or URI that does not fit one line (empty, or holding '\n'; a name
// with a space), a name that is not an archive directory name of the package (store_scan.hpp),
// names not sorted and unique, a manifest not among the names, URIs and spans not as many.
std::optional<std::string> format_scan_record(const ScanRecord& record);
// Pure: the record `text` holds when it is a whole record of this format for `package` and
// `store`, every name an archive directory name of the package, names sorted and unique, every
// manifest's name among them; nullopt otherwise. Never throws.
std::optional<ScanRecord> parse_scan_record(std::string_view text, std::string_view package,
                                            std::string_view store);

// What one of get()'s store scans found (resolver.cpp, StoreScanner::scan_impl).
struct ScanLearned {
  FileIdentity dir;                 // the store directory's identity, taken before the scan
  bool dir_settled = false;         // unchanged for kRecordSettledNs before the scan
  std::vector<std::string> names;   // the archive directory names the scan worked on
  bool listed_now = false;          // names listed from the directory by this scan
  bool through_links = false;       // that listing went through a symbolic link
  std::map<std::string, ScanRecord::RecordedManifest> manifests;  // checked whole, settled
};

// Pure: the record to write after a scan, from the one on disk (nullopt: none or unusable), or
// nullopt when there is nothing to write. Names are kept when the directory is settled and they
// were listed through no link, or are the record's own for this identity; otherwise the record's
// directory identity is all zero and its names only those of the manifests it keeps. Manifests:
// the record's, for names still listed, and this scan's over them.
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

}  // namespace kiln
