// Loader: the resolution order of docs/loader.md, over the driver, disk, compiler and fetcher
// interfaces. Pure ranking and staleness live in core/plan/resolver.cpp, the store scans in
// core/plan/store_scanner.cpp; this file does the I/O, the in-process cache and the locking.
#include "kiln/loader.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <unordered_map>

#include "checked_artifact.hpp"
#include "format/toolkit.hpp"
#include "format/untrusted_json.hpp"
#include "jit/jit.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "loader_access.hpp"
#include "loader_factory.hpp"
#include "loader_stats.hpp"
#include "plan/install_location.hpp"
#include "plan/memory_store.hpp"
#include "plan/near_matches.hpp"
#include "plan/resolver.hpp"
#include "project/package.hpp"
#include "project/registry.hpp"
#include "runtime/cold_phases.hpp"
#include "runtime/driver.hpp"
#include "runtime/log.hpp"

namespace kiln {

namespace {

// The package's entry for uri (a table lookup: a fresh process's first get() parses no registry
// and hashes no source).
const project::Specialisation& find_spec(const project::Package& pkg, const std::string& uri) {
  if (const project::Specialisation* s = pkg.spec(uri)) return *s;
  std::vector<std::string> all = pkg.uris();
  auto near = plan::near_matches(uri, all);
  std::string msg = "no kernel " + uri + " in package " + pkg.name() + " " + pkg.version() + " (" +
                    std::to_string(all.size()) + " specialisations; `kiln registry list`)";
  if (!near.empty()) {
    msg += "; did you mean:";
    for (const auto& n : near) msg += " " + n;
  }
  throw Error(ErrorKind::NotFound, msg).with("uri", uri).with("package", pkg.name());
}

std::string summary(const std::vector<plan::Rejection>& rejected) {
  std::string s;
  for (const auto& r : rejected) {
    if (!s.empty()) s += "; ";
    s += r.candidate.tier;
    if (!r.candidate.target.empty()) s += " " + r.candidate.target;
    if (!r.candidate.path.empty()) s += " " + r.candidate.path;
    s += ": " + r.candidate.reason;
  }
  return s;
}

// Every Loader gets an id never reused in this process, so a per-thread cache entry of a
// destroyed Loader can never match a later one built at the same address.
std::atomic<std::uint64_t> g_next_loader_id{1};

// The warm path: a small direct-mapped per-thread cache of (Loader id, context, URI) -> handle
// in front of the locked map, so a hit reads and writes only this thread's memory. Entries are
// filled only with handles that are ready; a handle lives as long as its Loader (map entries
// are never erased), and a dead Loader's id never matches again.
struct HitCache {
  struct Slot {
    std::uint64_t loader = 0;  // 0 = empty
    void* ctx = nullptr;
    std::string uri;
    const KernelHandle* handle = nullptr;
  };
  static constexpr std::size_t kSlots = 64;
  Slot slots[kSlots];
  LoaderCounters::ThreadShard stats_shard;  // this thread's warm-get counter (loader_stats.hpp)

  static std::size_t index(std::uint64_t loader, void* ctx, const std::string& uri) {
    std::size_t h = std::hash<std::string_view>{}(uri);
    h ^= reinterpret_cast<std::size_t>(ctx) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<std::size_t>(loader) * 0xC2B2AE3D27D4EB4Full;
    return (h ^ (h >> 29)) & (kSlots - 1);
  }
};

HitCache& hit_cache() {
  thread_local HitCache cache;
  return cache;
}

// The source store_dirs() gives the directories of the artifact path.
const std::string kArtifactPathSource = "artifact path";

// Where libkiln lies does not change while it is loaded: its TUF root found (dladdr) once.
const std::string& installed_tuf_root_once() {
  static const std::string root = plan::installed_tuf_root();
  return root;
}

// `scan` narrowed to the archives whose manifest names `target`: after a fetch into the cache,
// only the archive just fetched is the mirror tier's (the rest of the cache was the store tier's).
plan::StoreScan narrowed_to_target(plan::StoreScan scan, const std::string& target) {
  std::vector<store::StoreArchive> kept;
  for (auto& a : scan.archives)
    if (a.manifest && a.manifest->target == target) kept.push_back(std::move(a));
  scan.archives = std::move(kept);
  return scan;
}

// The JIT cache entry's digest sidecar (<key>.json beside <key>.cubin, see jit.hpp) pins the
// bytes: NVRTC's result is checked like any artifact from disk. "" when it matches; else why not.
// A result not kept on disk (not_kept) is the image NVRTC handed this process: no file to check.
std::string verify_jit_result(const plan::StoreScanner& fs, const jit::JitResult& res) {
  if (!res.not_kept.empty()) return "";
  std::string sidecar = res.cache_path;
  if (auto dot = sidecar.rfind(".cubin"); dot != std::string::npos)
    sidecar.replace(dot, 6, ".json");
  try {
    auto meta = format::parse_untrusted_json<nlohmann::json>(fs.read_file(sidecar), sidecar);
    return plan::verify_artifact(res.image, meta.at("cubin_size").get<std::uint64_t>(),
                           meta.at("cubin_sha256").get<std::string>());
  } catch (const std::exception& e) {
    return "integrity: cannot read the digest sidecar " + sidecar + ": " + e.what();
  }
}

// The one warning of a process whose cache directory cannot be written (docs/loader.md, "When the
// cache cannot be written"): said once, at the warning level, naming where and the system's
// words; later kernels served from memory are info lines.
std::atomic<bool> g_said_not_kept{false};

void say_not_kept(const std::string& what, const std::string& why) {
  if (!g_said_not_kept.exchange(true)) {
    log(runtime::LogLevel::Warn,
        "cannot keep " + what + " in the cache directory (" + why +
            "); serving from memory for this process, and saying so once: point KILN_CACHE_DIR "
            "at a writable directory to keep them between processes");
    return;
  }
  log(runtime::LogLevel::Info, "kept in memory only: " + what + " (" + why + ")");
}

}  // namespace

CheckedArtifact read_checked_artifact(const plan::StoreScanner& fs, const Candidate& c, std::uint64_t size,
                                      const std::string& sha256) {
  CheckedArtifact a;
  try {
    runtime::cold::PhaseTimer t(runtime::cold::Phase::Read);
    a.bytes = fs.read_file(c.path);
  } catch (const Error& e) {
    a.outcome = CheckedArtifact::Outcome::Unreadable;
    a.refusal = {{c.tier, c.target, c.path, e.what()}, e.kind()};
    return a;
  }
  std::string bad;
  {
    runtime::cold::PhaseTimer t(runtime::cold::Phase::Hash);
    bad = plan::verify_artifact(a.bytes, size, sha256);
  }
  if (!bad.empty()) {
    a.outcome = CheckedArtifact::Outcome::Mismatch;
    a.refusal = {{c.tier, c.target, c.path, std::move(bad)}, ErrorKind::Integrity};
  }
  return a;
}

// What a Loader holds and does. The declarations read as the map: what it is made of, the
// in-process table, get()'s walk of the tiers, and resolve()'s walk of the same plan; the
// definitions follow in that order.
struct Loader::Impl {
  // --- made by make_impl() from the package, the configuration and the dependencies
  const std::uint64_t loader_id = g_next_loader_id.fetch_add(1, std::memory_order_relaxed);
  std::unique_ptr<const project::Package> pkg;
  LoaderConfig cfg;
  std::shared_ptr<runtime::Driver> driver;
  std::unique_ptr<plan::StoreScanner> fs;
  // Made when a tier first needs it (jit_compiler()): a store hit never does.
  std::shared_ptr<jit::JitCompiler> jit;
  jit::NvrtcConfig jit_config;
  std::once_flag jit_once;
  std::function<fetch::FetchResult(const fetch::FetchOptions&, const std::vector<std::string>&,
                            const std::string&)>
      fetch;
  std::function<std::vector<std::string>(const fetch::FetchOptions&)> index_targets;
  std::function<fetch::FetchedArchive(const fetch::FetchOptions&, const std::string&)> fetch_memory;
  // What get() did (Loader::stats(), loader_stats.hpp); registered last by make_impl().
  std::shared_ptr<LoaderCounters> stats;
  // The store installed beside the package's library: given (deps, cfg), or found by dladdr
  // when the store tier first reaches it (installed_dir()), so a hit in an artifact path never
  // looks for it.
  mutable std::optional<std::string> installed;
  const kiln_package* installed_anchor = nullptr;
  mutable std::once_flag installed_once;
  // The driver's CUDA version (the driver object asks libcuda once per process): every
  // candidate's toolkit is weighed against it (docs/compatibility.md). 0 when the driver cannot
  // say.
  mutable std::once_flag driver_once;
  mutable int driver_number_ = 0;
  int driver_number() const {
    std::call_once(driver_once, [this] {
      try {
        driver_number_ = driver->driver_version();
      } catch (const Error&) {
        driver_number_ = 0;
      }
    });
    return driver_number_;
  }

