#include "plan/resolver.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>

#include "format/manifest_entry.hpp"
#include "format/untrusted_json.hpp"
#include "io/artifact_check.hpp"
#include "io/identity_cache.hpp"
#include "io/limits.hpp"
#include "jit/jit.hpp"
#include "kiln/version.hpp"
#include "runtime/cold_phases.hpp"
#include "runtime/log.hpp"
#include "store/scan_record.hpp"
#include "store/store_scan.hpp"

namespace kiln {

namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

std::string declared_format(const std::string& text) {
  try {
    auto j = parse_untrusted_json<nlohmann::json>(text, "manifest");
    if (j.is_object() && j.contains("format_version")) return quote_json(j["format_version"]);
  } catch (const std::exception&) {
  }
  return "?";
}

std::vector<StaleField> stale_fields(const Manifest& m, const ArtifactEntry& art,
                                     const BuildIdentity& id) {
  std::vector<StaleField> out;
  if (!id.package.empty() && m.package != id.package)
    out.push_back(
        {"package", m.package, id.package,
         "package differs: archive is of " + m.package + ", this loader serves " + id.package});
  if (m.package_version != id.package_version)
    out.push_back({"package_version", m.package_version, id.package_version,
                   "package_version differs: archive has " + m.package_version +
                       ", this loader's package " + id.package + " is " + id.package_version});
  if (m.format_version != id.manifest_format)
    out.push_back({"format_version", std::to_string(m.format_version),
                   std::to_string(id.manifest_format),
                   "format_version differs: manifest has " + std::to_string(m.format_version) +
                       ", this libkiln reads " + std::to_string(id.manifest_format)});
  if (art.source_hash != id.source_hash)
    out.push_back({"source_hash", art.source_hash, id.source_hash,
                   "source_hash differs: artifact has " + art.source_hash +
                       ", this loader's package has " + id.source_hash});
  return out;
}

namespace {

// Why a store that could not be read or holds none of the package's archives served nothing;
// nullopt when it has archives to rank.
std::optional<Rejection> store_rejection(const StoreScan& store, const BuildIdentity& id) {
  if (!store.readable)
    return Rejection{{"store", "", store.dir, store.problem}, ErrorKind::NotFound};
  if (!store.archives.empty()) return std::nullopt;
  const std::string any = id.package.empty() ? std::string("any package") : id.package;
  const std::string stem = id.package.empty() ? std::string("<package>") : id.package;
  return Rejection{{"store", "", store.dir,
                    "holds no archive of " + any + " (no " + stem + "-<version>-* directory)"},
                   ErrorKind::NotFound};
}

// The reason an archive does not list `uri`, with the family's skip reason when it has one.
std::string not_contained(const Manifest& m, const std::string& uri) {
  std::string reason = "archive does not contain " + uri;
  for (const auto& sk : m.skipped)
    if (uri.rfind(sk.family + "_", 0) == 0 || uri == sk.family)
      reason += " (family " + sk.family + " skipped: " + sk.reason + ")";
  return reason;
}

// One archive of a store as a candidate for `uri` ranked by `choice` (its position in
// choice.candidates, in `rank`), or the rejection that says why not; both nullopt: another
// package's archive, passed over without a word.
struct Considered {
  std::optional<StoreCandidate> candidate;
  std::size_t rank = 0;
  std::optional<Rejection> rejection;
};
Considered consider_archive(const StoreArchive& ar, const std::string& store_dir,
                            const std::string& uri, int cc, const BuildIdentity& id,
                            const TargetChoice& choice, bool allow_stale) {
  Considered out;
  if (!ar.manifest) {
    out.rejection = Rejection{{"store", "", ar.dir + "/manifest.json", ar.error}, ar.error_kind};
    return out;
  }
  const Manifest& m = *ar.manifest;
  if (!id.package.empty() && m.package != id.package) return out;  // another package's
  auto target = parse_target(m.target);
  if (!target) {
    out.rejection = Rejection{
        {"store", m.target, ar.dir + "/manifest.json", "unknown target " + quoted(m.target)},
        ErrorKind::Format};
    return out;
  }
  const ArtifactEntry* art = m.find(uri);
  if (!art) {
    out.rejection =
        Rejection{{"store", m.target, ar.dir, not_contained(m, uri)}, ErrorKind::NotFound};
    return out;
  }
  std::string path = ar.dir + "/" + art->file;
  auto pos = std::find_if(choice.candidates.begin(), choice.candidates.end(),
                          [&](const TargetCandidate& c) { return c.target == *target; });
  if (pos == choice.candidates.end()) {
    out.rejection =
        Rejection{{"store", m.target, path, why_not_runnable(*target, cc)}, ErrorKind::Unsupported};
    return out;
  }
  auto stale_list = stale_fields(m, *art, id);
  std::string stale = stale_list.empty() ? "" : stale_list.front().message;
  if (!stale.empty() && !allow_stale) {
    out.rejection =
        Rejection{{"store", m.target, path,
                   "stale: " + stale + ". Install " + id.package + " " + id.package_version +
                       " (kiln fetch), or set KILN_ALLOW_STALE=1 to diagnose"},
                  ErrorKind::Stale};
    return out;
  }
  StoreCandidate c;
  c.candidate = {"store", m.target, path, pos->reason};
  c.store_dir = store_dir;
  c.size = art->size;
  c.sha256 = art->sha256;
  for (const auto& e : art->entries) c.symbols.push_back(e.symbol);
  c.stale = stale;
  out.candidate = std::move(c);
  out.rank = static_cast<std::size_t>(pos - choice.candidates.begin());
  return out;
}

}  // namespace

StorePlan plan_stores(const std::string& uri, int cc, const BuildIdentity& id,
                      const std::vector<StoreScan>& stores, bool allow_stale, bool explain) {
  StorePlan plan;
  for (const auto& store : stores) {
    if (auto r = store_rejection(store, id)) {
      plan.rejected.push_back(std::move(*r));
      continue;
    }
    // The one target-choice rule over the targets this store offers: its order ranks the
    // candidates, its reasons explain the ones that cannot run.
    std::vector<Target> offered;
    for (const auto& ar : store.archives)
      if (ar.manifest)
        if (auto t = parse_target(ar.manifest->target)) offered.push_back(*t);
    TargetChoice choice = choose_targets(cc, offered, explain);
    std::vector<Considered> ranked;
    for (const auto& ar : store.archives) {
      Considered c = consider_archive(ar, store.dir, uri, cc, id, choice, allow_stale);
      if (c.rejection) plan.rejected.push_back(std::move(*c.rejection));
      if (c.candidate) ranked.push_back(std::move(c));
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Considered& a, const Considered& b) { return a.rank < b.rank; });
    for (auto& r : ranked) plan.usable.push_back(std::move(*r.candidate));
  }
  return plan;
}

