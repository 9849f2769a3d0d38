#pragma once
// Resolution as pure functions over values (docs/rules.md, Pure decisions): which artifacts of
// which stores could serve a URI on a device of compute capability cc, in what order, and why every
// other one was rejected. Reading stores and files sits behind StoreFs (store/store_fs.hpp); the
// driver, the compiler and the fetcher are injected through LoaderDeps, so the whole order is
// unit-tested with fakes.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fetch/fetch.hpp"
#include "format/manifest.hpp"
#include "format/target.hpp"
#include "kiln/error.hpp"
#include "kiln/loader.hpp"
#include "plan/target_choice.hpp"
#include "store/store.hpp"
#include "store/store_fs.hpp"

namespace kiln {

class Driver;
class JitCompiler;

// What the loader's package is; a candidate differing in any of these is stale.
struct BuildIdentity {
  std::string package;          // the package's name: archives of another package are skipped
  std::string package_version;  // the package's version
  int manifest_format = kManifestFormat;
  std::string source_hash;  // of the URI being resolved, from the embedded registry
};

// One way an artifact is stale for a libkiln: the field, both values, and the sentence the
// loader reports ("package_version differs: archive has 0.0.9, this libkiln is 0.1.0").
struct StaleField {
  std::string field;  // package_version, format_version, source_hash
  std::string package_value;
  std::string loader_value;
  std::string message;
};
// The freshness rule, every field that differs, in the order the loader checks them. The loader
// rejects on the first; `kiln compat` reports them all. Empty: fresh.
std::vector<StaleField> stale_fields(const Manifest& m, const ArtifactEntry& art,
                                     const BuildIdentity& id);

// The format_version a manifest text declares ("?" when it has none), for a message naming both
// values when the parser refused it as stale.
std::string declared_format(const std::string& text);

struct StoreScan {
  std::string dir;
  std::string source;  // where the directory came from: "KILN_ARTIFACT_PATH", "installed", "cache"
  bool readable = false;
  std::string problem;                // "does not exist", "not a directory", ... when !readable
  std::vector<StoreArchive> archives;  // sorted by directory name
};

// The targets of `package`'s archive directories in `store`, in name order, as a store scan
// lists them (store/store_scan.hpp: the store rule, bounded); empty when it cannot be listed.
std::vector<Target> targets_in_store(const std::string& store, const std::string& package);

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
                        std::string record_dir = {}, std::shared_ptr<const StoreFs> fs = nullptr,
                        UriRanks ranks = {});
  // Every archive, whole manifests. Never throws: problems are reported in the result.
  StoreScan scan(const std::string& dir, const std::string& source) const;
  // The fast path of get(): leaves out archives that cannot serve `uri` on a device of compute
  // capability cc (their directory name ends in a target that does not run there), trims each
  // manifest to `uri`'s artifact, and stops after the first archive, in target-preference
  // order, whose manifest lists `uri` for this release. Its best usable candidate is scan()'s;
  // rejections and the other candidates need not be (when nothing it returned serves, get()
  // rescans with scan() and tries the rest). Never throws.
  StoreScan scan_for(const std::string& dir, const std::string& source, const std::string& uri,
                     int cc) const;
  // A store file, whole: regular files only (no FIFO, no /dev/zero behind a symlink), bounded
  // by the largest artifact a store may hold. Throws Error{NotFound, Io, Limit} naming the path.
  std::string read_file(const std::string& path) const;

 private:
  struct OneScan;
  struct ManifestSource;
  // uri == nullptr: every archive, whole manifests (scan()).
  StoreScan scan_impl(const std::string& dir, const std::string& source, const std::string* uri,
                      int cc) const;
  std::shared_ptr<const std::vector<std::string>> archive_names(OneScan& one,
                                                                std::string& problem) const;
  std::shared_ptr<const std::vector<std::string>> names_from_record(OneScan& one,
                                                                    const std::string& key) const;
  StoreArchive read_archive(OneScan& one, const std::string& name) const;
  ManifestSource manifest_source(const OneScan& one, const std::string& mpath) const;
  std::shared_ptr<const Manifest> manifest_for_uri(const OneScan& one, const std::string& dir,
                                                   const std::string& mpath,
                                                   ManifestSource& src) const;
  std::shared_ptr<const Manifest> whole_manifest(const std::string& dir, const std::string& mpath,
                                                 ManifestSource& src) const;
  bool serves_release(const StoreArchive& a, const std::string& uri) const;
  void keep_scan_record(OneScan& one, const std::vector<std::string>& names) const;

  const UriRanks* ranks() const { return ranks_.rank ? &ranks_ : nullptr; }

  std::string package_, version_, record_dir_;
  std::shared_ptr<const StoreFs> fs_;
  UriRanks ranks_;
};

// Forgets what the store tier remembers in this process (identity_cache.hpp: listings, manifests
// read and parsed), so that the next scan starts as a fresh process's does: for tests and
// benchmarks of what a new process pays, such as the scan record (scan_record.hpp).
void forget_store_memory();

// Target choice (choose_targets, device_target, cc_string, why_not_runnable) is in
// target_choice.hpp: plan_stores, the mirror tier and the failure's advice all call it.

// A store artifact that may serve the URI, in order of preference.
struct StoreCandidate {
  Candidate candidate;  // tier "store", target, path of the artifact file
  std::string store_dir;
  std::uint64_t size = 0;
  std::string sha256;
  std::vector<std::string> symbols;  // entry symbols, registry order
  std::string stale;                 // non-empty: stale, used only because allow_stale
};

