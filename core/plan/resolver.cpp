#include "plan/resolver.hpp"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "format/toolkit.hpp"
#include "format/untrusted_json.hpp"
#include "io/artifact_check.hpp"
#include "jit/jit.hpp"
#include "kiln/version.hpp"
#include "util/join.hpp"

namespace kiln::plan {

namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

std::string declared_format(const std::string& text) {
  try {
    auto j = format::parse_untrusted_json<nlohmann::json>(text, "manifest");
    if (j.is_object() && j.contains("format_version")) return format::quote_json(j["format_version"]);
  } catch (const std::exception&) {
  }
  return "?";
}

std::vector<StaleField> stale_fields(const format::Manifest& m, const format::ArtifactEntry& art,
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
std::string not_contained(const format::Manifest& m, const std::string& uri) {
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
  format::CudaVersion toolkit;  // ties of rank: the newest toolkit first
  std::optional<Rejection> rejection;
};
Considered consider_archive(const store::StoreArchive& ar, const std::string& store_dir,
                            const std::string& uri, int cc, const BuildIdentity& id,
                            const TargetChoice& choice, bool allow_stale, int driver) {
  Considered out;
  if (!ar.manifest) {
    out.rejection = Rejection{{"store", "", ar.dir + "/manifest.json", ar.error}, ar.error_kind};
    return out;
  }
  const format::Manifest& m = *ar.manifest;
  if (!id.package.empty() && m.package != id.package) return out;  // another package's
  auto target = format::parse_target(m.target);
  if (!target) {
    out.rejection = Rejection{
        {"store", m.target, ar.dir + "/manifest.json", "unknown target " + quoted(m.target)},
        ErrorKind::Format};
    return out;
  }
  const format::ArtifactEntry* art = m.find(uri);
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
  if (auto why = toolkit_refusal(m.cuda_version, *target, driver)) {
    out.rejection = Rejection{{"store", m.target, path, *why},
                              ErrorKind::Unsupported,
                              {{"driver", format::driver_cuda_version(driver).str()},
                               {"toolkit", m.cuda_version}}};
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
  c.candidate = {"store", m.target, path,
                 pos->reason.empty() ? pos->reason : pos->reason + toolkit_taken(m.cuda_version, driver)};
  c.store_dir = store_dir;
  c.size = art->size;
  c.sha256 = art->sha256;
  for (const auto& e : art->entries) c.symbols.push_back(e.symbol);
  c.stale = stale;
  out.candidate = std::move(c);
  out.rank = static_cast<std::size_t>(pos - choice.candidates.begin());
  out.toolkit = format::parse_cuda_version(m.cuda_version).value_or(format::CudaVersion{});
  return out;
}

}  // namespace

StorePlan plan_stores(const std::string& uri, int cc, const BuildIdentity& id,
                      const std::vector<StoreScan>& stores, bool allow_stale, bool explain,
                      int driver) {
  StorePlan plan;
  for (const auto& store : stores) {
    if (auto r = store_rejection(store, id)) {
      plan.rejected.push_back(std::move(*r));
      continue;
    }
    // The one target-choice rule over the targets this store offers: its order ranks the
    // candidates, its reasons explain the ones that cannot run.
    std::vector<format::Target> offered;
    for (const auto& ar : store.archives)
      if (ar.manifest)
        if (auto t = format::parse_target(ar.manifest->target)) offered.push_back(*t);
    TargetChoice choice = choose_targets(cc, offered, explain);
    std::vector<Considered> ranked;
    for (const auto& ar : store.archives) {
      Considered c = consider_archive(ar, store.dir, uri, cc, id, choice, allow_stale, driver);
      if (c.rejection) plan.rejected.push_back(std::move(*c.rejection));
      if (c.candidate) ranked.push_back(std::move(c));
    }
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const Considered& a, const Considered& b) {
                       if (a.rank != b.rank) return a.rank < b.rank;
                       return b.toolkit < a.toolkit;
                     });
    for (auto& r : ranked) plan.usable.push_back(std::move(*r.candidate));
  }
  return plan;
}

