#include "plan/store_scanner.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "format/manifest_entry.hpp"
#include "format/toolkit.hpp"
#include "io/identity_cache.hpp"
#include "io/limits.hpp"
#include "plan/resolver.hpp"
#include "plan/target_choice.hpp"
#include "runtime/cold_phases.hpp"
#include "runtime/log.hpp"
#include "store/scan_record.hpp"
#include "store/store_scan.hpp"

namespace kiln::plan {

namespace {

// Parsed manifests, process-wide, keyed by path and checked against the exact text read now:
// a new Loader (or a rescan) re-reads manifest.json but parses it only when its bytes changed.
// Parsing is deterministic in (text, path), so a hit gives what parsing would.
struct ParsedManifest {
  std::string text;
  format::Manifest manifest;
};

// What was made from a file's text, keyed by path and kept while the text is the same; bounded
// (stores hold few archives).
template <class T>
struct TextCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const T>> map;

  // What `path` gave when it held `text` (text_of(value) is the text it was made from), else
  // make() remembered for it. make() may take `text`: it runs after the comparison.
  template <class TextOf, class Make>
  std::shared_ptr<const T> get(const std::string& path, const std::string& text, TextOf text_of,
                               Make make) {
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = map.find(path);
      if (it != map.end() && text_of(*it->second) == text) return it->second;
    }
    std::shared_ptr<const T> made = make();
    std::lock_guard<std::mutex> lock(mu);
    if (map.size() >= 256) map.clear();
    map[path] = made;
    return made;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu);
    map.clear();
  }
};

// Everything the store tier remembers in this process (identity_cache.hpp: kept while the file
// or directory is unchanged on disk), one object so that it is forgotten in one place
// (forget_store_memory()).
struct StoreMemory {
  // A store's archive directory names, as listed (every <package>-<version>-* subdirectory,
  // sorted), keyed by "<package>\n<store>".
  io::IdentityCache<std::vector<std::string>> listings;
  // Names taken from scan records, for get()'s fast path only (the full scan lists itself).
  io::IdentityCache<std::vector<std::string>> recorded_listings;
  // Directories whose scan record did not serve (none, or of another identity), by the identity
  // they had: a store not settled yet is listed by every get, without reading the record again.
  io::IdentityCache<bool> records_not_serving{io::Rewrites::never};
  // Manifests parsed whole (full scans) and read for lookups by URI (get()'s fast path),
  // remembered as soon as they are read, settled or not: a store's archive directories are
  // written beside the store and renamed into it, never rewritten in place (identity_cache.hpp,
  // Rewrites::never), so a new manifest is a new file with another identity.
  io::IdentityCache<format::Manifest> manifests{io::Rewrites::never};
  io::IdentityCache<format::ManifestEntries> manifest_entries{io::Rewrites::never};
  // The same keyed by text, for a manifest whose identity changed but not its bytes (touched,
  // or installed again from the same archive): read again, not parsed again.
  TextCache<ParsedManifest> parsed_by_text;
  TextCache<format::ManifestEntries> entries_by_text;

  void clear() {
    listings.clear();
    recorded_listings.clear();
    records_not_serving.clear();
    manifests.clear();
    manifest_entries.clear();
    parsed_by_text.clear();
    entries_by_text.clear();
  }
};
StoreMemory& store_memory() {
  static StoreMemory memory;
  return memory;
}

std::shared_ptr<const ParsedManifest> parse_manifest_cached(const std::string& text,
                                                            const std::string& path) {
  return store_memory().parsed_by_text.get(
      path, text, [](const ParsedManifest& p) -> const std::string& { return p.text; },
      [&] {
        return std::make_shared<const ParsedManifest>(
            ParsedManifest{text, format::parse_manifest(text, path)});
      });
}

// The same for get()'s fast path, which reads a manifest for one URI at a time
// (manifest_entry.hpp): the text and its header are kept, each URI's entry converted when asked.
// Takes `text` only when it returns (ManifestEntries::read).
std::shared_ptr<const format::ManifestEntries> read_manifest_entries_cached(std::string&& text,
                                                                    const std::string& path) {
  return store_memory().entries_by_text.get(
      path, text, [](const format::ManifestEntries& e) -> const std::string& { return e.text(); },
      [&] { return format::ManifestEntries::read(std::move(text), path); });
}