struct Rejection {
  Rejection() = default;
  Rejection(Candidate c, ErrorKind k, std::vector<ErrorField> f = {})
      : candidate(std::move(c)), kind(k), fields(std::move(f)) {}
  Candidate candidate;
  ErrorKind kind = ErrorKind::NotFound;  // Stale, Integrity, Unsupported, Driver, ...
  std::vector<ErrorField> fields;        // of the error that rejected it (e.g. attack=rollback)
};

struct StorePlan {
  std::vector<StoreCandidate> usable;  // stores in order; within a store, best target first
  std::vector<Rejection> rejected;
};

// Pure: every artifact of `uri` in `stores` ranked for device cc, with the stale ones and
// the ones that do not run on cc rejected (the field that differed and both values named).
// `explain` false: the same candidates and rejections in the same order, the candidates'
// reasons left empty (get()'s fast path, which shows none of them).
StorePlan plan_stores(const std::string& uri, int cc, const BuildIdentity& id,
                      const std::vector<StoreScan>& stores, bool allow_stale, bool explain = true);

// "" when `bytes` matches the manifest's size and digest; else "integrity: " and the first
// mismatch in artifact_check.hpp's words ("sha256 is X, manifest says Y").
std::string verify_artifact(const std::string& bytes, std::uint64_t size,
                            const std::string& sha256);

// Pure: up to `max` registry URIs close to `uri` (edit distance, shared family prefix).
std::vector<std::string> near_matches(const std::string& uri, const std::vector<std::string>& all,
                                      std::size_t max = 5);

// Pure: the "to get it" advice of a failed get() on a device of compute capability cc, from the
// targets release `version` offers (release_targets(); empty when unknown): `kiln fetch --device`
// with the archive the target-choice rule picks, or "no archive of release V can run on CC X.Y".
// `family` (the URI's): when none of its declared targets runs on cc, no archive nor JIT can
// serve it, and the advice says so (family_cannot_run).
std::string fetch_advice(int cc, const std::string& package, const std::string& version,
                         const std::vector<std::string>& offered, const std::string& cache_dir,
                         const Family* family = nullptr);

// Pure: the error for a failed get(): kind from what was rejected (Stale or Integrity when
// every candidate that would have run failed for that reason, else NotFound), message naming
// the URI, device target, every directory searched, every rejection and fetch_advice(). Fields:
// uri and target, then those of the first rejection of the deciding kind (a TUF mirror's
// attack=..., an archive's file=...) under names not already taken.
Error resolution_failure(const std::string& uri, int cc, const std::vector<std::string>& searched,
                         const std::vector<Rejection>& rejected, const std::string& advice);

// The resolution order as a value (docs/loader.md): the tiers after the
// in-process cache, in order, each either walked or skipped with the rejection both get() and
// resolve() report. Pure: decided from the configuration alone.
struct Tier {
  std::string name;               // "store", "mirror", "jit"
  std::optional<Rejection> skip;  // set: not walked; this is what is reported instead
};
struct TierInputs {
  bool offline = false;
  std::vector<std::string> mirrors;
  bool disable_jit = false;
};
std::vector<Tier> resolution_plan(const TierInputs& in, int cc);

// Pure: why the JIT tier cannot serve the URI of `family` on cc: the family's declared targets
// admit no target JIT builds for cc (jit/jit.hpp jit_target, the family's own rule), or NVRTC is
// unavailable or does not list the arch; nullopt when it can. family nullptr: NVRTC alone.
struct JitCapability;
std::optional<Rejection> jit_refusal(const JitCapability& cap, int cc,
                                     const Family* family = nullptr);

// Pure: the mirror tier's choice over the targets the release offers (the pinned index for
// get(), the compiled-in release_targets() for resolve()): the targets to fetch, best first,
// and a rejection for each offered target that cannot run on cc; when none can, a last
// rejection "no archive of release V can run on CC X.Y". `where` is the mirror list. `family`
// (the URI's): targets its declared targets do not admit are rejected too (choose_targets).
struct MirrorChoice {
  std::vector<std::string> fetch;  // best first
  std::vector<std::string> reasons;
  std::vector<Rejection> rejected;
};
MirrorChoice choose_mirror_targets(int cc, const std::string& package, const std::string& version,
                                   const std::vector<std::string>& offered,
                                   const std::string& where, const Family* family = nullptr);

// What Loader runs over. Any member left empty gets the real one.
struct LoaderDeps {
  std::shared_ptr<Driver> driver;
  std::shared_ptr<const StoreFs> fs;  // the disk under the loader's StoreScanner
  std::shared_ptr<JitCompiler> jit;
  std::function<FetchResult(const FetchOptions&, const std::vector<std::string>&,
                            const std::string&)>
      fetch;
  // The targets the pinned index of the release offers (kiln::fetch_index_targets); the mirror
  // tier chooses among them with choose_targets before fetching.
  std::function<std::vector<std::string>(const FetchOptions&)> index_targets;
  // The store installed beside the library; nullopt = found with dladdr.
  std::optional<std::string> installed_store;
};

// <dir of the file holding `address`>/../share/kiln/artifacts ("" when it cannot be found):
// with a package description's address, the store installed beside the package's library.
std::string installed_store_dir(const void* address);
// What the mirror tier fetches with under `cfg`: its mirrors, trust anchors (index pin, TUF
// root, `installed_root` from installed_tuf_root(), metadata under <cache dir>/tuf), CA bundle
// and offline switch. The loader's mirror tier, `kiln fetch`, `kiln bundle` and `kiln doctor`'s
// probe start from it, so they read one configuration the same way.
FetchOptions mirror_fetch_options(const LoaderConfig& cfg, const std::string& installed_root);

// <dir of the file holding libkiln (or bin/kiln)>/../share/kiln/tuf/root.json: the TUF root an
// operator installs beside the library (kiln tarball ships none); "" when the library cannot be
// found; the file may not exist.
std::string installed_tuf_root();

}  // namespace kiln