std::string verify_artifact(const std::string& bytes, std::uint64_t size,
                            const std::string& sha256) {
  std::optional<PinMismatch> mismatch = pin_mismatch(bytes, {size, sha256});
  return mismatch ? "integrity: " + mismatch->message("", "manifest") : "";
}

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::vector<std::string> near_matches(const std::string& uri, const std::vector<std::string>& all,
                                      std::size_t max) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  std::string family = uri.substr(0, uri.find('_'));
  for (const auto& u : all) {
    std::size_t d = edit_distance(uri, u);
    bool same_family = !family.empty() && u.rfind(family + "_", 0) == 0;
    if (d <= std::max<std::size_t>(3, uri.size() / 3) || same_family)
      scored.emplace_back(same_family ? d / 2 : d, u);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(scored[i].second);
  return out;
}

std::string fetch_advice(int cc, const std::string& package, const std::string& version,
                         const std::vector<std::string>& offered, const std::string& cache_dir,
                         const Family* family) {
  if (family)
    if (auto why = family_cannot_run(*family, cc))
      return *why + ": no archive of " + package + " " + version +
             " and no JIT can serve it on this device";
  std::string cmd = "kiln fetch --package " + package + " --version " + version + " --device " +
                    device_target(cc) + " --dest " + cache_dir;
  std::string copy = " (then copy that directory here, or add it to KILN_ARTIFACT_PATH)";
  if (offered.empty()) return "to get it on a machine with network access: " + cmd + copy;
  NamedChoice choice = choose_named_targets(cc, offered, family);
  std::string all;
  for (const auto& t : offered) all += (all.empty() ? "" : ", ") + t;
  if (choice.candidates.empty())
    return "no archive of " + package + " " + version + " can run on CC " + cc_string(cc) +
           " (it offers " + all + "); only JIT (NVRTC) can serve this device";
  const auto& best = choice.candidates.front();
  return "to get it on a machine with network access: " + cmd + copy + "; it fetches " +
         archive_file_name(package, version, cuda_version(), best.first) + " (" + best.first +
         ": " + best.second + ")";
}