// Pure: the archive names a scan reads, in order. A full scan (uri == nullptr) reads every one
// in name order. get()'s fast path leaves out a name whose target cannot run on cc (its
// manifest is not even read; sound because a directory whose name does not match its manifest
// is refused) and puts the best target first by the one target-choice rule, so that reading can
// stop at the first archive whose manifest lists the URI: in a store holding a whole release, a
// cold get reads the sm_90a manifest and not compute_80's too. Unparseable names go last.
// The toolkit a directory's name carries ("...-cuda12.9-sm_90"), when it carries one.
std::optional<format::CudaVersion> archive_dir_toolkit(const std::string& name) {
  const auto at = name.rfind("-cuda");
  if (at == std::string::npos) return std::nullopt;
  const auto end = name.find('-', at + 5);
  if (end == std::string::npos) return std::nullopt;
  return format::parse_cuda_version(std::string_view(name).substr(at + 5, end - at - 5));
}

std::vector<const std::string*> reading_order(const std::vector<std::string>& names,
                                              const std::string* uri, int cc, int driver) {
  struct Named {
    const std::string* name;
    std::optional<format::Target> target;
    std::size_t rank = 0;
    format::CudaVersion toolkit;
  };
  std::vector<Named> kept;
  kept.reserve(names.size());
  for (const auto& name : names) {
    std::optional<format::Target> t = store::archive_dir_target(name);
    if (uri && t && !format::runs_on(*t, cc)) continue;
    std::optional<format::CudaVersion> tk = archive_dir_toolkit(name);
    if (uri && t && tk && driver > 0 &&
        format::driver_refuses(*tk, t->kind == format::Target::Kind::Ptx, driver))
      continue;
    kept.push_back({&name, t, 0, tk.value_or(format::CudaVersion{})});
  }
  if (uri && kept.size() > 1) {
    std::vector<format::Target> offered;
    for (const auto& k : kept)
      if (k.target) offered.push_back(*k.target);
    TargetChoice choice = choose_targets(cc, offered, /*explain=*/false);
    for (auto& k : kept) {
      k.rank = choice.candidates.size();
      for (std::size_t i = 0; k.target && i < choice.candidates.size(); ++i)
        if (choice.candidates[i].target == *k.target) {
          k.rank = i;
          break;
        }
    }
    std::stable_sort(kept.begin(), kept.end(), [](const Named& x, const Named& y) {
      if (x.rank != y.rank) return x.rank < y.rank;
      return y.toolkit < x.toolkit;
    });
  }
  std::vector<const std::string*> order;
  order.reserve(kept.size());
  for (const auto& k : kept) order.push_back(k.name);
  return order;
}

}  // namespace

void forget_store_memory() { store_memory().clear(); }

std::vector<format::Target> targets_in_store(const std::string& store, const std::string& package) {
  std::vector<format::Target> targets;
  for (const auto& name : store::list_store_archive_dirs(store, package).archive_names)
    if (auto t = store::archive_dir_target(name)) targets.push_back(*t);
  return targets;
}

// One scan of one store directory: the directory's identity when it began, the scan record
// read for it (get()'s fast path), and what the scan learned for the next record.
struct StoreScanner::OneScan {
  OneScan(const std::string& d, const std::string* u, std::int64_t start,
          std::optional<io::FileIdentity> id, bool records)
      : dir(d), uri(u), read_start(start), dir_id(id), use_record(records && u && id) {}
  const std::string& dir;
  const std::string* uri;  // nullptr: a full scan
  std::int64_t read_start;
  std::optional<io::FileIdentity> dir_id;
  bool use_record;  // get()'s fast path with somewhere to keep records, the directory stat'ed
  std::string record_path;
  std::optional<store::ScanRecord> record;
  bool record_read = false;
  bool listed_now = false, through_links = false;
};

// Where one manifest's contents come from: remembered (whole, or its entries), looked up in the
// file now (ManifestEntries::open), or its text read now.
struct StoreScanner::ManifestSource {
  std::int64_t read_start = 0;
  std::optional<io::FileIdentity> id;
  std::shared_ptr<const format::Manifest> remembered;
  std::shared_ptr<const format::ManifestEntries> entries;
  bool searched = false;  // ManifestEntries::open: looked up without reading it whole
  std::string text;
};

StoreScanner::StoreScanner(std::string package, std::string version, std::string record_dir,
                           std::shared_ptr<const store::StoreFs> fs, format::UriRanks ranks)
    : package_(std::move(package)),
      version_(std::move(version)),
      record_dir_(std::move(record_dir)),
      fs_(fs ? std::move(fs) : store::disk_store_fs()),
      ranks_(std::move(ranks)) {}

StoreScan StoreScanner::scan(const std::string& dir, const std::string& source) const {
  return scan_impl(dir, source, nullptr, 0);
}

StoreScan StoreScanner::scan_for(const std::string& dir, const std::string& source,
                                 const std::string& uri, int cc, int driver) const {
  return scan_impl(dir, source, &uri, cc, driver);
}

std::string StoreScanner::read_file(const std::string& path) const {
  return fs_->read(path, io::limits::kMaxLocalArtifactBytes);
}