std::string verify_artifact(const std::string& bytes, std::uint64_t size,
                            const std::string& sha256) {
  std::optional<io::PinMismatch> mismatch = io::pin_mismatch(bytes, {size, sha256});
  return mismatch ? "integrity: " + mismatch->message("", "manifest") : "";
}

std::string fetch_advice(int cc, const std::string& package, const std::string& version,
                         const std::vector<std::string>& offered, const std::string& cache_dir,
                         const project::Family* family, int driver) {
  if (family)
    if (auto why = family_cannot_run(*family, cc))
      return *why + ": no archive of " + package + " " + version +
             " and no JIT can serve it on this device";
  std::string cmd = "kiln fetch --package " + package + " --version " + version + " --device " +
                    device_target(cc) + " --dest " + cache_dir;
  if (driver > 0) cmd += " --driver " + format::driver_cuda_version(driver).str();
  const std::string get = "to get it on a machine with network access: " + cmd +
                          " (then copy that directory here, or add it to KILN_ARTIFACT_PATH)";
  if (offered.empty()) return get;
  NamedChoice choice = choose_named_targets(cc, offered, family);
  std::string all = util::join(offered, ", ");
  if (choice.candidates.empty())
    return "no archive of " + package + " " + version + " can run on CC " + cc_string(cc) +
           " (it offers " + all + "); only JIT (NVRTC) can serve this device";
  const auto& best = choice.candidates.front();
  if (auto target = format::parse_target(best.first))
    if (auto why = toolkit_refusal(cuda_version(), *target, driver))
      return get + "; it fetches the " + best.first + " archive of a toolkit this driver runs (" +
             best.second + "), not this libkiln's own CUDA " + cuda_version() + " one: " + *why;
  return get + "; it fetches " +
         format::archive_file_name(package, version, cuda_version(), best.first) + " (" + best.first +
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
  // Nothing stale or corrupt decided it, and the driver refused a toolkit's code that the device
  // would run: unsupported (a driver too old for the release), with the driver's fields.
  if (kind == ErrorKind::NotFound)
    for (const auto& r : rejected)
      if (r.kind == ErrorKind::Unsupported && !r.fields.empty() && r.fields.front().name == "driver") {
        decisive = kind = ErrorKind::Unsupported;
        mixed = false;
        break;
      }
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

std::optional<Rejection> jit_refusal(const jit::JitCapability& cap, int cc, const project::Family* family) {
  std::string target = device_target(cc);
  // The family's rule first: it holds whatever NVRTC is installed.
  if (family && !jit::jit_target(*family, cc))
    return Rejection{{"jit", target, "", jit::jit_refusal_reason(*family, cc)}, ErrorKind::Unsupported};
  if (!cap.available && cap.refused_by_driver && cap.driver > 0)
    // NVRTC is there, but only ones whose code the driver does not run: unsupported with the
    // driver's fields, as an archive of a toolkit the driver refuses.
    return Rejection{{"jit", target, "", "NVRTC unavailable: " + cap.missing},
                     ErrorKind::Unsupported,
                     {{"driver", format::driver_cuda_version(cap.driver).str()},
                      {"toolkit", cap.refused_by_driver->str()}}};
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
                                   const std::string& where, const project::Family* family) {
  MirrorChoice out;
  NamedChoice choice = choose_named_targets(cc, offered, family);
  for (const auto& [t, why] : choice.candidates) {
    out.fetch.push_back(t);
    out.reasons.push_back(why);
  }
  for (const auto& [t, why] : choice.rejected)
    out.rejected.push_back({{"mirror", t, where, why}, ErrorKind::Unsupported});
  if (out.fetch.empty()) {
    std::string all = util::join(offered, ", ");
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

fetch::FetchOptions mirror_fetch_options(const LoaderConfig& cfg, const std::string& installed_root) {
  fetch::FetchOptions opts;
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

}  // namespace kiln::plan