Error resolution_failure(const std::string& uri, int cc, const std::vector<std::string>& searched,
                         const std::vector<Rejection>& rejected, const std::string& advice) {
  std::optional<ErrorKind> decisive;
  bool mixed = false;
  for (const auto& r : rejected) {
    if (r.kind != ErrorKind::Stale && r.kind != ErrorKind::Integrity) continue;
    if (decisive && *decisive != r.kind) mixed = true;
    decisive = r.kind;
  }
  ErrorKind kind = (decisive && !mixed) ? *decisive : ErrorKind::NotFound;
  std::string target = device_target(cc);
  std::string msg = "no usable kernel for " + uri + " on " + target + " (compute capability " +
                    cc_string(cc) + ").\nsearched, in order:";
  if (searched.empty()) msg += " (nothing)";
  for (const auto& s : searched) msg += "\n  " + s;
  msg += "\nrejected:";
  for (const auto& r : rejected) {
    const Candidate& c = r.candidate;
    msg += "\n  [" + c.tier + (c.target.empty() ? "" : " " + c.target) + "] ";
    if (!c.path.empty()) msg += c.path + ": ";
    msg += c.reason;
  }
  msg += "\n" + advice;
  std::vector<ErrorField> fields{{"uri", uri}, {"target", target}};
  if (decisive && !mixed)
    for (const auto& r : rejected) {
      if (r.kind != kind || r.fields.empty()) continue;
      for (const auto& f : r.fields)
        if (std::none_of(fields.begin(), fields.end(),
                         [&](const ErrorField& have) { return have.name == f.name; }))
          fields.push_back(f);
      break;
    }
  return Error(kind, msg, std::move(fields));
}

std::vector<Tier> resolution_plan(const TierInputs& in, int cc) {
  std::vector<Tier> plan;
  plan.push_back({"store", std::nullopt});
  Tier mirror{"mirror", std::nullopt};
  if (in.offline)
    mirror.skip = Rejection{
        {"mirror", "", "", "skipped: offline mode (KILN_OFFLINE=1) makes no network access"},
        ErrorKind::NotFound};
  else if (in.mirrors.empty())
    mirror.skip = Rejection{{"mirror", "", "", "no mirror configured (KILN_MIRRORS is empty)"},
                            ErrorKind::NotFound};
  plan.push_back(mirror);
  Tier jit{"jit", std::nullopt};
  if (in.disable_jit)
    jit.skip = Rejection{{"jit", device_target(cc), "", "disabled (KILN_DISABLE_JIT=1)"},
                         ErrorKind::NotFound};
  plan.push_back(jit);
  return plan;
}

std::optional<Rejection> jit_refusal(const JitCapability& cap, int cc, const Family* family) {
  std::string target = device_target(cc);
  // The family's rule first: it holds whatever NVRTC is installed.
  if (family && !jit_target(*family, cc))
    return Rejection{{"jit", target, "", jit_refusal_reason(*family, cc)}, ErrorKind::Unsupported};
  if (!cap.available)
    return Rejection{{"jit", target, "", "NVRTC unavailable: " + cap.missing},
                     ErrorKind::Unsupported};
  if (!cap.supports(cc))
    return Rejection{{"jit", target, "",
                      "NVRTC " + std::to_string(cap.nvrtc_major) + "." +
                          std::to_string(cap.nvrtc_minor) + " cannot compile for " + target},
                     ErrorKind::Unsupported};
  return std::nullopt;
}