StoreScan StoreScanner::scan_impl(const std::string& dir, const std::string& source,
                                  const std::string* uri, int cc, int driver) const {
  StoreScan s;
  s.dir = dir;
  s.source = source;
  const std::int64_t read_start = io::realtime_ns();
  OneScan one(dir, uri, read_start, fs_->identity(dir), !record_dir_.empty());
  std::shared_ptr<const std::vector<std::string>> names = archive_names(one, s.problem);
  if (!names) return s;
  s.readable = true;
  for (const std::string* name : reading_order(*names, uri, cc, driver)) {
    s.archives.push_back(read_archive(one, *name));
    // The fast path stops at an archive that lists the URI for this release and format; if it
    // does not serve after all, get() rescans the store in full.
    if (uri && serves_release(s.archives.back(), *uri)) break;
  }
  keep_scan_record(one, *names);
  return s;
}

// The archive directory names of one.dir: remembered in this process while the directory keeps
// its identity, else (get()'s fast path) its scan record's, else listed now by the one rule of
// store_scan.hpp, as for the CLI. nullptr, with `problem` set, when it cannot be listed.
std::shared_ptr<const std::vector<std::string>> StoreScanner::archive_names(
    OneScan& one, std::string& problem) const {
  StoreMemory& memory = store_memory();
  // A listing is of one package's directories (or all): the key says which.
  const std::string key = package_ + '\n' + one.dir;
  std::shared_ptr<const std::vector<std::string>> names =
      one.dir_id ? memory.listings.find(key, *one.dir_id) : nullptr;
  // Names taken from a record are remembered apart: a full scan (scan(), the fallback that
  // explains a failure) always lists the directory itself.
  if (!names && one.use_record) names = memory.recorded_listings.find(key, *one.dir_id);
  if (!names && one.use_record) names = names_from_record(one, key);
  if (names) return names;
  one.listed_now = true;
  store::StoreListing listing = fs_->list(one.dir, package_);
  if (!listing.readable()) {
    problem = listing.problem;
    return nullptr;
  }
  one.through_links = listing.through_links;
  auto listed = std::make_shared<const std::vector<std::string>>(std::move(listing.archive_names));
  if (one.dir_id) memory.listings.put(key, *one.dir_id, one.read_start, listed);
  return listed;
}

// The scan kept between processes (scan_record.hpp), read when this process has not listed the
// store yet: its names serve while the directory keeps the identity they were listed with.
std::shared_ptr<const std::vector<std::string>> StoreScanner::names_from_record(
    OneScan& one, const std::string& key) const {
  StoreMemory& memory = store_memory();
  if (memory.records_not_serving.find(key, *one.dir_id)) return nullptr;
  one.record_path = store::scan_record_path(record_dir_, package_, one.dir);
  one.record = store::read_scan_record(one.record_path, package_, one.dir);
  one.record_read = true;
  if (!one.record || !(one.record->dir == *one.dir_id)) {
    static const auto kNotServing = std::make_shared<const bool>(true);
    memory.records_not_serving.put(key, *one.dir_id, one.read_start, kNotServing);
    return nullptr;
  }
  if (runtime::log_enabled(runtime::LogLevel::Debug))
    log(runtime::LogLevel::Debug,
        "store " + one.dir + ": listing taken from the scan record " + one.record_path);
  auto recorded = std::make_shared<const std::vector<std::string>>(one.record->names);
  memory.recorded_listings.put(key, *one.dir_id, one.read_start, recorded);
  return recorded;
}

// One archive directory: its manifest, or why it cannot be used.
store::StoreArchive StoreScanner::read_archive(OneScan& one, const std::string& name) const {
  store::StoreArchive a;
  const bool slash = !one.dir.empty() && one.dir.back() == '/';
  a.dir = slash ? one.dir + name : one.dir + "/" + name;  // what fs::path(dir) / name gives
  const std::string mpath = a.dir + "/manifest.json";
  runtime::cold::PhaseTimer timer(runtime::cold::Phase::ManifestParse);
  ManifestSource src;
  try {
    src = manifest_source(one, mpath);
  } catch (const Error& e) {
    a.error_kind = e.kind();
    a.error = e.what();
    return a;
  }
  try {
    // The remembered manifest itself, shared: no copy per cold get (plan_stores reads only the
    // URI's artifact and the header).
    a.manifest = src.remembered ? src.remembered
                 : one.uri      ? manifest_for_uri(one, a.dir, mpath, src)
                                : whole_manifest(a.dir, mpath, src);
  } catch (const Error& e) {
    a.error_kind = e.kind();
    a.error = e.kind() == ErrorKind::Stale
                  ? "stale: format_version differs: manifest has " + declared_format(src.text) +
                        ", this libkiln reads " + std::to_string(format::kManifestFormat) + " (" +
                        e.what() + ")"
                  : e.what();
  }
  return a;
}

