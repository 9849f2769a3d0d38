#pragma once
// The loader's view of store directories (StoreScanner): what a scan of one store found, read
// over store/'s thin disk interface (store/store_fs.hpp) with the policy above it: the process's
// memory of what it read, the scan records kept between processes, the fast scan's reading order.
// The ranking of what it found is plan/resolver.hpp's (plan_stores).
#include <memory>
#include <string>
#include <vector>

#include "format/manifest_entry.hpp"
#include "format/target.hpp"
#include "store/store.hpp"
#include "store/store_fs.hpp"

namespace kiln::plan {

struct StoreScan {
  std::string dir;
  std::string source;  // where the directory came from: "KILN_ARTIFACT_PATH", "installed", "cache"
  bool readable = false;
  std::string problem;                 // "does not exist", "not a directory", ... when !readable
  std::vector<store::StoreArchive> archives;  // sorted by directory name
};

// The targets of `package`'s archive directories in `store`, in name order, as a store scan
// lists them (store/store_scan.hpp: the store rule, bounded); empty when it cannot be listed.
std::vector<format::Target> targets_in_store(const std::string& store, const std::string& package);

// The loader's view of store directories: each scan of a store, over the thin disk interface
// (store/store_fs.hpp), with the policy above it: the process-wide memory of listings and
// manifests while unchanged on disk (identity_cache.hpp), the scan record kept between processes
// (scan_record.hpp), and the fast scan's reading order by the target-choice rule. Given a
// package, only that package's archive directories are read (and the fast scan stops at one of
// `version`); without, every package's. Artifact bytes are read once, hashed, and the same
// buffer goes to the driver: no time-of-check/time-of-use gap.
class StoreScanner {
 public:
  // record_dir: where get()'s fast path keeps each store's scan between processes (the cache
  // directory: <record_dir>/scan/, scan_record.hpp); empty: nowhere (the CLI's scans).
  // fs: the disk; nullptr: the real one.
  // ranks: where the package's URIs stand in its description, which guides get()'s lookups in
  // a manifest (format/manifest_entry.hpp, UriRanks); none: they halve.
  explicit StoreScanner(std::string package = {}, std::string version = {},
                        std::string record_dir = {}, std::shared_ptr<const store::StoreFs> fs = nullptr,
                        format::UriRanks ranks = {});
  // Every archive, whole manifests. Never throws: problems are reported in the result.
  StoreScan scan(const std::string& dir, const std::string& source) const;
  // The fast path of get(): leaves out archives that cannot serve `uri` on a device of compute
  // capability cc (their directory name ends in a target that does not run there), trims each
  // manifest to `uri`'s artifact, and stops after the first archive, in target-preference
  // order, whose manifest lists `uri` for this release. Its best usable candidate is scan()'s;
  // rejections and the other candidates need not be (when nothing it returned serves, get()
  // rescans with scan() and tries the rest). Never throws. `driver` (cuDriverGetVersion's
  // number; 0: not known): archives whose toolkit (in their name) that driver does not run are
  // not read, and of one target the newest toolkit is read first.
  StoreScan scan_for(const std::string& dir, const std::string& source, const std::string& uri,
                     int cc, int driver = 0) const;
  // A store file, whole: regular files only (no FIFO, no /dev/zero behind a symlink), bounded
  // by the largest artifact a store may hold. Throws Error{NotFound, Io, Limit} naming the path.
  std::string read_file(const std::string& path) const;

 private:
  struct OneScan;
  struct ManifestSource;
  // uri == nullptr: every archive, whole manifests (scan()).
  StoreScan scan_impl(const std::string& dir, const std::string& source, const std::string* uri,
                      int cc, int driver = 0) const;
  std::shared_ptr<const std::vector<std::string>> archive_names(OneScan& one,
                                                                std::string& problem) const;
  std::shared_ptr<const std::vector<std::string>> names_from_record(OneScan& one,
                                                                    const std::string& key) const;
  store::StoreArchive read_archive(OneScan& one, const std::string& name) const;
  ManifestSource manifest_source(const OneScan& one, const std::string& mpath) const;
  std::shared_ptr<const format::Manifest> manifest_for_uri(const OneScan& one, const std::string& dir,
                                                   const std::string& mpath,
                                                   ManifestSource& src) const;
  std::shared_ptr<const format::Manifest> whole_manifest(const std::string& dir, const std::string& mpath,
                                                 ManifestSource& src) const;
  bool serves_release(const store::StoreArchive& a, const std::string& uri) const;
  void keep_scan_record(OneScan& one, const std::vector<std::string>& names) const;

  const format::UriRanks* ranks() const { return ranks_.rank ? &ranks_ : nullptr; }

  std::string package_, version_, record_dir_;
  std::shared_ptr<const store::StoreFs> fs_;
  format::UriRanks ranks_;
};

// Forgets what the store tier remembers in this process (identity_cache.hpp: listings, manifests
// read and parsed), so that the next scan starts as a fresh process's does: for tests and
// benchmarks of what a new process pays, such as the scan record (scan_record.hpp).
void forget_store_memory();

}  // namespace kiln::plan