MirrorChoice choose_mirror_targets(int cc, const std::string& package, const std::string& version,
                                   const std::vector<std::string>& offered,
                                   const std::string& where, const Family* family) {
  MirrorChoice out;
  NamedChoice choice = choose_named_targets(cc, offered, family);
  for (const auto& [t, why] : choice.candidates) {
    out.fetch.push_back(t);
    out.reasons.push_back(why);
  }
  for (const auto& [t, why] : choice.rejected)
    out.rejected.push_back({{"mirror", t, where, why}, ErrorKind::Unsupported});
  if (out.fetch.empty()) {
    std::string all;
    for (const auto& t : offered) all += (all.empty() ? "" : ", ") + t;
    // "serve family X" only when a target would run but the family does not declare it.
    const bool by_family = family && !choose_named_targets(cc, offered).candidates.empty();
    const std::string what =
        by_family ? "can serve family " + family->name + " on CC " : std::string("can run on CC ");
    out.rejected.push_back(
        {{"mirror", "", where,
          "no archive of " + package + " " + version + " " + what + cc_string(cc) +
              " (the index lists: " + (all.empty() ? "none" : all) + ")"},
         ErrorKind::Unsupported});
  }
  return out;
}

namespace {

// Parsed manifests, process-wide, keyed by path and checked against the exact text read now:
// a new Loader (or a rescan) re-reads manifest.json but parses it only when its bytes changed.
// Parsing is deterministic in (text, path), so a hit gives what parsing would.
struct ParsedManifest {
  std::string text;
  Manifest manifest;
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
  IdentityCache<std::vector<std::string>> listings;
  // Names taken from scan records, for get()'s fast path only (the full scan lists itself).
  IdentityCache<std::vector<std::string>> recorded_listings;
  // Directories whose scan record did not serve (none, or of another identity), by the identity
  // they had: a store not settled yet is listed by every get, without reading the record again.
  IdentityCache<bool> records_not_serving{Rewrites::never};
  // Manifests parsed whole (full scans) and read for lookups by URI (get()'s fast path),
  // remembered as soon as they are read, settled or not: a store's archive directories are
  // written beside the store and renamed into it, never rewritten in place (identity_cache.hpp,
  // Rewrites::never), so a new manifest is a new file with another identity.
  IdentityCache<Manifest> manifests{Rewrites::never};
  IdentityCache<ManifestEntries> manifest_entries{Rewrites::never};
  // The same keyed by text, for a manifest whose identity changed but not its bytes (touched,
  // or installed again from the same archive): read again, not parsed again.
  TextCache<ParsedManifest> parsed_by_text;
  TextCache<ManifestEntries> entries_by_text;

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
            ParsedManifest{text, parse_manifest(text, path)});
      });
}

// The same for get()'s fast path, which reads a manifest for one URI at a time
// (manifest_entry.hpp): the text and its header are kept, each URI's entry converted when asked.
// Takes `text` only when it returns (ManifestEntries::read).
std::shared_ptr<const ManifestEntries> read_manifest_entries_cached(std::string&& text,
                                                                    const std::string& path) {
  return store_memory().entries_by_text.get(
      path, text, [](const ManifestEntries& e) -> const std::string& { return e.text(); },
      [&] { return ManifestEntries::read(std::move(text), path); });
}