  const std::string& installed_dir() const {
    std::call_once(installed_once, [this] {
      if (!installed) installed = plan::installed_store_dir(installed_anchor);
    });
    return *installed;
  }

  jit::JitCompiler& jit_compiler() {
    std::call_once(jit_once, [this] {
      if (jit) return;
      // The NVRTC the driver runs (jit.hpp): its cubin is the driver's to load.
      jit_config.driver = driver_number();
      jit = jit::make_nvrtc_compiler(jit_config);
    });
    return *jit;
  }
  // What the JIT tier offers a driver of `driver` (resolve --driver: not this machine's): the
  // probe of the NVRTC that driver runs. A compiler given to the Loader (LoaderDeps::jit) answers
  // for every driver.
  jit::JitCapability jit_probe(int for_driver) {
    jit::JitCompiler& own = jit_compiler();
    if (jit_given || for_driver == driver_number()) return own.probe();
    jit::NvrtcConfig c = jit_config;
    c.driver = for_driver;
    return jit::NvrtcCompiler(std::move(c)).probe();
  }
  bool jit_given = false;

  // --- the in-process table: one entry per (context, URI), never erased
  struct Entry {
    std::mutex load_mu;  // one loader per (context, URI); others wait for its result
    std::atomic<bool> ready{false};
    KernelHandle handle;
  };
  using UriMap = std::unordered_map<std::string, std::unique_ptr<Entry>>;
  mutable std::shared_mutex mu;
  std::unordered_map<void*, UriMap> by_ctx;

  Entry* lookup(void* ctx, const std::string& uri) const;
  Entry& slot(void* ctx, const std::string& uri);
  void remember(HitCache::Slot& slot_tls, void* ctx, const std::string& uri,
                const KernelHandle& h) const;

  // What one search turns up: everything tried, and why each was refused.
  struct Search {
    std::string uri;
    int cc = 0;
    int driver = 0;  // cuDriverGetVersion's number; 0: not known, toolkits are not weighed
    std::vector<std::string> searched;
    std::vector<plan::Rejection> rejected;
    void reject(Candidate c, ErrorKind kind) { reject(plan::Rejection{std::move(c), kind, {}}); }
    void reject(plan::Rejection r) {
      const Candidate& c = r.candidate;
      if (runtime::log_enabled(runtime::LogLevel::Debug))
        runtime::log_write(runtime::LogLevel::Debug,
                  "rejected " + c.tier + " " + c.target + " " + c.path + ": " + c.reason);
      rejected.push_back(std::move(r));
    }
    // Keeps the error's fields (a TUF mirror's attack=...), so the failure of get() carries them.
    void reject(Candidate c, const Error& e) {
      reject(std::move(c), e.kind());
      rejected.back().fields = e.fields();
    }
  };

  // --- get(): the thread's hit slot, the table, else load() walks the tiers in plan order
  const KernelHandle& get(const std::string& uri, void* stream, bool check_capture);
  void load(Entry& e, const std::string& uri, const project::Specialisation& spec, int cc);
  bool try_stores_fast(Search& s, const project::Specialisation& spec, KernelHandle& out);
  bool try_stores(Search& s, const std::vector<plan::StoreScan>& scans, const std::string& tier,
                  const project::Specialisation& spec, KernelHandle& out);
  // `memory`: the artifacts of an archive fetched into memory, by path (plan/memory_store.hpp);
  // nullptr: read from disk.
  bool try_store_candidate(Search& s, const plan::StoreCandidate& sc, const std::string& tier,
                           std::size_t entries, KernelHandle& out,
                           const std::map<std::string, std::string>* memory = nullptr);
  bool try_mirrors(Search& s, const project::Specialisation& spec, KernelHandle& out);
  bool try_stores_in_memory(Search& s, const plan::MemoryStore& mem,
                            const project::Specialisation& spec, KernelHandle& out);
  bool try_mirror_in_memory(Search& s, const project::Specialisation& spec,
                            const fetch::FetchOptions& opts, const std::string& target,
                            const std::string& list, const Error& not_written, KernelHandle& out);
  bool try_jit(Search& s, const project::Specialisation& spec, KernelHandle& out);
  bool load_image(Search& s, const Candidate& c, const std::string& image,
                  const std::vector<std::string>& symbols, KernelHandle& out);