StoreScanner::ManifestSource StoreScanner::manifest_source(const OneScan& one,
                                                           const std::string& mpath) const {
  StoreMemory& memory = store_memory();
  ManifestSource src;
  src.read_start = io::realtime_ns();
  src.id = fs_->identity(mpath);
  src.remembered = src.id ? memory.manifests.find(mpath, *src.id) : nullptr;
  // The fast path reads the header and the URI's entry only; a whole manifest remembered by a
  // full scan serves it as well.
  if (one.uri && src.id && !src.remembered)
    src.entries = memory.manifest_entries.find(mpath, *src.id);
  if (one.uri && !src.remembered && !src.entries && src.id && src.id->size > 0) {
    // Looked up, not read: the header and the URI's object are found by their lines and read
    // from the file's own bytes, whatever the number of artifacts (ManifestEntries::open).
    format::ManifestOpener opener = [fs = fs_, path = mpath, id = *src.id] {
      return fs->open_manifest(path, id);
    };
    src.entries = format::ManifestEntries::open(static_cast<std::size_t>(src.id->size), mpath,
                                        std::move(opener), one.uri, ranks());
    src.searched = src.entries != nullptr;
  }
  if (!src.remembered && !src.entries) src.text = read_file(mpath);
  return src;
}

// get()'s fast path: the manifest trimmed to the URI's artifact, from the entries remembered,
// looked up in the file now, or (a text not laid out as kiln writes it) read whole now.
std::shared_ptr<const format::Manifest> StoreScanner::manifest_for_uri(const OneScan& one,
                                                               const std::string& dir,
                                                               const std::string& mpath,
                                                               ManifestSource& src) const {
  StoreMemory& memory = store_memory();
  if (src.searched) {
    store::require_archive_dir_name(dir, src.entries->header());
    memory.manifest_entries.put(mpath, *src.id, src.read_start, src.entries);
  } else if (!src.entries) {
    // A text not laid out as kiln writes it (or unreadable by lookups): read and checked whole.
    src.entries = read_manifest_entries_cached(std::move(src.text), mpath);
    store::require_archive_dir_name(dir, src.entries->header());
    if (src.id) memory.manifest_entries.put(mpath, *src.id, src.read_start, src.entries);
  }
  return src.entries->for_uri(*one.uri, ranks());
}

// A full scan: the whole manifest, parsed (or the parse remembered for the same text).
std::shared_ptr<const format::Manifest> StoreScanner::whole_manifest(const std::string& dir,
                                                             const std::string& mpath,
                                                             ManifestSource& src) const {
  auto parsed = parse_manifest_cached(src.text, mpath);
  store::require_archive_dir_name(dir, parsed->manifest);
  std::shared_ptr<const format::Manifest> manifest(parsed, &parsed->manifest);
  if (src.id) store_memory().manifests.put(mpath, *src.id, src.read_start, manifest);
  return manifest;
}

// The rest of the freshness check is plan_stores'.
bool StoreScanner::serves_release(const store::StoreArchive& a, const std::string& uri) const {
  return a.manifest && a.manifest->find(uri) &&
         (package_.empty() || a.manifest->package == package_) &&
         (version_.empty() || a.manifest->package_version == version_) &&
         a.manifest->format_version == format::kManifestFormat;
}

// Keeps what this scan learned for the next process: the listing, when it was read from the
// directory through no link and the directory is settled for kRecordSettledNs (the same
// identity then means the same names). A record that cannot be written costs nothing but the
// next process's time.
void StoreScanner::keep_scan_record(OneScan& one, const std::vector<std::string>& names) const {
  if (!one.use_record || !one.listed_now) return;
  // A directory not settled is not recorded (next_scan_record): no need to read the record.
  const bool dir_settled = io::settled(*one.dir_id, one.read_start, store::kRecordSettledNs);
  if (!dir_settled) return;
  if (one.record_path.empty()) one.record_path = store::scan_record_path(record_dir_, package_, one.dir);
  if (!one.record_read) one.record = store::read_scan_record(one.record_path, package_, one.dir);
  store::ScanLearned now{*one.dir_id, dir_settled, names, one.listed_now, one.through_links};
  std::optional<store::ScanRecord> next = store::next_scan_record(one.record, package_, one.dir, std::move(now));
  if (!next) return;
  if (auto why = store::write_scan_record(one.record_path, *next))
    log(runtime::LogLevel::Debug, "store " + one.dir + ": scan record not kept: " + *why);
  else if (runtime::log_enabled(runtime::LogLevel::Debug))
    log(runtime::LogLevel::Debug, "store " + one.dir + ": scan record kept in " + one.record_path);
}

}  // namespace kiln::plan