// Pure: the archive names a scan reads, in order. A full scan (uri == nullptr) reads every one
// in name order. get()'s fast path leaves out a name whose target cannot run on cc (its
// manifest is not even read; sound because a directory whose name does not match its manifest
// is refused) and puts the best target first by the one target-choice rule, so that reading can
// stop at the first archive whose manifest lists the URI: in a store holding a whole release, a
// cold get reads the sm_90a manifest and not compute_80's too. Unparseable names go last.
std::vector<const std::string*> reading_order(const std::vector<std::string>& names,
                                              const std::string* uri, int cc) {
  struct Named {
    const std::string* name;
    std::optional<Target> target;
    std::size_t rank = 0;
  };
  std::vector<Named> kept;
  kept.reserve(names.size());
  for (const auto& name : names) {
    std::optional<Target> t = archive_dir_target(name);
    if (uri && t && !runs_on(*t, cc)) continue;
    kept.push_back({&name, t});
  }
  if (uri && kept.size() > 1) {
    std::vector<Target> offered;
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
    std::stable_sort(kept.begin(), kept.end(),
                     [](const Named& x, const Named& y) { return x.rank < y.rank; });
  }
  std::vector<const std::string*> order;
  order.reserve(kept.size());
  for (const auto& k : kept) order.push_back(k.name);
  return order;
}

}  // namespace

void forget_store_memory() { store_memory().clear(); }

std::vector<Target> targets_in_store(const std::string& store, const std::string& package) {
  std::vector<Target> targets;
  for (const auto& name : list_store_archive_dirs(store, package).archive_names)
    if (auto t = archive_dir_target(name)) targets.push_back(*t);
  return targets;
}

// One scan of one store directory: the directory's identity when it began, the scan record
// read for it (get()'s fast path), and what the scan learned for the next record.
struct StoreScanner::OneScan {
  OneScan(const std::string& d, const std::string* u, std::int64_t start,
          std::optional<FileIdentity> id, bool records)
      : dir(d), uri(u), read_start(start), dir_id(id), use_record(records && u && id) {}
  const std::string& dir;
  const std::string* uri;  // nullptr: a full scan
  std::int64_t read_start;
  std::optional<FileIdentity> dir_id;
  bool use_record;  // get()'s fast path with somewhere to keep records, the directory stat'ed
  std::string record_path;
  std::optional<ScanRecord> record;
  bool record_read = false;
  bool listed_now = false, through_links = false;
};

// Where one manifest's contents come from: remembered (whole, or its entries), looked up in the
// file now (ManifestEntries::open), or its text read now.
struct StoreScanner::ManifestSource {
  std::int64_t read_start = 0;
  std::optional<FileIdentity> id;
  std::shared_ptr<const Manifest> remembered;
  std::shared_ptr<const ManifestEntries> entries;
  bool searched = false;  // ManifestEntries::open: looked up without reading it whole
  std::string text;
};

StoreScanner::StoreScanner(std::string package, std::string version, std::string record_dir,
                           std::shared_ptr<const StoreFs> fs, UriRanks ranks)
    : package_(std::move(package)),
      version_(std::move(version)),
      record_dir_(std::move(record_dir)),
      fs_(fs ? std::move(fs) : disk_store_fs()),
      ranks_(std::move(ranks)) {}

StoreScan StoreScanner::scan(const std::string& dir, const std::string& source) const {
  return scan_impl(dir, source, nullptr, 0);
}

StoreScan StoreScanner::scan_for(const std::string& dir, const std::string& source,
                                 const std::string& uri, int cc) const {
  return scan_impl(dir, source, &uri, cc);
}

std::string StoreScanner::read_file(const std::string& path) const {
  return fs_->read(path, limits::kMaxLocalArtifactBytes);
}