  // --- resolve(): the same plan, walked without loading, downloading or compiling
  std::optional<Candidate> explain(Search& s, const project::Specialisation& spec);
  std::optional<Candidate> explain_stores(Search& s, const project::Specialisation& spec) const;
  std::optional<Candidate> explain_mirrors(Search& s, const project::Specialisation& spec) const;
  std::optional<Candidate> explain_jit(Search& s, const project::Specialisation& spec);

  // --- what both walks read
  plan::BuildIdentity identity(const project::Specialisation& spec) const {
    return {pkg->name(), pkg->version(), format::kManifestFormat, spec.source_hash};
  }
  plan::TierInputs tier_inputs() const { return {cfg.offline, cfg.mirrors, cfg.disable_jit}; }
  // The URI's family as the package's registry declares it (its targets are part of the
  // target-choice rule of the mirror and JIT tiers and of the advice); nullptr when the
  // registry cannot be read (the JIT tier then says why). Never asked on a store hit.
  const project::Family* family_of(const project::Specialisation& spec) const;
  std::vector<std::pair<std::string, std::string>> store_dirs() const;
  std::vector<plan::StoreScan> scan_stores(Search& s) const;
  std::vector<std::string> known_release_targets() const;
  fetch::FetchOptions mirror_options() const;
  std::string mirror_list(Search& s) const;
};

// --- the in-process table

Loader::Impl::Entry* Loader::Impl::lookup(void* ctx, const std::string& uri) const {
  std::shared_lock<std::shared_mutex> lock(mu);
  auto c = by_ctx.find(ctx);
  if (c == by_ctx.end()) return nullptr;
  auto e = c->second.find(uri);
  return e == c->second.end() ? nullptr : e->second.get();
}

Loader::Impl::Entry& Loader::Impl::slot(void* ctx, const std::string& uri) {
  std::unique_lock<std::shared_mutex> lock(mu);
  auto& e = by_ctx[ctx][uri];
  if (!e) e = std::make_unique<Entry>();
  return *e;
}

void Loader::Impl::remember(HitCache::Slot& slot_tls, void* ctx, const std::string& uri,
                            const KernelHandle& h) const {
  slot_tls.loader = 0;  // the URI assignment may throw (bad_alloc): never half-filled
  slot_tls.ctx = ctx;
  slot_tls.uri = uri;
  slot_tls.handle = &h;
  slot_tls.loader = loader_id;
}

// --- get()

const KernelHandle& Loader::Impl::get(const std::string& uri, void* stream, bool check_capture) {
  void* ctx = nullptr;
  try {
    ctx = driver->current_context();
  } catch (const Error&) {
    find_spec(*pkg, uri);  // an unknown URI is the more useful answer than "no driver"
    throw;
  }
  HitCache& hits = hit_cache();
  HitCache::Slot& slot_tls = hits.slots[HitCache::index(loader_id, ctx, uri)];
  if (slot_tls.loader == loader_id && slot_tls.ctx == ctx && slot_tls.uri == uri) {
    stats->memory_hit(hits.stats_shard);
    return *slot_tls.handle;
  }
  if (Entry* e = lookup(ctx, uri); e && e->ready.load(std::memory_order_acquire)) {
    stats->memory_hit(hits.stats_shard);
    remember(slot_tls, ctx, uri, e->handle);
    return e->handle;
  }
  // A miss: the cold path, timed phase by phase when the benchmark asks (cold_phases.hpp).
  runtime::cold::PhaseTimer whole(runtime::cold::Phase::Other);
  const project::Specialisation& spec = [&]() -> const project::Specialisation& {
    runtime::cold::PhaseTimer t(runtime::cold::Phase::Registry);
    return find_spec(*pkg, uri);
  }();
  if (check_capture && driver->stream_is_capturing(stream))
    throw Error(ErrorKind::Usage,
                uri +
                    " is not loaded yet and the stream is being captured into a CUDA "
                    "graph: prefetch before capture (Loader::prefetch / kiln_prefetch); "
                    "kiln does not read, download or compile during capture");
  Entry& e = slot(ctx, uri);
  std::lock_guard<std::mutex> lock(e.load_mu);
  if (!e.ready.load(std::memory_order_acquire)) {
    int cc = 0;
    {
      runtime::cold::PhaseTimer t(runtime::cold::Phase::Context);
      cc = driver->current_device_cc();
    }
    load(e, uri, spec, cc);
  } else {
    stats->memory_hit(hits.stats_shard);  // another thread loaded it while this one waited
  }
  remember(slot_tls, ctx, uri, e.handle);
  return e.handle;
}

void Loader::Impl::load(Entry& e, const std::string& uri, const project::Specialisation& spec, int cc) {
  Search s;
  s.uri = uri;
  s.cc = cc;
  s.driver = driver_number();
  KernelHandle h;
  h.uri = uri;
  // The store tier is always first and never skipped: tried before the rest of the plan is
  // built, so a cold get served by a store builds none of the other tiers' refusals.
  using StatsTier = LoaderCounters::Tier;
  bool ok = false;
  {
    LoaderCounters::TierTimer timed(*stats, StatsTier::Store);
    ok = try_stores_fast(s, spec, h);
  }
  if (ok) stats->hit(StatsTier::Store);
  for (const plan::Tier& t : ok ? std::vector<plan::Tier>{} : plan::resolution_plan(tier_inputs(), cc)) {
    if (t.name == "store") continue;  // tried above
    if (t.skip) {
      s.reject(t.skip->candidate, t.skip->kind);
      continue;
    }
    const StatsTier tier = t.name == "mirror" ? StatsTier::Mirror : StatsTier::Jit;
    {
      LoaderCounters::TierTimer timed(*stats, tier);
      ok = tier == StatsTier::Mirror ? try_mirrors(s, spec, h) : try_jit(s, spec, h);
    }
    if (ok) {
      stats->hit(tier);
      break;
    }
  }
  for (const plan::Rejection& r : s.rejected) stats->rejected(r.kind);
  if (!ok) stats->miss();
  if (!ok)
    throw plan::resolution_failure(uri, cc, s.searched, s.rejected,
                             plan::fetch_advice(cc, pkg->name(), pkg->version(), known_release_targets(),
                                          cfg.cache_dir, family_of(spec), driver_number()));
  e.handle = std::move(h);
  e.ready.store(true, std::memory_order_release);
}

// get()'s store tier. Stores are scanned one at a time with StoreFs::scan_for (archives
// named for a target that cannot run on s.cc are not read; manifests are trimmed to the URI)
// and the first candidate that verifies and loads ends the search: later stores are not
// scanned. Only when no store serves the URI are all stores scanned in full, so the failure
// lists the same rejections, in the same order, as a full scan (plan rejections, then the
// candidates tried), and any usable candidate the fast scan left out is still tried.
bool Loader::Impl::try_stores_fast(Search& s, const project::Specialisation& spec, KernelHandle& out) {
  plan::BuildIdentity id = identity(spec);
  Search tried;  // rejections of candidates tried, in order
  tried.uri = s.uri;
  tried.cc = s.cc;
  tried.driver = s.driver;
  std::vector<std::string> tried_paths;
  // A store that serves ends the search without the full scan below: what the fast plans and
  // the candidates tried refused is counted here (Loader::stats()); otherwise load() counts
  // the full scan's refusals.
  std::vector<ErrorKind> fast_refusals;
  auto serves = [&](const std::string& dir, const std::string& source) {
    std::vector<plan::StoreScan> one;
    {
      runtime::cold::PhaseTimer t(runtime::cold::Phase::StoreScan);
      one.push_back(fs->scan_for(dir, source, s.uri, s.cc, s.driver));
    }
    // Without words: the fast plan's reasons and rejections are never shown (a failure is
    // explained by the full scan below).
    plan::StorePlan plan = plan::plan_stores(s.uri, s.cc, id, one, cfg.allow_stale, /*explain=*/false,
                                                s.driver);
    for (const auto& r : plan.rejected) fast_refusals.push_back(r.kind);
    for (const auto& c : plan.usable) {
      if (try_store_candidate(tried, c, "store", spec.entries.size(), out)) {
        for (ErrorKind k : fast_refusals) stats->rejected(k);
        for (const auto& r : tried.rejected) stats->rejected(r.kind);
        return true;
      }
      tried_paths.push_back(c.candidate.path);
    }
    return false;
  };
  // store_dirs()'s order, the artifact path first on its own (each directory once, no copy):
  // when it serves, the installed store is never looked for (installed_dir()).
  const auto& path = cfg.artifact_path;
  for (std::size_t i = 0; i < path.size(); ++i)
    if (!path[i].empty() &&
        std::find(path.begin(), path.begin() + i, path[i]) == path.begin() + i &&
        serves(path[i], kArtifactPathSource))
      return true;
  for (const auto& [dir, source] : store_dirs())
    if (source != kArtifactPathSource && serves(dir, source)) return true;
  // Nothing served: the full scan, for the explanation.
  auto scans = scan_stores(s);
  plan::StorePlan plan = plan::plan_stores(s.uri, s.cc, id, scans, cfg.allow_stale, true, s.driver);
  for (auto& r : plan.rejected) {
    r.candidate.tier = "store";
    s.rejected.push_back(std::move(r));
  }
  for (auto& r : tried.rejected) s.rejected.push_back(std::move(r));
  for (const auto& c : plan.usable) {
    if (std::find(tried_paths.begin(), tried_paths.end(), c.candidate.path) != tried_paths.end())
      continue;
    if (try_store_candidate(s, c, "store", spec.entries.size(), out)) return true;
  }
  return false;
}

// The stores in `scans` as tier `tier` (the mirror tier reads the archive it fetched this way).
bool Loader::Impl::try_stores(Search& s, const std::vector<plan::StoreScan>& scans,
                              const std::string& tier, const project::Specialisation& spec,
                              KernelHandle& out) {
  plan::StorePlan plan = plan::plan_stores(s.uri, s.cc, identity(spec), scans, cfg.allow_stale, true, s.driver);
  for (auto& r : plan.rejected) {
    r.candidate.tier = tier;
    s.rejected.push_back(r);
  }
  for (const auto& c : plan.usable)
    if (try_store_candidate(s, c, tier, spec.entries.size(), out)) return true;
  return false;
}

// An archive fetched into memory, ranked and checked as try_stores does a store on disk.
bool Loader::Impl::try_stores_in_memory(Search& s, const plan::MemoryStore& mem,
                                        const project::Specialisation& spec, KernelHandle& out) {
  plan::StorePlan plan =
      plan::plan_stores(s.uri, s.cc, identity(spec), {mem.scan}, cfg.allow_stale, true, s.driver);
  for (auto& r : plan.rejected) {
    r.candidate.tier = "mirror";
    s.rejected.push_back(r);
  }
  for (const auto& c : plan.usable)
    if (try_store_candidate(s, c, "mirror", spec.entries.size(), out, &mem.files)) return true;
  return false;
}

bool Loader::Impl::try_store_candidate(Search& s, const plan::StoreCandidate& sc, const std::string& tier,
                                       std::size_t entries, KernelHandle& out,
                                       const std::map<std::string, std::string>* memory) {
  // Copied only when the tier differs from the plan's ("store"): the cold get's path copies
  // no strings before the load.
  std::optional<Candidate> retiered;
  if (sc.candidate.tier != tier) {
    retiered = sc.candidate;
    retiered->tier = tier;
  }
  const Candidate& c = retiered ? *retiered : sc.candidate;
  if (sc.symbols.size() != entries) {
    s.reject({c.tier, c.target, c.path,
              "the manifest lists " + std::to_string(sc.symbols.size()) +
                  " entry symbols, the registry has " + std::to_string(entries)},
             ErrorKind::Format);
    return false;
  }
  // The same buffer that was hashed goes to the driver: no re-read between check and use.
  CheckedArtifact a;
  if (memory) {
    auto it = memory->find(c.path);
    if (it == memory->end()) {
      a.outcome = CheckedArtifact::Outcome::Unreadable;
      a.refusal = {{c.tier, c.target, c.path, "the archive has no such member"}, ErrorKind::Format};
    } else {
      a.bytes = it->second;
      if (std::string bad = plan::verify_artifact(a.bytes, sc.size, sc.sha256); !bad.empty()) {
        a.outcome = CheckedArtifact::Outcome::Mismatch;
        a.refusal = {{c.tier, c.target, c.path, std::move(bad)}, ErrorKind::Integrity};
      }
    }
  } else {
    a = read_checked_artifact(*fs, c, sc.size, sc.sha256);
  }
  stats->read(a.bytes.size());
  if (a.outcome == CheckedArtifact::Outcome::Verified) stats->verified(a.bytes.size());
  if (a.outcome != CheckedArtifact::Outcome::Verified) {
    if (a.outcome == CheckedArtifact::Outcome::Mismatch)
      log(runtime::LogLevel::Warn,
          c.path + ": " + a.refusal.candidate.reason + "; trying the next candidate");
    s.reject(std::move(a.refusal));
    return false;
  }
  if (!sc.stale.empty())
    log(runtime::LogLevel::Warn, "KILN_ALLOW_STALE: loading a stale artifact " + c.path + " (" + sc.stale +
                            "); results may be wrong");
  {
    runtime::cold::PhaseTimer t(runtime::cold::Phase::DriverLoad);
    if (!load_image(s, c, a.bytes, sc.symbols, out)) return false;
  }
  out.origin = c.path;
  if (runtime::log_enabled(runtime::LogLevel::Info))
    runtime::log_write(runtime::LogLevel::Info, "loaded " + s.uri + " for " + plan::device_target(s.cc) + " from " +
                                  c.path + " (" + c.target + ")");
  return true;
}

// The mirror tier: the pinned index says which targets the release offers, the one
// target-choice rule orders them, and the best one that can run is fetched into the cache
// and loaded from there; on any failure (download, verification, load) the next one.
bool Loader::Impl::try_mirrors(Search& s, const project::Specialisation& spec, KernelHandle& out) {
  std::string list = mirror_list(s);
  fetch::FetchOptions opts = mirror_options();
  std::vector<std::string> offered;
  try {
    offered = index_targets(opts);
  } catch (const Error& e) {
    s.reject({"mirror", "", list, e.what()}, e);
    return false;
  }
  plan::MirrorChoice choice =
      plan::choose_mirror_targets(s.cc, pkg->name(), pkg->version(), offered, list, family_of(spec));
  for (const auto& r : choice.rejected) s.reject(r.candidate, r.kind);
  for (std::size_t i = 0; i < choice.fetch.size(); ++i) {
    const std::string& target = choice.fetch[i];
    log(runtime::LogLevel::Info, "mirror tier: fetching " + target + " for " + s.uri + " on CC " +
                            plan::cc_string(s.cc) + " (" + choice.reasons[i] + ")");
    try {
      stats->fetched(fetch(opts, {target}, cfg.cache_dir).bytes_downloaded);
    } catch (const Error& e) {
      // The cache cannot be written: the same verified archive, kept in memory.
      if (e.kind() == ErrorKind::Io) {
        if (try_mirror_in_memory(s, spec, opts, target, list, e, out)) return true;
        continue;
      }
      s.reject({"mirror", target, list, e.what()}, e);
      continue;
    }
    plan::StoreScan fetched = narrowed_to_target(fs->scan(cfg.cache_dir, "cache directory"), target);
    if (fetched.archives.empty()) {
      s.reject({"mirror", target, cfg.cache_dir,
                "fetched, but the cache holds no readable archive for " + target},
               ErrorKind::NotFound);
      continue;
    }
    if (try_stores(s, {fetched}, "mirror", spec, out)) return true;
  }
  return false;
}

// The mirror tier when fetch() could not write the cache (`not_written`, Error{Io}): the archive is
// fetched and verified again into memory (fetch_archive_into_memory), ranked and checked as a
// store's archive, and its artifact loaded from there; the cache stays as it was.
bool Loader::Impl::try_mirror_in_memory(Search& s, const project::Specialisation& spec,
                                        const fetch::FetchOptions& opts, const std::string& target,
                                        const std::string& list, const Error& not_written,
                                        KernelHandle& out) {
  plan::MemoryStore mem;
  try {
    mem = plan::memory_store(fetch_memory(opts, target));
  } catch (const Error& e) {
    s.reject({"mirror", target, list,
              std::string(not_written.what()) + "; fetching it into memory instead: " + e.what()},
             e);
    return false;
  }
  if (try_stores_in_memory(s, mem, spec, out)) {
    say_not_kept("kernels fetched from mirrors", not_written.what());
    out.origin = "memory:" + out.origin;
    return true;
  }
  return false;
}

bool Loader::Impl::try_jit(Search& s, const project::Specialisation& spec, KernelHandle& out) {
  std::string target = plan::device_target(s.cc);
  const project::Family* fam = nullptr;
  try {
    fam = pkg->registry().family(spec.family);
    if (!fam)
      throw Error(ErrorKind::Format, "package " + pkg->name() + " has no family " + spec.family);
  } catch (const Error& e) {
    s.reject({"jit", target, cfg.cache_dir, e.what()}, e.kind());
    return false;
  }
  if (auto refusal = plan::jit_refusal(jit_compiler().probe(), s.cc, fam)) {
    s.reject(std::move(*refusal));  // with the driver's fields when it refused every NVRTC
    return false;
  }
  log(runtime::LogLevel::Warn, "fast path missed for " + s.uri + " on " + target +
                          ", compiling with NVRTC: " + summary(s.rejected));
  jit::JitResult res;
  try {
    res = jit_compiler().compile(spec, *fam, s.cc, cfg.cache_dir);
  } catch (const Error& e) {
    s.reject({"jit", target, cfg.cache_dir, e.what()}, e.kind());
    return false;
  }
  if (res.from_cache)
    stats->read(res.image.size());
  else
    stats->jit_compile();
  Candidate c{"jit", target, res.not_kept.empty() ? res.cache_path : cfg.cache_dir + "/jit", ""};
  if (std::string bad = verify_jit_result(*fs, res); !bad.empty()) {
    s.reject({c.tier, c.target, c.path, bad}, ErrorKind::Integrity);
    return false;
  }
  stats->verified(res.image.size());
  if (res.symbols.size() != spec.entries.size()) {
    s.reject({c.tier, c.target, c.path,
              "NVRTC returned " + std::to_string(res.symbols.size()) + " symbols for " +
                  std::to_string(spec.entries.size()) + " entries"},
             ErrorKind::Internal);
    return false;
  }
  if (!load_image(s, c, res.image, res.symbols, out)) return false;
  if (!res.not_kept.empty()) {
    say_not_kept("JIT-compiled kernels", res.not_kept);
    out.origin = "jit:memory";
    return true;
  }
  out.origin = "jit:" + res.cache_path;
  return true;
}

// Hands verified bytes to the driver; a load counts only if every entry is really there.
bool Loader::Impl::load_image(Search& s, const Candidate& c, const std::string& image,
                              const std::vector<std::string>& symbols, KernelHandle& out) {
  void* lib = nullptr;
  try {
    lib = driver->load_library(image);
    unsigned n = driver->kernel_count(lib);
    if (n == 0) {
      driver->unload_library(lib);
      s.reject({c.tier, c.target, c.path,
                "the driver accepted the image but it holds no kernel for CC " + plan::cc_string(s.cc) +
                    " (an image built for another GPU loads empty)"},
               ErrorKind::Unsupported);
      return false;
    }
    std::vector<void*> fns;
    std::vector<std::optional<std::vector<KernelArgument>>> args;
    for (const auto& sym : symbols) {
      void* kernel = driver->get_kernel(lib, sym);
      fns.push_back(driver->kernel_function(kernel));
      std::optional<std::vector<KernelArgument>>& a = args.emplace_back();
      if (auto params = driver->kernel_parameters(kernel)) {
        a.emplace();
        for (const runtime::ParamInfo& p : *params) a->push_back({p.offset, p.size});
      }
    }
    out.functions = std::move(fns);
    out.arguments = std::move(args);
    out.device = driver->current_device();
    out.library = lib;
    return true;
  } catch (const Error& e) {
    if (lib) driver->unload_library(lib);
    s.reject({c.tier, c.target, c.path, std::string("the driver refused it: ") + e.what()},
             ErrorKind::Driver);
    return false;
  }
}

// --- resolve()

// The tiers get() would walk, each answered from what is on disk and in the configuration; the
// first that would serve is the choice, and every candidate passed over is in s.
std::optional<Candidate> Loader::Impl::explain(Search& s, const project::Specialisation& spec) {
  std::optional<Candidate> chosen;
  for (const plan::Tier& t : plan::resolution_plan(tier_inputs(), s.cc)) {
    if (chosen) break;
    if (t.skip) {
      s.reject(t.skip->candidate, t.skip->kind);
      continue;
    }
    if (t.name == "store")
      chosen = explain_stores(s, spec);
    else if (t.name == "mirror")
      chosen = explain_mirrors(s, spec);
    else
      chosen = explain_jit(s, spec);
  }
  return chosen;
}

// Every store scanned in full; digests are checked here too, so the answer says what get()
// would really load; the usable candidates after the first are "not needed".
std::optional<Candidate> Loader::Impl::explain_stores(Search& s, const project::Specialisation& spec) const {
  auto scans = scan_stores(s);
  plan::StorePlan plan = plan::plan_stores(s.uri, s.cc, identity(spec), scans, cfg.allow_stale, true, s.driver);
  for (auto& x : plan.rejected) s.rejected.push_back(std::move(x));
  std::optional<Candidate> chosen;
  for (const auto& c : plan.usable) {
    if (chosen) {
      s.reject({c.candidate.tier, c.candidate.target, c.candidate.path,
                "not needed: " + chosen->target + " from " + chosen->path + " comes first"},
               ErrorKind::NotFound);
      continue;
    }
    CheckedArtifact a = read_checked_artifact(*fs, c.candidate, c.size, c.sha256);
    if (a.outcome != CheckedArtifact::Outcome::Verified) {
      s.reject(std::move(a.refusal));
      continue;
    }
    chosen = c.candidate;
  }
  return chosen;
}

// Not contacted: the choice is made over the targets compiled in as the release's
// (release_targets()); get() makes it over the pinned index, which lists the same.
std::optional<Candidate> Loader::Impl::explain_mirrors(Search& s,
                                                       const project::Specialisation& spec) const {
  std::string list = mirror_list(s);
  std::vector<std::string> offered = known_release_targets();
  const project::Family* fam = family_of(spec);
  if (offered.empty() && fam)
    if (auto why = plan::family_cannot_run(*fam, s.cc)) {  // whatever the index offers
      s.reject({"mirror", "", list, *why}, ErrorKind::Unsupported);
      return std::nullopt;
    }
  if (offered.empty())
    return Candidate{"mirror", "", list,
                     "not contacted; get() chooses among the targets the pinned index "
                     "offers (this libkiln does not know the release's targets)"};
  plan::MirrorChoice choice =
      plan::choose_mirror_targets(s.cc, pkg->name(), pkg->version(), offered, list, fam);
  for (const auto& x : choice.rejected) s.reject(x.candidate, x.kind);
  if (choice.fetch.empty()) return std::nullopt;
  return Candidate{"mirror", choice.fetch.front(), list,
                   "not contacted; get() would fetch it: " + choice.reasons.front()};
}

std::optional<Candidate> Loader::Impl::explain_jit(Search& s, const project::Specialisation& spec) {
  const project::Family* fam = family_of(spec);
  if (!fam) {
    s.reject({"jit", plan::device_target(s.cc), cfg.cache_dir,
              "package " + pkg->name() + " has no readable family " + spec.family},
             ErrorKind::Format);
    return std::nullopt;
  }
  const jit::JitCapability cap = jit_probe(s.driver);
  if (auto refusal = plan::jit_refusal(cap, s.cc, fam)) {
    s.reject(std::move(*refusal));
    return std::nullopt;
  }
  const std::string target = jit::jit_target(*fam, s.cc)->str();
  // Which NVRTC, and that the driver runs its code (jit.hpp: the newest NVRTC it runs).
  std::string nvrtc = "NVRTC";
  if (cap.nvrtc_major > 0)
    nvrtc += " " + std::to_string(cap.nvrtc_major) + "." + std::to_string(cap.nvrtc_minor);
  return Candidate{"jit", target, cfg.cache_dir + "/jit",
                   nvrtc + " compiles it for " + target +
                       (s.driver > 0 && cap.nvrtc_major > 0
                            ? ", which this driver (" + format::driver_words(s.driver) + ") runs"
                            : std::string())};
}

// --- what both walks read

const project::Family* Loader::Impl::family_of(const project::Specialisation& spec) const {
  try {
    return pkg->registry().family(spec.family);
  } catch (const Error& e) {
    log(runtime::LogLevel::Debug, "the family of " + spec.uri + " is unknown: " + e.what());
    return nullptr;
  }
}

std::vector<std::pair<std::string, std::string>> Loader::Impl::store_dirs() const {
  std::vector<std::pair<std::string, std::string>> dirs;
  auto add = [&](const std::string& d, const char* source) {
    if (d.empty()) return;
    for (const auto& e : dirs)
      if (e.first == d) return;
    dirs.emplace_back(d, source);
  };
  for (const auto& d : cfg.artifact_path) add(d, kArtifactPathSource.c_str());
  if (cfg.use_installed_store) add(installed_dir(), "installed beside the package's library");
  add(cfg.cache_dir, "cache directory");
  return dirs;
}

std::vector<plan::StoreScan> Loader::Impl::scan_stores(Search& s) const {
  std::vector<plan::StoreScan> scans;
  for (const auto& [dir, source] : store_dirs()) {
    s.searched.push_back(dir + " (" + source + ")");
    scans.push_back(fs->scan(dir, source));
  }
  return scans;
}

// The targets compiled in as the release's are the reference package's (ci/targets.txt of
// kiln's tree); for any other package they are unknown here (the pinned index says).
std::vector<std::string> Loader::Impl::known_release_targets() const {
  return plan::compiled_release_targets(pkg->name(), pkg->version()).value_or(std::vector<std::string>{});
}

fetch::FetchOptions Loader::Impl::mirror_options() const {
  // Looked up when a mirror is first used, not when a Loader is made: a store hit never needs it.
  fetch::FetchOptions opts = plan::mirror_fetch_options(cfg, installed_tuf_root_once());
  opts.driver = driver_number();
  opts.package = pkg->name();
  opts.version = pkg->version();
  opts.log = [](const std::string& m) { log(runtime::LogLevel::Info, m); };
  return opts;
}

std::string Loader::Impl::mirror_list(Search& s) const {
  std::string list;
  for (const auto& m : cfg.mirrors) {
    s.searched.push_back(m + " (mirror)");
    list += (list.empty() ? "" : " ") + m;
  }
  return list;
}

namespace {

std::unique_ptr<Loader::Impl> make_impl(const kiln_package& package, LoaderConfig config,
                                        plan::LoaderDeps deps) {
  runtime::cold::PhaseTimer timer(runtime::cold::Phase::LoaderCreate);
  auto impl_ = std::make_unique<Loader::Impl>();
  impl_->pkg = std::make_unique<const project::Package>(&package);
  if (config.api_log < 0 || config.api_log > 3)
    throw Error(ErrorKind::Usage, "api_log=" + std::to_string(config.api_log) +
                                      " is not an API log level: expected 0, 1, 2 or 3");
  runtime::configure_logging(runtime::parse_log_level(config.log_level, "log_level"), config.api_log,
                    config.log_file);
  impl_->cfg = std::move(config);
  impl_->driver = deps.driver ? deps.driver : runtime::make_cuda_driver();
  // The description's kernel table guides lookups in the manifests (UriRanks); the Package
  // outlives the scanner (both the Impl's).
  format::UriRanks ranks{package.kernel_count,
                 [pkg = impl_->pkg.get()](std::string_view uri) { return pkg->rank(uri); }};
  impl_->fs = std::make_unique<plan::StoreScanner>(impl_->pkg->name(), impl_->pkg->version(),
                                             impl_->cfg.cache_dir, deps.fs, std::move(ranks));
  if (deps.jit) {
    impl_->jit = deps.jit;
    impl_->jit_given = true;
  } else {
    jit::NvrtcConfig& nc = impl_->jit_config;
    nc.library = impl_->cfg.nvrtc_library;
    nc.cuda_home = impl_->cfg.cuda_home;
    nc.sources = impl_->pkg->sources();
    nc.log = [](jit::JitLogLevel l, const std::string& m) {
      log(l == jit::JitLogLevel::Warn ? runtime::LogLevel::Warn : runtime::LogLevel::Info, m);
    };
  }
  impl_->fetch = deps.fetch ? deps.fetch : fetch::fetch_targets;
  impl_->index_targets = deps.index_targets ? deps.index_targets : fetch::fetch_index_targets;
  impl_->fetch_memory = deps.fetch_into_memory ? deps.fetch_into_memory : fetch::fetch_archive_into_memory;
  if (deps.installed_store)
    impl_->installed = *deps.installed_store;
  else if (!impl_->cfg.installed_store.empty())
    impl_->installed = impl_->cfg.installed_store;
  impl_->installed_anchor = &package;
  impl_->stats = register_loader_counters();
  return impl_;
}

}  // namespace

struct LoaderFactory {
  static std::unique_ptr<Loader> make(const kiln_package& package, LoaderConfig config,
                                      plan::LoaderDeps deps) {
    return std::unique_ptr<Loader>(
        new Loader(make_impl(package, std::move(config), std::move(deps))));
  }
  static Loader* make_at(void* storage, const kiln_package& package, LoaderConfig config,
                         plan::LoaderDeps deps) {
    return new (storage) Loader(make_impl(package, std::move(config), std::move(deps)));
  }
};

std::unique_ptr<Loader> make_loader(const kiln_package& package, LoaderConfig config,
                                    plan::LoaderDeps deps) {
  return LoaderFactory::make(package, std::move(config), std::move(deps));
}

Loader* make_loader_at(void* storage, const kiln_package& package, LoaderConfig config,
                       plan::LoaderDeps deps) {
  return LoaderFactory::make_at(storage, package, std::move(config), std::move(deps));
}

Loader::Loader(const kiln_package& package, LoaderConfig config)
    : impl_(make_impl(package, std::move(config), plan::LoaderDeps{})) {}

const kiln_package& Loader::package() const { return *impl_->pkg->c(); }

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Loader::~Loader() {
  retire_loader_counters(impl_->stats);
  for (auto& [ctx, uris] : impl_->by_ctx)
    for (auto& [uri, e] : uris)
      if (e->ready.load()) impl_->driver->unload_library(e->handle.library);
}

const KernelHandle& Loader::get(const std::string& uri) { return impl_->get(uri, nullptr, false); }

const KernelHandle& Loader::get(const std::string& uri, void* stream) {
  return impl_->get(uri, stream, true);
}

void Loader::prefetch(const std::vector<std::string>& uris) {
  // Every URI is attempted, so one call reports everything missing before a capture.
  std::optional<ErrorKind> kind;
  std::string msg;
  for (const auto& u : uris) {
    try {
      get(u);
    } catch (const Error& e) {
      if (!kind) kind = e.kind();
      msg += (msg.empty() ? "" : "\n") + std::string(e.what());
    }
  }
  if (kind) throw Error(*kind, msg);
}

Resolution Loader::resolve(const std::string& uri, std::optional<int> cc) const {
  return resolve(uri, cc, std::nullopt);
}

Resolution Loader::resolve(const std::string& uri, std::optional<int> cc,
                           std::optional<int> driver) const {
  Impl& im = *impl_;
  const project::Specialisation& spec = find_spec(*im.pkg, uri);
  Resolution r;
  r.uri = uri;
  if (!cc) {
    void* ctx = im.driver->current_context();
    cc = im.driver->current_device_cc();
    if (Impl::Entry* e = im.lookup(ctx, uri); e && e->ready.load(std::memory_order_acquire)) {
      r.device = plan::device_target(*cc);
      r.chosen = Candidate{"memory", "", e->handle.origin, ""};
      return r;
    }
  }
  r.device = plan::device_target(*cc);
  Impl::Search s;
  s.uri = uri;
  s.cc = *cc;
  s.driver = driver ? *driver : im.driver_number();
  if (s.driver > 0) r.driver = format::driver_words(s.driver);
  // The same plan get() walks; nothing is loaded, downloaded or compiled here.
  r.chosen = im.explain(s, spec);
  for (auto& x : s.rejected) r.rejected.push_back(std::move(x.candidate));
  r.searched = std::move(s.searched);
  return r;
}

const LoaderConfig& Loader::config() const { return impl_->cfg; }

LoaderStats Loader::stats() const { return impl_->stats->snapshot(); }

std::uint64_t Loader::id() const { return impl_->loader_id; }

runtime::Driver& LoaderAccess::driver(const Loader& loader) { return *loader.impl_->driver; }

namespace {

void require_entry(const KernelHandle& kernel, std::size_t entry) {
  if (entry >= kernel.functions.size())
    throw Error(ErrorKind::Usage, kernel.uri + " has " + std::to_string(kernel.functions.size()) +
                                      " entries; entry " + std::to_string(entry) + " asked for")
        .with("uri", kernel.uri)
        .with("argument", "entry");
}

}  // namespace

const std::vector<KernelArgument>& Loader::arguments(const KernelHandle& kernel,
                                                     std::size_t entry) const {
  require_entry(kernel, entry);
  if (entry >= kernel.arguments.size() || !kernel.arguments[entry])
    throw Error(ErrorKind::Unsupported,
                "the CUDA driver cannot report the parameters of " + kernel.uri +
                    " (cuKernelGetParamInfo needs a CUDA 12.4 or later driver)")
        .with("uri", kernel.uri);
  return *kernel.arguments[entry];
}

void Loader::launch(const KernelHandle& kernel, std::size_t entry, Dim3 grid, Dim3 block,
                    std::size_t shared_bytes, void* stream, void** args,
                    std::size_t arg_count) const {
  require_entry(kernel, entry);
  if (entry < kernel.arguments.size() && kernel.arguments[entry]) {
    const std::size_t expected = kernel.arguments[entry]->size();
    if (arg_count != expected)
      throw Error(ErrorKind::Usage,
                  kernel.uri + (kernel.functions.size() > 1 ? " entry " + std::to_string(entry)
                                                            : std::string()) +
                      " takes " + std::to_string(expected) + " argument" +
                      (expected == 1 ? "" : "s") + ", " + std::to_string(arg_count) + " given")
          .with("uri", kernel.uri)
          .with("argument", "args")
          .with("expected", std::to_string(expected))
          .with("actual", std::to_string(arg_count));
  }
  if (arg_count > 0 && !args)
    throw Error(ErrorKind::Usage, "launching " + kernel.uri + ": args is null with " +
                                      std::to_string(arg_count) + " arguments")
        .with("uri", kernel.uri)
        .with("argument", "args");
  launch(kernel, entry, grid, block, shared_bytes, stream, args);
}

void Loader::launch(const KernelHandle& kernel, std::size_t entry, Dim3 grid, Dim3 block,
                    std::size_t shared_bytes, void* stream, void** args) const {
  require_entry(kernel, entry);
  if (shared_bytes > std::numeric_limits<unsigned>::max())
    throw Error(ErrorKind::Usage, "launching " + kernel.uri + ": shared_bytes = " +
                                      std::to_string(shared_bytes) + " is out of range [0, " +
                                      std::to_string(std::numeric_limits<unsigned>::max()) + "]")
        .with("uri", kernel.uri)
        .with("argument", "shared_bytes");
  for (const auto& [name, d] : {std::pair{"grid", grid}, std::pair{"block", block}})
    if (d.x == 0 || d.y == 0 || d.z == 0)
      throw Error(ErrorKind::Usage, "launching " + kernel.uri + ": " + name + " = (" +
                                        std::to_string(d.x) + ", " + std::to_string(d.y) + ", " +
                                        std::to_string(d.z) + "): each dimension is 1 to 2^32-1")
          .with("uri", kernel.uri)
          .with("argument", name);
  const unsigned g[3] = {grid.x, grid.y, grid.z};
  const unsigned b[3] = {block.x, block.y, block.z};
  try {
    impl_->driver->launch(kernel.functions[entry], g, b, static_cast<unsigned>(shared_bytes),
                          stream, args);
  } catch (const Error& e) {
    throw Error(e.kind(),
                std::string(e.what()) + " (launching " + kernel.uri + " entry " +
                    std::to_string(entry) + ")",
                e.fields());
  }
}

}  // namespace kiln
