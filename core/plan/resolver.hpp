#pragma once
// Resolution as pure functions over values (docs/rules.md, Pure decisions): which artifacts of
// which stores could serve a URI on a device of compute capability cc, in what order, and why every
// other one was rejected. Reading stores is StoreScanner's (plan/store_scanner.hpp, over StoreFs);
// the wording of a mistyped URI's near matches is plan/near_matches.hpp's; where the install
// keeps its files, plan/install_location.hpp's. The driver, the compiler and the fetcher are
// injected through LoaderDeps, so the whole order is unit-tested with fakes.
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
#include "kiln/config.hpp"
#include "kiln/resolution.hpp"
#include "plan/target_choice.hpp"
// Only for the packager's commands that still reach installed_store_dir and installed_tuf_root
// through this header; new code includes plan/install_location.hpp itself.
#include "plan/install_location.hpp"
#include "plan/store_scanner.hpp"

namespace kiln::runtime {
class Driver;
}
namespace kiln::jit {
class JitCompiler;
struct JitCapability;
}  // namespace kiln::jit

namespace kiln::plan {

// What the loader's package is; a candidate differing in any of these is stale.
struct BuildIdentity {
  std::string package;          // the package's name: archives of another package are skipped
  std::string package_version;  // the package's version
  int manifest_format = format::kManifestFormat;
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
std::vector<StaleField> stale_fields(const format::Manifest& m, const format::ArtifactEntry& art,
                                     const BuildIdentity& id);

// The format_version a manifest text declares ("?" when it has none), for a message naming both
// values when the parser refused it as stale.
std::string declared_format(const std::string& text);

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
// `driver` (cuDriverGetVersion's number, 12080 for CUDA 12.8; 0: not known, not weighed): an
// archive whose toolkit's code that driver does not run is rejected (Unsupported, with
// toolkit_refusal's words); within a store the best target wins, then the newest toolkit.
StorePlan plan_stores(const std::string& uri, int cc, const BuildIdentity& id,
                      const std::vector<StoreScan>& stores, bool allow_stale, bool explain = true,
                      int driver = 0);

// "" when `bytes` matches the manifest's size and digest; else "integrity: " and the first
// mismatch in artifact_check.hpp's words ("sha256 is X, manifest says Y").
std::string verify_artifact(const std::string& bytes, std::uint64_t size,
                            const std::string& sha256);

// Pure: the "to get it" advice of a failed get() on a device of compute capability cc, from the
// targets release `version` offers (release_targets(); empty when unknown): `kiln fetch --device`
// with the archive the target-choice rule picks, or "no archive of release V can run on CC X.Y".
// `family` (the URI's): when none of its declared targets runs on cc, no archive nor JIT can
// serve it, and the advice says so (family_cannot_run). `driver` (cuDriverGetVersion's number;
// 0 when unknown): the command passes it as `--driver X.Y`, since the fetch runs on another
// machine, and where it cannot run this libkiln's toolkit the advice names no archive of that
// toolkit but the target and the driver's CUDA (the release may hold another toolkit's).
std::string fetch_advice(int cc, const std::string& package, const std::string& version,
                         const std::vector<std::string>& offered, const std::string& cache_dir,
                         const project::Family* family = nullptr, int driver = 0);

// Pure: the error for a failed get(): kind from what was rejected (Stale or Integrity when
// every candidate that would have run failed for that reason; else Unsupported when the driver
// refused a toolkit's code, with fields driver and toolkit; else NotFound), message naming
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
std::optional<Rejection> jit_refusal(const jit::JitCapability& cap, int cc,
                                     const project::Family* family = nullptr);

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
                                   const std::string& where, const project::Family* family = nullptr);

// What Loader runs over. Any member left empty gets the real one.
struct LoaderDeps {
  std::shared_ptr<runtime::Driver> driver;
  std::shared_ptr<const store::StoreFs> fs;  // the disk under the loader's StoreScanner
  std::shared_ptr<jit::JitCompiler> jit;
  std::function<fetch::FetchResult(const fetch::FetchOptions&, const std::vector<std::string>&,
                            const std::string&)>
      fetch;
  // The targets the pinned index of the release offers (kiln::fetch_index_targets); the mirror
  // tier chooses among them with choose_targets before fetching.
  std::function<std::vector<std::string>(const fetch::FetchOptions&)> index_targets;
  // One archive fetched and verified into memory (kiln::fetch_archive_into_memory): the mirror
  // tier's way when `fetch` cannot write the cache directory (Error{Io}).
  std::function<fetch::FetchedArchive(const fetch::FetchOptions&, const std::string&)>
      fetch_into_memory;
  // The store installed beside the library; nullopt = found with dladdr.
  std::optional<std::string> installed_store;
};

// What the mirror tier fetches with under `cfg`: its mirrors, trust anchors (index pin, TUF
// root, `installed_root` from installed_tuf_root(), metadata under <cache dir>/tuf), CA bundle
// and offline switch. The loader's mirror tier, `kiln fetch`, `kiln bundle` and `kiln doctor`'s
// probe start from it, so they read one configuration the same way.
fetch::FetchOptions mirror_fetch_options(const LoaderConfig& cfg, const std::string& installed_root);

}  // namespace kiln::plan