StoreScan StoreScanner::scan_impl(const std::string& dir, const std::string& source,
                                  const std::string* uri, int cc) const {
  StoreScan s;
  s.dir = dir;
  s.source = source;
  const std::int64_t read_start = realtime_ns();
  OneScan one(dir, uri, read_start, fs_->identity(dir), !record_dir_.empty());
  std::shared_ptr<const std::vector<std::string>> names = archive_names(one, s.problem);
  if (!names) return s;
  s.readable = true;
  for (const std::string* name : reading_order(*names, uri, cc)) {
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
  StoreListing listing = fs_->list(one.dir, package_);
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
  one.record_path = scan_record_path(record_dir_, package_, one.dir);
  one.record = read_scan_record(one.record_path, package_, one.dir);
  one.record_read = true;
  if (!one.record || !(one.record->dir == *one.dir_id)) {
    static const auto kNotServing = std::make_shared<const bool>(true);
    memory.records_not_serving.put(key, *one.dir_id, one.read_start, kNotServing);
    return nullptr;
  }
  if (log_enabled(LogLevel::Debug))
    log(LogLevel::Debug,
        "store " + one.dir + ": listing taken from the scan record " + one.record_path);
  auto recorded = std::make_shared<const std::vector<std::string>>(one.record->names);
  memory.recorded_listings.put(key, *one.dir_id, one.read_start, recorded);
  return recorded;
}

// One archive directory: its manifest, or why it cannot be used.
StoreArchive StoreScanner::read_archive(OneScan& one, const std::string& name) const {
  StoreArchive a;
  const bool slash = !one.dir.empty() && one.dir.back() == '/';
  a.dir = slash ? one.dir + name : one.dir + "/" + name;  // what fs::path(dir) / name gives
  const std::string mpath = a.dir + "/manifest.json";
  cold::PhaseTimer timer(cold::Phase::ManifestParse);
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
                        ", this libkiln reads " + std::to_string(kManifestFormat) + " (" +
                        e.what() + ")"
                  : e.what();
  }
  return a;
}

StoreScanner::ManifestSource StoreScanner::manifest_source(const OneScan& one,
                                                           const std::string& mpath) const {
  StoreMemory& memory = store_memory();
  ManifestSource src;
  src.read_start = realtime_ns();
  src.id = fs_->identity(mpath);
  src.remembered = src.id ? memory.manifests.find(mpath, *src.id) : nullptr;
  // The fast path reads the header and the URI's entry only; a whole manifest remembered by a
  // full scan serves it as well.
  if (one.uri && src.id && !src.remembered)
    src.entries = memory.manifest_entries.find(mpath, *src.id);
  if (one.uri && !src.remembered && !src.entries && src.id && src.id->size > 0) {
    // Looked up, not read: the header and the URI's object are found by their lines and read
    // from the file's own bytes, whatever the number of artifacts (ManifestEntries::open).
    ManifestOpener opener = [fs = fs_, path = mpath, id = *src.id] {
      return fs->open_manifest(path, id);
    };
    src.entries = ManifestEntries::open(static_cast<std::size_t>(src.id->size), mpath,
                                        std::move(opener), one.uri, ranks());
    src.searched = src.entries != nullptr;
  }
  if (!src.remembered && !src.entries) src.text = read_file(mpath);
  return src;
}

// get()'s fast path: the manifest trimmed to the URI's artifact, from the entries remembered,
// looked up in the file now, or (a text not laid out as kiln writes it) read whole now.
std::shared_ptr<const Manifest> StoreScanner::manifest_for_uri(const OneScan& one,
                                                               const std::string& dir,
                                                               const std::string& mpath,
                                                               ManifestSource& src) const {
  StoreMemory& memory = store_memory();
  if (src.searched) {
    require_archive_dir_name(dir, src.entries->header());
    memory.manifest_entries.put(mpath, *src.id, src.read_start, src.entries);
  } else if (!src.entries) {
    // A text not laid out as kiln writes it (or unreadable by lookups): read and checked whole.
    src.entries = read_manifest_entries_cached(std::move(src.text), mpath);
    require_archive_dir_name(dir, src.entries->header());
    if (src.id) memory.manifest_entries.put(mpath, *src.id, src.read_start, src.entries);
  }
  return src.entries->for_uri(*one.uri, ranks());
}

// A full scan: the whole manifest, parsed (or the parse remembered for the same text).
std::shared_ptr<const Manifest> StoreScanner::whole_manifest(const std::string& dir,
                                                             const std::string& mpath,
                                                             ManifestSource& src) const {
  auto parsed = parse_manifest_cached(src.text, mpath);
  require_archive_dir_name(dir, parsed->manifest);
  std::shared_ptr<const Manifest> manifest(parsed, &parsed->manifest);
  if (src.id) store_memory().manifests.put(mpath, *src.id, src.read_start, manifest);
  return manifest;
}

// The rest of the freshness check is plan_stores'.
bool StoreScanner::serves_release(const StoreArchive& a, const std::string& uri) const {
  return a.manifest && a.manifest->find(uri) &&
         (package_.empty() || a.manifest->package == package_) &&
         (version_.empty() || a.manifest->package_version == version_) &&
         a.manifest->format_version == kManifestFormat;
}

// Keeps what this scan learned for the next process: the listing, when it was read from the
// directory through no link and the directory is settled for kRecordSettledNs (the same
// identity then means the same names). A record that cannot be written costs nothing but the
// next process's time.
void StoreScanner::keep_scan_record(OneScan& one, const std::vector<std::string>& names) const {
  if (!one.use_record || !one.listed_now) return;
  // A directory not settled is not recorded (next_scan_record): no need to read the record.
  const bool dir_settled = settled(*one.dir_id, one.read_start, kRecordSettledNs);
  if (!dir_settled) return;
  if (one.record_path.empty()) one.record_path = scan_record_path(record_dir_, package_, one.dir);
  if (!one.record_read) one.record = read_scan_record(one.record_path, package_, one.dir);
  ScanLearned now{*one.dir_id, dir_settled, names, one.listed_now, one.through_links};
  std::optional<ScanRecord> next = next_scan_record(one.record, package_, one.dir, std::move(now));
  if (!next) return;
  if (auto why = write_scan_record(one.record_path, *next))
    log(LogLevel::Debug, "store " + one.dir + ": scan record not kept: " + *why);
  else if (log_enabled(LogLevel::Debug))
    log(LogLevel::Debug, "store " + one.dir + ": scan record kept in " + one.record_path);
}

namespace {

// <dir of the file holding `address`>/../share/kiln: what an install tree puts beside a library.
// For the main executable dladdr gives the name it was started by (argv[0]): with no '/' it was
// found on PATH, and /proc/self/exe is the file.
// Asked when a Loader's store tier first reaches the installed store (and for the TUF root when a
// mirror is first used): dladdr is cheap, the canonical path less so (realpath(3) reads each
// component's link), so it is remembered per file name dladdr gives.
fs::path share_dir_beside(const void* address) {
  Dl_info info{};
  if (!::dladdr(address, &info) || !info.dli_fname) return {};
  static std::mutex mu;
  static auto* known = new std::unordered_map<std::string, fs::path>();
  std::lock_guard<std::mutex> lock(mu);
  auto hit = known->find(info.dli_fname);
  if (hit != known->end()) return hit->second;
  std::string file = info.dli_fname;
  if (file.find('/') == std::string::npos) {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    file = exe.string();
  }
  // The real file, links resolved: a library reached through a symbolic link (lib/libx.so ->
  // /opt/x/lib/libx.so.1) has its store beside the file, not beside the link.
  if (char* real = ::realpath(file.c_str(), nullptr)) {
    file = real;
    std::free(real);
  }
  fs::path share =
      (fs::path(file).parent_path().parent_path() / "share" / "kiln").lexically_normal();
  if (known->size() < 64) known->emplace(info.dli_fname, share);
  return share;
}

}  // namespace

std::string installed_store_dir(const void* address) {
  fs::path share = share_dir_beside(address);
  return share.empty() ? "" : (share / "artifacts").string();
}

FetchOptions mirror_fetch_options(const LoaderConfig& cfg, const std::string& installed_root) {
  FetchOptions opts;
  opts.mirrors = cfg.mirrors;
  opts.index_sha256 = cfg.index_sha256;
  opts.tuf_root = cfg.tuf_root;
  opts.installed_tuf_root = installed_root;
  // Beside the cache's stores: a store scan reads only <package>-<version>-* entries.
  if (!cfg.cache_dir.empty()) opts.tuf_metadata_dir = (fs::path(cfg.cache_dir) / "tuf").string();
  opts.ca_bundle = cfg.ca_bundle;
  opts.offline = cfg.offline;
  return opts;
}

// The TUF root is libkiln's install's: beside libkiln (or the kiln binary, which carries the core).
std::string installed_tuf_root() {
  fs::path share = share_dir_beside(reinterpret_cast<const void*>(&installed_tuf_root));
  return share.empty() ? "" : (share / "tuf" / "root.json").string();
}

}  // namespace kiln
