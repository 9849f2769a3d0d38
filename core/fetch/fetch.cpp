// Verified downloads from trusted mirrors. The state machine of one download, per archive:
//
//   present? --yes--> already_present
//      | no
//   lock <dest>/.kiln-locks/<archive>.lock --> present? (another process may have finished)
//      | no                                      --yes--> already_present
//   remove orphaned <archive>.tmp.* (their writers are dead: we hold the lock)
//   for each mirror not marked bad:
//     attempt (download_verified, verified_download.hpp: the one verified download and retry
//     loop, shared with `kiln mirror sync`): stream into <dest>/<archive>.tmp.<rand>, hashing;
//     > size => abort
//       ok + size + digest match  --> rename to <dest>/<archive> --> manifest agrees with the
//                                     index entry? --no--> remove archive, Error (Integrity/Stale)
//                                     --yes--> install --> remove archive
//       bad bytes (size/digest)    --> mark mirror bad, next mirror
//       past its own deadline      --> next mirror (no retry: it would drip again)
//       failure                    --> decide_retry(): sleep and retry, or next mirror
//   no mirror left --> Error naming every mirror and what went wrong
// Every request's deadline is also capped by what is left of the whole fetch's deadline; once
// that has passed, the fetch ends with Error{Network} naming it.
//
// The index comes from the first mirror that serves a trusted one: pinned by its digest, or,
// when a TUF root is the trust anchor (tuf_mirror.hpp), as a target of the mirror's TUF
// repository (refresh <mirror>/metadata through tuf::Updater, then the index bounded by its
// length and checked against every hash the targets metadata lists). Under TUF each archive is
// downloaded from <mirror>/targets/ against its targets metadata (length, sha256, sha512) as
// well as its index entry; a refused repository distrusts that mirror and names the attack.
#include "fetch/fetch.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "fetch/fetch_internal.hpp"
#include "fetch/tuf_mirror.hpp"
#include "fetch/verified_download.hpp"
#include "format/archive.hpp"
#include "format/manifest.hpp"
#include "format/target.hpp"
#include "format/toolkit.hpp"
#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "store/index_entry_check.hpp"
#include "store/store.hpp"
#include "tuf/tuf_updater.hpp"
#include "util/join.hpp"

#ifndef KILN_DEFAULT_MIRRORS
#define KILN_DEFAULT_MIRRORS ""
#endif
#ifndef KILN_TRUSTED_INDEX_SHA256
#define KILN_TRUSTED_INDEX_SHA256 ""
#endif

namespace kiln::fetch {

namespace fs = std::filesystem;

std::vector<std::string> default_mirrors() {
  std::vector<std::string> out;
  std::string all = KILN_DEFAULT_MIRRORS;
  std::string cur;
  for (char c : all + " ") {
    if (c == ' ' || c == ',' || c == ';' || c == '\t' || c == '\n') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::string default_index_sha256() { return KILN_TRUSTED_INDEX_SHA256; }


std::string normalise_mirror(const std::string& mirror) {
  std::string m = mirror;
  if (!m.empty() && m[0] == '/') m = "file://" + m;
  while (m.size() > 1 && m.back() == '/' && m.compare(m.size() - 3, 3, "://") != 0) m.pop_back();
  std::string scheme = m.substr(0, m.find("://"));
  if (m.find("://") == std::string::npos ||
      (scheme != "http" && scheme != "https" && scheme != "file"))
    throw Error(ErrorKind::Usage, "mirror '" + mirror +
                                      "' is not an http://, https:// or file:// URL (or an "
                                      "absolute directory)");
  return m;
}

long download_deadline_ms(const FetchOptions& opts, std::optional<std::uint64_t> pinned_bytes,
                          std::int64_t spent_ms) {
  if (!pinned_bytes)
    return static_cast<long>(std::max<std::int64_t>(0, opts.download_timeout_ms - spent_ms));
  const std::uint64_t expected_bytes = *pinned_bytes;
  std::uint64_t rate = static_cast<std::uint64_t>(std::max(1L, opts.download_min_rate));
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(std::numeric_limits<long>::max());
  if (expected_bytes / rate >= kMax / 1000) return std::numeric_limits<long>::max();
  std::uint64_t scaled = expected_bytes / rate * 1000 + expected_bytes % rate * 1000 / rate;
  std::uint64_t total = static_cast<std::uint64_t>(std::max(0L, opts.download_timeout_ms)) + scaled;
  return static_cast<long>(std::min(total, kMax));
}

namespace {

enum class Fault { None, Mirror, BadBytes };  // BadBytes: integrity failure, mirror distrusted

struct Context {
  const FetchOptions& opts;
  const FetchDeps& deps;
  fs::path dest;
  std::vector<std::string> mirrors;
  transport::RetryPolicy policy;
  std::mutex mu;
  std::vector<MirrorFailure> failures;
  format::Index index;                   // the trusted index, once fetched
  std::string index_url;         // where it came from, for messages
  std::string index_json;        // its bytes
  std::int64_t deadline_ms = 0;  // of the whole fetch, on now()'s clock
  TrustAnchor anchor;
  // Under TUF: the trusted target of each archive to fetch, by file name, and whether the
  // repository stores targets under hash-prefixed names (consistent snapshots).
  std::map<std::string, tuf::TargetFile> tuf_archives;
  bool tuf_consistent = false;
  std::atomic<std::uint64_t> bytes_downloaded{0};  // verified downloads (FetchResult)

  Context(const FetchOptions& o, const FetchDeps& d) : opts(o), deps(d) {}
  bool tuf() const { return anchor.kind == TrustAnchor::Kind::TufRoot; }

  std::int64_t now() const {
    if (deps.now_ms) return deps.now_ms();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  long remaining_ms() const {
    return static_cast<long>(std::max<std::int64_t>(0, deadline_ms - now()));
  }
  // What is left of the time of a file only a bound limits, on a mirror first asked for it at
  // `started_ms` (RetryLoop::file_budget_ms).
  std::function<long()> unpinned_budget(std::int64_t started_ms) const {
    return
        [this, started_ms] { return download_deadline_ms(opts, std::nullopt, now() - started_ms); };
  }
  // Ends the fetch once its deadline has passed, naming it, `doing` and every failure so far.
  void check_deadline(const std::string& doing) {
    // Passed within the transport's slack too: a request that curl ended a millisecond before
    // the command's deadline by this clock ended at it (http_transport.hpp, kDeadlineSlackMs).
    if (now() + transport::kDeadlineSlackMs < deadline_ms) return;
    std::ostringstream msg;
    msg << "kiln fetch passed its deadline of " << opts.timeout_ms
        << " ms (--timeout, FetchOptions::timeout_ms) while " << doing;
    {
      std::lock_guard<std::mutex> g(mu);
      for (const auto& f : failures) msg << "\n  " << f.mirror << ": " << f.url << ": " << f.what;
    }
    msg << "\nNothing unverified was kept in " << dest.string()
        << "; raise --timeout, or put a faster mirror first.";
    throw Error(ErrorKind::Network, msg.str());
  }

  void log(const std::string& line) {
    if (!opts.log) return;
    std::lock_guard<std::mutex> g(mu);
    opts.log(line);
  }
  // `bad_bytes`: the mirror served bytes that failed verification (it is distrusted), as opposed
  // to not serving them; FailureTally decides the kind of a file from the flags.
  // `not_found`: the mirror answered that the file is not there (MirrorFailure::not_found).
  void fail(const std::string& mirror, const std::string& url, const std::string& what,
            bool bad_bytes = false, const std::string& attack = "", bool not_found = false) {
    {
      std::lock_guard<std::mutex> g(mu);
      failures.push_back({mirror, url, what, bad_bytes, attack, not_found});
    }
    log("mirror " + mirror + ": " + url + ": " + what);
  }
  // A request for `url` with its deadline (download_deadline_ms): `pinned_bytes` its stated
  // size, or nullopt when only a bound limits it; `started_ms` (now()'s clock) when this mirror
  // was first asked for the file.
  transport::TransferRequest request(const std::string& url, std::optional<std::uint64_t> pinned_bytes,
                          std::int64_t started_ms) {
    check_deadline("requesting " + url);
    transport::TransferRequest r;
    r.url = url;
    // At least 1 ms: 0 would mean "no deadline" to the transport.
    r.total_timeout_ms = std::max(
        1L, std::min(download_deadline_ms(opts, pinned_bytes, now() - started_ms), remaining_ms()));
    r.connect_timeout_ms = opts.connect_timeout_ms;
    r.low_speed_bytes = opts.low_speed_bytes;
    r.low_speed_seconds = opts.low_speed_seconds;
    r.ca_bundle = opts.ca_bundle;
    return r;
  }
};

// The one retry loop (verified_download.hpp) for requests of `url` on `mirror`: every failed
// attempt is recorded, backoff sleeps are capped by the whole fetch's deadline, and once that
// has passed the fetch ends naming `doing` and the URL.
RetryLoop retry_loop(Context& cx, const std::string& mirror, const std::string& url,
                     const std::string& doing) {
  RetryLoop loop;
  loop.transport = cx.deps.transport;
  loop.policy = cx.policy;
  loop.sleep_ms = cx.deps.sleep_ms;
  loop.on_failure = [&cx, mirror, url, doing](const transport::TransferResult& r, const transport::RetryDecision& d,
                                              int) {
    cx.fail(mirror, url,
            describe(r) + (d.retry ? " (retrying in " + std::to_string(d.delay_ms) + " ms)" : ""),
            false, "", !d.retry && error_kind(r) == ErrorKind::NotFound);
    cx.check_deadline(doing + url);
  };
  loop.remaining_ms = [&cx] { return cx.remaining_ms(); };
  return loop;
}

// What every mirror's failure to serve one file adds up to, decided from what each failure was
// (MirrorFailure's flags), never from its words: the one rule for the kind of "no mirror served
// <file>". A failure that was retried counts as a network one.
struct FailureTally {
  bool any = false;
  bool all_bad_bytes = true;   // every mirror served bytes that failed verification
  bool missing_or_bad = true;  // none failed but by not having the file or by bad bytes
  bool any_not_found = false;
  void add(const MirrorFailure& f) {
    any = true;
    if (!f.bad_bytes) all_bad_bytes = false;
    if (!f.bad_bytes && !f.not_found) missing_or_bad = false;
    if (f.not_found) any_not_found = true;
  }
  // The release is not where it was looked for: no mirror has it, or those that had it served
  // other bytes. A retry would not help; another mirror or another release would.
  bool not_found() const { return any_not_found && missing_or_bad; }
  // For a file whose verification failures carry no further verdict (an archive, the
  // description): Integrity when every mirror served bad bytes.
  ErrorKind kind() const {
    if (any && all_bad_bytes) return ErrorKind::Integrity;
    return not_found() ? ErrorKind::NotFound : ErrorKind::Network;
  }
};

const std::string& required_package(const FetchOptions& opts) {
  if (opts.package.empty())
    throw Error(ErrorKind::Usage,
                "no package named: a fetch asks for <package>-<version>-index.json "
                "(kiln fetch --package NAME, or --source PROJECT)");
  if (!format::is_package_name(opts.package))
    throw Error(ErrorKind::Usage, "'" + opts.package + "': " + format::kPackageNameRule)
        .with("package", opts.package);
  return opts.package;
}

const std::string& required_version(const FetchOptions& opts) {
  if (opts.version.empty())
    throw Error(ErrorKind::Usage, "no version of package " + opts.package +
                                      " named (kiln fetch --version V, or --source PROJECT)");
  if (!format::is_package_version(opts.version))
    throw Error(ErrorKind::Usage, "'" + opts.version + "' is not MAJOR.MINOR.PATCH[-prerelease]")
        .with("version", opts.version);
  return opts.version;
}

struct TrustedIndex {
  format::Index index;
  std::string mirror;
  std::string url;  // where the index was read
};

TrustedIndex fetch_index(Context& cx, const std::string& package, const std::string& version) {
  const std::string& pin = cx.anchor.value;
  std::string name = format::index_file_name(package, version);
  bool only_bad_bytes = true;
  std::string mismatch;
  if (const auto& earlier = cx.opts.index; earlier && io::sha256_hex(earlier->json) == pin) {
    TrustedIndex t{format::parse_index(earlier->json, earlier->url), earlier->mirror, earlier->url};
    if (t.index.package == package && t.index.package_version == version) {
      cx.log("index " + earlier->url + ": fetched already, SHA-256 matches the pin");
      cx.index_json = earlier->json;
      return t;
    }
  }
  for (const auto& mirror : cx.mirrors) {
    if (transport::is_mirror_bad(mirror)) {
      cx.fail(mirror, mirror + "/" + name, "skipped: served bytes that failed verification earlier",
              true);
      continue;
    }
    std::string url = mirror + "/" + name;
    std::string body;
    bool too_big = false;
    // Only its 16 MiB bound limits the index: every attempt on this mirror shares one budget.
    const std::int64_t started = cx.now();
    RetryLoop loop = retry_loop(cx, mirror, url, "fetching ");
    loop.file_budget_ms = cx.unpinned_budget(started);
    transport::TransferResult r = get_with_retries(
        loop, [&] { return cx.request(url, std::nullopt, started); },
        [&] {
          body.clear();
          too_big = false;
        },
        [&](const char* d, std::size_t n) {
          if (body.size() + n > kMaxIndexBytes) return !(too_big = true);
          body.append(d, n);
          return true;
        });
    bool ok = r.status == transport::TransferStatus::Ok;
    if (too_big) {
      cx.fail(mirror, url,
              "index larger than " + std::to_string(kMaxIndexBytes) + " bytes: refused", true);
      transport::mark_mirror_bad(mirror);
      continue;
    }
    if (!ok) {
      only_bad_bytes = false;
      continue;
    }
    std::string got = io::sha256_hex(body);
    if (got != pin) {
      mismatch = "index SHA-256 mismatch: pinned " + pin + ", served " + got;
      cx.fail(mirror, url, mismatch, true);
      transport::mark_mirror_bad(mirror);
      continue;
    }
    TrustedIndex t{format::parse_index(body, url), mirror, url};
    if (t.index.package != package)
      throw Error(ErrorKind::Stale, url +
                                        " matches the pinned digest but is the index of package " +
                                        t.index.package + ", not " + package);
    if (t.index.package_version != version)
      throw Error(ErrorKind::Stale, url +
                                        " matches the pinned digest but is the index of release " +
                                        t.index.package_version + ", not " + version);
    cx.log("index " + url + ": SHA-256 matches the pin");
    cx.index_json = std::move(body);
    return t;
  }
  std::ostringstream msg;
  msg << "no mirror served a trusted index " << name << ":";
  FailureTally tally;
  for (const auto& f : cx.failures) {
    msg << "\n  " << f.mirror << ": " << f.url << ": " << f.what;
    tally.add(f);
  }
  if (only_bad_bytes && !mismatch.empty()) {
    msg << "\nThe pinned digest comes from " << cx.anchor.source << "; check it belongs to release "
        << version;
    throw Error(ErrorKind::Integrity, msg.str());
  }
  if (tally.not_found()) {
    msg << "\nRelease " << package << " " << version
        << " is not on these mirrors: check --package and --version, or add a mirror that "
           "holds it (--mirror, KILN_MIRRORS).";
    throw Error(ErrorKind::NotFound, msg.str()).with("file", name);
  }
  throw Error(ErrorKind::Network, msg.str());
}

// The TUF client's requests through the fetch's transport, deadlines and retry rule (the one
// retry loop). "Not there" (404, 403, a missing file) is an answer, not a failure: the root
// chain ends on one. Other failures and too many bytes are tuf::Errors, as from CurlFetcher.
class TransportFetcher final : public tuf::Fetcher {
 public:
  TransportFetcher(Context& cx, std::string mirror) : cx_(cx), mirror_(std::move(mirror)) {}

  // Metadata: only a bound limits it (download_deadline_ms's budget per file and mirror).
  std::optional<std::string> get(const std::string& url, std::size_t max_bytes) override {
    missing_metadata_.clear();
    std::optional<std::string> body = get_bounded(url, max_bytes, false);
    if (!body) missing_metadata_ = url;
    return body;
  }
  // The metadata file the last request found missing; empty when it was served or failed
  // otherwise. The client stops on a missing timestamp, snapshot or targets (not on the root
  // after the newest: that one ends the chain), so when it gives up as unreachable right after
  // one, the mirror is not a TUF repository at all, or an incomplete one.
  const std::string& missing_metadata() const { return missing_metadata_; }
  // A target of known length (the index): its deadline scales with that length.
  std::optional<std::string> get_target(const std::string& url, std::size_t length) {
    return get_bounded(url, length, true);
  }

  // Targets are downloaded through download_verified, never here; bounded in memory.
  bool stream(const std::string& url, std::size_t max_bytes,
              const std::function<bool(const char*, std::size_t)>& sink) override {
    std::optional<std::string> body = get(url, max_bytes);
    if (!body) return false;
    if (!sink(body->data(), body->size()))
      throw Error(ErrorKind::Io, url + ": writing the download failed");
    return true;
  }

 private:
  std::optional<std::string> get_bounded(const std::string& url, std::size_t max_bytes,
                                         bool size_pinned) {
    RetryLoop loop;
    loop.transport = cx_.deps.transport;
    loop.policy = cx_.policy;
    loop.sleep_ms = cx_.deps.sleep_ms;
    loop.remaining_ms = [this] { return cx_.remaining_ms(); };
    const std::int64_t started = cx_.now();
    if (!size_pinned) loop.file_budget_ms = cx_.unpinned_budget(started);
    const std::optional<std::uint64_t> pinned =
        size_pinned ? std::optional<std::uint64_t>(max_bytes) : std::nullopt;
    loop.on_failure = [this, url](const transport::TransferResult& r, const transport::RetryDecision& d, int) {
      if (d.retry)
        cx_.log("mirror " + mirror_ + ": " + url + ": " + describe(r) + " (retrying in " +
                std::to_string(d.delay_ms) + " ms)");
      cx_.check_deadline("fetching " + url);
    };
    std::string body;
    bool too_big = false;
    transport::TransferResult r = get_with_retries(
        loop, [&] { return cx_.request(url, pinned, started); },
        [&] {
          body.clear();
          too_big = false;
        },
        [&](const char* d, std::size_t n) {
          if (body.size() + n > max_bytes) return !(too_big = true);
          body.append(d, n);
          return true;
        });
    if (too_big)
      throw tuf::Error(tuf::Attack::TooLarge, url + ": more than " + std::to_string(max_bytes) +
                                                  " bytes served, the bound for this file");
    if (r.status == transport::TransferStatus::Ok) return body;
    // Not there is an answer; TUF also reads 403 so (a bucket that hides what it lacks).
    if (transport::error_kind(r) == ErrorKind::NotFound ||
        (r.status == transport::TransferStatus::Http && r.http_status == 403))
      return std::nullopt;
    throw tuf::Error(tuf::Attack::Network, url + ": " + describe(r));
  }

  Context& cx_;
  std::string mirror_;
  std::string missing_metadata_;
};

// Whether `mirror` serves the plain index `name` at its top, as a mirror read through a pinned
// digest does: one request, no retries, the bytes dropped. Only asked after a TUF refresh found
// no metadata there, to say which mistake it was.
bool serves_plain_index(Context& cx, const std::string& mirror, const std::string& name) {
  std::size_t got = 0;
  transport::TransferResult r = cx.deps.transport->get(cx.request(mirror + "/" + name, std::nullopt, cx.now()),
                                            [&](const char*, std::size_t n) {
                                              got += n;
                                              return got <= kMaxIndexBytes;
                                            });
  return r.status == transport::TransferStatus::Ok;
}

std::string short_hex(const std::string& hex) { return hex.substr(0, 12) + "..."; }

// The bytes of FetchOptions::index when they are the target `name` this refresh's targets
// metadata lists (length and every hash); nullopt otherwise.
std::optional<std::string> reusable_index(Context& cx, const tuf::TargetFile& info,
                                          const std::string& name) {
  if (!cx.opts.index) return std::nullopt;
  try {
    tuf::verify_length_and_hashes(cx.opts.index->json, info.length, info.hashes,
                                  tuf::Attack::TargetMismatch, "target " + name);
  } catch (const tuf::Error&) {
    return std::nullopt;  // not these bytes: download the index
  }
  cx.log("index " + cx.opts.index->url + ": fetched already");
  return cx.opts.index->json;
}

// The index through TUF: per mirror, refresh <mirror>/metadata into the root's metadata
// directory (under its lock), look the index up as a target, download it bounded by its length
// and check every hash; then the archives of `targets` are looked up too, so each is downloaded
// against the targets metadata. A repository refused for an attack (every tuf::Error but an
// unreachable mirror or a missing target) distrusts the mirror.
TrustedIndex fetch_index_tuf(Context& cx, const std::string& package, const std::string& version,
                             const std::vector<std::string>& targets) {
  const std::string name = format::index_file_name(package, version);
  if (cx.opts.tuf_metadata_dir.empty())
    throw Error(ErrorKind::Usage,
                "a TUF root is the trust anchor but no metadata directory was given "
                "(FetchOptions::tuf_metadata_dir: the cache directory's tuf/)");
  const std::string anchor_root = read_anchor_root(cx.anchor);
  const fs::path md = tuf_metadata_dir(cx.opts.tuf_metadata_dir, anchor_root);
  // Read before the directory is prepared: its files' times are those of earlier accepts.
  const ExpiryTime when =
      expiry_time(md, cx.opts.tuf_clock ? cx.opts.tuf_clock() : std::time(nullptr));
  const std::time_t now = when.at;
  if (auto replaced = prepare_metadata_dir(md, anchor_root)) cx.log(*replaced);
  std::optional<tuf::Error> first_attack;
  bool no_metadata = false;  // a mirror answered without TUF metadata
  for (const auto& mirror : cx.mirrors) {
    std::string metadata_url = mirror + "/" + kTufMetadataDir;
    if (transport::is_mirror_bad(mirror)) {
      cx.fail(mirror, metadata_url, "skipped: served bytes that failed verification earlier", true);
      continue;
    }
    TransportFetcher fetcher(cx, mirror);
    try {
      tuf::UpdaterOptions uo;
      uo.metadata_dir = md;
      uo.metadata_url = metadata_url;
      uo.keep_root_history = true;  // the chain a bundle carries (kiln bundle)
      tuf::Updater updater(uo, fetcher, now);
      updater.refresh();
      const tuf::TrustedSet& trusted = updater.trusted();
      bool consistent = trusted.root().consistent_snapshot;
      std::optional<tuf::TargetFile> info = updater.get_targetinfo(name);
      if (!info)
        throw tuf::Error(tuf::Attack::TargetNotFound,
                         "no trusted targets role of " + metadata_url + " lists " + name +
                             ": release " + package + " " + version + " is not in this repository");
      if (static_cast<std::uint64_t>(info->length) > kMaxIndexBytes)
        throw tuf::Error(tuf::Attack::TooLarge,
                         "target " + name + ": length " + std::to_string(info->length) +
                             " is more than the " + std::to_string(kMaxIndexBytes) +
                             " bytes an index may have");
      std::string url = tuf_target_url(mirror, *info, consistent);
      std::optional<std::string> body = reusable_index(cx, *info, name);
      if (body)
        url = cx.opts.index->url;
      else
        body = fetcher.get_target(url, static_cast<std::size_t>(info->length));
      if (!body)
        throw tuf::Error(tuf::Attack::TargetNotFound,
                         url + ": not on the mirror, though the targets metadata lists " + name);
      tuf::verify_length_and_hashes(*body, info->length, info->hashes, tuf::Attack::TargetMismatch,
                                    "target " + name);
      TrustedIndex t{format::parse_index(*body, url), mirror, url};
      if (t.index.package != package)
        throw Error(ErrorKind::Stale, url + " is the target " + name +
                                          " but holds the index of package " + t.index.package +
                                          ", not " + package);
      if (t.index.package_version != version)
        throw Error(ErrorKind::Stale, url + " is the target " + name +
                                          " but holds the index of release " +
                                          t.index.package_version + ", not " + version);
      // Every archive of each asked target: one per toolkit (index format 5), of which the
      // driver's rule picks later. A target with none is NotFound, reported by the caller.
      for (const auto& target : targets)
        for (const format::IndexEntry& e : t.index.archives)
          if (e.target == target)
            cx.tuf_archives[e.file] = trusted_pinned_target(
                updater, format::IndexFile{e.file, e.size, e.sha256}, metadata_url);
      if (cx.opts.with_description && t.index.description)
        cx.tuf_archives[t.index.description->file] =
            trusted_pinned_target(updater, *t.index.description, metadata_url);
      cx.tuf_consistent = consistent;
      cx.index_json = std::move(*body);
      cx.log("index " + url + ": length and hashes match the targets metadata (root v" +
             std::to_string(trusted.root().version) + ", timestamp v" +
             std::to_string(trusted.timestamp()->version) + ", sha256 " +
             short_hex(info->hashes.at("sha256")) + ")");
      return t;
    } catch (const tuf::Error& refused) {
      const tuf::Error e = explain_clock(refused, when);
      bool bad_bytes = e.kind() != ErrorKind::Network && e.kind() != ErrorKind::NotFound;
      std::string what = e.what();
      bool not_found = e.kind() == ErrorKind::NotFound;
      if (e.attack() == tuf::Attack::Network && !fetcher.missing_metadata().empty()) {
        // Not unreachable: it answered, without the metadata a TUF repository has.
        not_found = true;
        no_metadata = true;
        what = fetcher.missing_metadata() + ": not found: " + mirror + " serves no TUF metadata";
        if (serves_plain_index(cx, mirror, name))
          what += "; it serves " + mirror + "/" + name + " as a plain mirror does";
      }
      // An unreachable mirror attacked nothing: its failure names no attack.
      cx.fail(mirror, metadata_url, what, bad_bytes,
              e.attack() == tuf::Attack::Network ? "" : tuf::attack_id(e.attack()), not_found);
      if (bad_bytes) {
        transport::mark_mirror_bad(mirror);
        if (!first_attack) first_attack = e;
      }
    }
  }
  std::ostringstream msg;
  msg << "no mirror served a trusted index " << name << " through TUF (root " << cx.anchor.value
      << ", " << cx.anchor.source << "):";
  bool only_bad_bytes = true;
  FailureTally tally;
  for (const auto& f : cx.failures) {
    msg << "\n  " << f.mirror << ": " << f.url << ": " << f.what;
    if (!f.bad_bytes) only_bad_bytes = false;
    tally.add(f);
  }
  if (no_metadata)
    msg << "\nA TUF root (" << cx.anchor.source
        << ") reads a TUF repository (<mirror>/metadata and <mirror>/targets, as `kiln "
           "tuf-repo` writes them): point --mirror at one, or fetch from a plain mirror with "
           "the index's pinned digest (--index-sha256, KILN_INDEX_SHA256) instead of the root.";
  std::vector<ErrorField> fields;
  if (first_attack) fields.push_back({"attack", tuf::attack_id(first_attack->attack())});
  fields.push_back({"file", name});
  if (first_attack && only_bad_bytes) {
    msg << "\nThe repository's metadata was refused: nothing from it was used.";
    throw Error(first_attack->kind(), msg.str(), std::move(fields));
  }
  throw Error(tally.not_found() ? ErrorKind::NotFound : ErrorKind::Network, msg.str(),
              std::move(fields));
}

// Removes <file>.tmp.* left by a writer that died. Safe only while holding the file's lock.
// Downloads one archive from one mirror into <dest>/<file> through the one verified download;
// true once renamed into place. Bytes that are not the pinned ones distrust the mirror. Under
// TUF the archive is the target <mirror>/targets/[<sha256>.]<file>, checked against its length
// and every hash of the targets metadata (which agrees with the index entry: fetch_index_tuf).
// `memory` non-null: the verified bytes go there instead, and nothing is written.
bool download_from(Context& cx, const std::string& mirror, const format::IndexEntry& e,
                   std::string* memory = nullptr) {
  const tuf::TargetFile* info = cx.tuf() ? &cx.tuf_archives.at(e.file) : nullptr;
  std::string url = info ? tuf_target_url(mirror, *info, cx.tuf_consistent) : mirror + "/" + e.file;
  DownloadExpect expect =
      info ? tuf_download_expect(*info) : DownloadExpect{e.sha256, e.size, e.size};
  cx.log("downloading " + url + " (" + std::to_string(e.size) + " bytes)");
  RetryLoop loop = retry_loop(cx, mirror, url, "downloading ");
  if (cx.opts.progress)
    loop.on_bytes = [&](std::uint64_t n) { cx.opts.progress(e.file, n, e.size); };
  auto request = [&] { return cx.request(url, e.size, cx.now()); };
  DownloadResult d = memory ? download_verified_to_memory(loop, request, e.file, expect, *memory)
                            : download_verified(loop, request, cx.dest / e.file, expect);
  // Under TUF a refusal is worded as the client's own (tuf::Error) and names its attack.
  auto refuse = [&](tuf::Attack attack, const std::string& tuf_what, const std::string& what) {
    if (info)
      cx.fail(mirror, url, std::string(tuf::Error(attack, tuf_what).what()) + "; mirror distrusted",
              true, tuf::attack_id(attack));
    else
      cx.fail(mirror, url, what, true);
  };
  switch (d.status) {
    case DownloadStatus::Verified:
      cx.bytes_downloaded.fetch_add(d.bytes, std::memory_order_relaxed);
      return true;
    case DownloadStatus::TransferFailed:
      return false;
    case DownloadStatus::WriteFailed:
      throw Error(ErrorKind::Io, d.write_error);
    case DownloadStatus::TooBig:
      refuse(tuf::Attack::TooLarge,
             url + ": more than the " + std::to_string(e.size) +
                 " bytes the targets metadata lists: aborted",
             "served more than the " + std::to_string(e.size) +
                 " bytes the index lists: aborted, mirror distrusted");
      break;
    case DownloadStatus::SizeMismatch:
      refuse(tuf::Attack::TargetMismatch,
             "target " + e.file + ": length is " + std::to_string(d.bytes) +
                 " bytes, metadata says " + std::to_string(e.size),
             "size mismatch: index lists " + std::to_string(e.size) + " bytes, served " +
                 std::to_string(d.bytes) + "; mirror distrusted");
      break;
    case DownloadStatus::DigestMismatch:
      refuse(tuf::Attack::TargetMismatch,
             "target " + e.file + ": " +
                 (d.other_mismatch.empty()
                      ? "sha256 is " + d.sha256 + ", metadata says " + expect.sha256
                      : d.other_mismatch),
             "SHA-256 mismatch: index pins " + e.sha256 + ", served " + d.sha256 +
                 "; mirror distrusted");
      break;
  }
  transport::mark_mirror_bad(mirror);
  return false;
}

// The lock every writer of <dest>/<file> holds (store_file_lock_path), within the deadline; what
// a killed writer of the file left is removed once it is held.
io::FileLock lock_store_file(Context& cx, const std::string& file) {
  std::vector<fs::path> removed;
  try {
    // Said only when another process holds it: a lock taken at once is no wait.
    io::FileLock lock = kiln::store::lock_store_file(
        cx.dest, file,
        std::chrono::milliseconds(std::min(cx.opts.lock_timeout_ms, cx.remaining_ms())), &removed,
        [&] { cx.log("waiting for the lock on " + file + ": another process holds it"); });
    for (const auto& p : removed)
      cx.log("removed " + p.string() + " left by an interrupted download");
    return lock;
  } catch (const Error&) {
    cx.check_deadline("waiting for the lock on " + file);
    throw;
  }
}

// The error when no mirror served the archive of `e`: every mirror's failure for that file.
Error no_mirror_served(Context& cx, const format::IndexEntry& e) {
  std::ostringstream msg;
  msg << "could not fetch " << e.file << " (" << e.target << ") from any mirror:";
  FailureTally tally;
  std::string attack;
  {
    std::lock_guard<std::mutex> g(cx.mu);
    for (const auto& f : cx.failures) {
      if (f.url.size() < e.file.size() ||
          f.url.compare(f.url.size() - e.file.size(), e.file.size(), e.file) != 0)
        continue;
      msg << "\n  " << f.mirror << ": " << f.url << ": " << f.what;
      tally.add(f);
      if (attack.empty()) attack = f.attack;
    }
  }
  if (cx.dest.empty())
    msg << "\nNothing was written (the archive was fetched into memory)";
  else
    msg << "\nNothing unverified was kept in " << cx.dest.string();
  msg << "; add a working mirror with --mirror / KILN_MIRRORS, or copy the archive there with "
         "`kiln fetch --mirror file:///path/to/release`.";
  std::vector<ErrorField> fields{
      {"file", e.file}, {"target", e.target}, {"path", cx.dest.string()}};
  if (!attack.empty()) fields.insert(fields.begin(), {"attack", attack});
  return Error(tally.kind(), msg.str(), std::move(fields));
}

struct ArchiveOutcome {
  std::string store_dir;
  bool installed = false;
  bool present = false;
  std::exception_ptr error;
};

ArchiveOutcome fetch_archive(Context& cx, const format::IndexEntry& e) {
  ArchiveOutcome out;
  const std::string suffix = ".tar.zst";
  std::string stem = e.file.size() > suffix.size() && e.file.compare(e.file.size() - suffix.size(),
                                                                     suffix.size(), suffix) == 0
                         ? e.file.substr(0, e.file.size() - suffix.size())
                         : e.file;
  out.store_dir = (cx.dest / stem).string();
  if (cx.deps.verified_present(cx.dest, stem)) {
    out.present = true;
    return out;
  }
  io::FileLock lock = lock_store_file(cx, e.file);
  // Another process may have installed it while we waited.
  if (cx.deps.verified_present(cx.dest, stem)) {
    out.present = true;
    return out;
  }
  std::error_code ec;
  for (const auto& mirror : cx.mirrors) {
    if (transport::is_mirror_bad(mirror)) {
      cx.fail(mirror, mirror + "/" + e.file,
              "skipped: served bytes that failed verification earlier", true);
      continue;
    }
    if (!download_from(cx, mirror, e)) continue;
    fs::path archive = cx.dest / e.file;
    cx.log("verified " + e.file + " (SHA-256 " + e.sha256.substr(0, 12) + "...), unpacking");
    try {
      // The digest proves these are the bytes the index meant, not that the index filed them
      // under the right target and release: the manifest decides, before anything is unpacked.
      if (std::optional<format::Manifest> m = cx.deps.read_manifest(archive))
        store::require_manifest_matches_index(*m, e, cx.index, mirror + "/" + e.file, cx.index_url);
      out.store_dir = cx.deps.install(archive, cx.dest, e.sha256);
    } catch (...) {
      fs::remove(archive, ec);
      throw;
    }
    // The unpacked store directory is the verified copy; keeping the archive would double the
    // disk a cache needs.
    if (!cx.deps.keep_archives) fs::remove(archive, ec);
    out.installed = true;
    cx.log("installed " + out.store_dir);
    return out;
  }
  throw no_mirror_served(cx, e);
}

}  // namespace

// The archive of `target` to fetch: of the index's archives for it, the newest toolkit's whose
// code a driver of `driver` runs (0: not known, the newest). end() when the index has none for
// the target; Error{Unsupported} naming both versions when the driver runs none of them.
static std::vector<format::IndexEntry>::const_iterator archive_for(const format::Index& idx,
                                                            const std::string& target, int driver,
                                                            const std::string& package,
                                                            const std::string& version) {
  auto best = idx.archives.end();
  std::vector<std::string> refused;
  for (auto it = idx.archives.begin(); it != idx.archives.end(); ++it) {
    if (it->target != target) continue;
    auto t = format::parse_target(it->target);
    if (driver > 0 && t)
      if (auto why = format::driver_refuses(std::string_view(it->cuda_version),
                                            t->kind == format::Target::Kind::Ptx, driver)) {
        refused.push_back(it->file + ": " + *why);
        continue;
      }
    const auto v = format::parse_cuda_version(it->cuda_version);
    const auto b = best == idx.archives.end() ? std::nullopt
                                              : format::parse_cuda_version(best->cuda_version);
    if (best == idx.archives.end() || (v && b && *b < *v)) best = it;
  }
  if (best == idx.archives.end() && !refused.empty())
    throw Error(ErrorKind::Unsupported,
                "release " + package + " " + version + " has no archive for " + target +
                    " that this driver runs: " + util::join(refused, "; "),
                {{"driver", format::driver_cuda_version(driver).str()}, {"target", target}});
  return best;
}

// The checks and state every fetch starts from, in one place for fetch_index_targets and
// fetch_targets: the deadline options (each > 0) and the whole-command deadline, the mirror list
// (`what` names what was to be fetched, for the error), and the pinned index digest.
// The description the trusted index pins, from the first mirror that serves the pinned bytes
// (download_from: verified, renamed into the store). Returns the file written.
std::string fetch_description(Context& cx, const TrustedIndex& ti) {
  const format::IndexFile& d = *ti.index.description;
  format::IndexEntry pinned{d.file, "", "", d.size, d.sha256};
  io::FileLock lock = lock_store_file(cx, d.file);
  for (const auto& mirror : cx.mirrors) {
    if (transport::is_mirror_bad(mirror)) continue;
    if (download_from(cx, mirror, pinned)) {
      cx.log("verified " + d.file + " (SHA-256 " + d.sha256.substr(0, 12) + "...)");
      return (cx.dest / d.file).string();
    }
  }
  std::string tried;
  FailureTally tally;
  for (const auto& f : cx.failures)
    if (f.url.size() >= d.file.size() &&
        f.url.compare(f.url.size() - d.file.size(), d.file.size(), d.file) == 0) {
      tried += "\n  " + f.mirror + ": " + f.url + ": " + f.what;
      tally.add(f);
    }
  throw Error(tally.kind(), "no mirror served the package description " + d.file + " that " +
                                ti.url + " pins:" + tried)
      .with("file", d.file);
}

void start_deadline(Context& cx, const FetchOptions& opts) {
  for (auto [name, value] :
       {std::pair<const char*, long>{"timeout_ms (--timeout)", opts.timeout_ms},
        {"download_timeout_ms (--download-timeout)", opts.download_timeout_ms},
        {"download_min_rate (--min-rate)", opts.download_min_rate}})
    if (value <= 0)
      throw Error(ErrorKind::Usage, std::string("fetch option ") + name + " is " +
                                        std::to_string(value) + ": it must be greater than 0");
  cx.deadline_ms = cx.now() + opts.timeout_ms;
}

void set_mirrors(Context& cx, const FetchOptions& opts, const std::string& what) {
  for (const auto& m : opts.mirrors.empty() ? default_mirrors() : opts.mirrors)
    cx.mirrors.push_back(normalise_mirror(m));
  if (cx.mirrors.empty())
    throw Error(ErrorKind::Usage, "no mirror configured to fetch " + what +
                                      " from: pass --mirror URL or set KILN_MIRRORS");
}

// `release`: "<package> <version>", for the messages.
void set_anchor(Context& cx, const FetchOptions& opts, const std::string& release) {
  std::error_code ec;
  bool installed =
      !opts.installed_tuf_root.empty() && fs::is_regular_file(opts.installed_tuf_root, ec);
  cx.anchor = choose_trust_anchor(opts, default_index_sha256(), installed, release);
  materialize_anchor(cx.anchor, opts.tuf_metadata_dir);
}

TrustedIndex fetch_trusted_index(Context& cx, const std::string& package,
                                 const std::string& version,
                                 const std::vector<std::string>& targets) {
  if (cx.tuf()) return fetch_index_tuf(cx, package, version, targets);
  return fetch_index(cx, package, version);
}

FetchedIndex fetch_release_index_with(const FetchOptions& opts, const FetchDeps& deps) {
  Context cx(opts, deps);
  // The same whole-command deadline as fetch_targets: the index alone must not drip forever.
  start_deadline(cx, opts);
  cx.policy = transport::RetryPolicy{opts.max_retries, opts.retry_base_ms, opts.retry_cap_ms};
  const std::string& package = required_package(opts);
  const std::string& version = required_version(opts);
  if (opts.offline)
    throw Error(ErrorKind::NotFound, "offline: the index of release " + package + " " + version +
                                         " was not fetched (no mirror is contacted offline)");
  set_mirrors(cx, opts, "the index of release " + package + " " + version);
  set_anchor(cx, opts, package + " " + version);
  TrustedIndex ti = fetch_trusted_index(cx, package, version, {});
  FetchedIndex out{cx.index_json, ti.mirror, ti.url, {}};
  for (const auto& e : ti.index.archives) out.targets.push_back(e.target);
  return out;
}

FetchResult fetch_targets_with(const FetchOptions& opts, const std::vector<std::string>& targets,
                               const std::string& dest_store, const FetchDeps& deps) {
  Context cx(opts, deps);
  cx.dest = dest_store;
  cx.policy = transport::RetryPolicy{opts.max_retries, opts.retry_base_ms, opts.retry_cap_ms};
  if (targets.empty()) throw Error(ErrorKind::Usage, "no target to fetch");
  start_deadline(cx, opts);
  std::vector<std::string> canon;
  for (const auto& t : targets) {
    auto parsed = format::parse_target(t);
    if (!parsed)
      throw Error(ErrorKind::Usage, "'" + t + "' is not a target (e.g. sm_90a, compute_80)");
    canon.push_back(parsed->str());
  }
  const std::string& package = required_package(opts);
  const std::string& version = required_version(opts);
  if (dest_store.empty()) throw Error(ErrorKind::Usage, "no destination store given");

  FetchResult result;
  // What is already installed needs no index and no network: offline and re-runs end here.
  std::vector<std::string> missing;
  for (const auto& t : canon) {
    std::string stem = format::archive_stem(package, version, kiln::cuda_version(), t);
    if (deps.verified_present(cx.dest, stem))
      result.already_present.push_back((cx.dest / stem).string());
    else
      missing.push_back(t);
  }
  const fs::path described = cx.dest / format::description_file_name(package, version);
  std::error_code present_ec;
  bool want_description = opts.with_description && !fs::exists(described, present_ec);
  if (missing.empty() && (!want_description || opts.offline)) return result;

  std::string joined;
  for (const auto& t : missing) joined += (joined.empty() ? "" : ",") + t;
  if (opts.offline)
    throw Error(ErrorKind::NotFound,
                "offline: the archives of release " + package + " " + version + " for " + joined +
                    " are not in " + dest_store +
                    " and no mirror was contacted. On a connected machine run `kiln fetch "
                    "--package " +
                    package + " --version " + version + " --targets " + joined + " --dest " +
                    dest_store + "`, or unset KILN_OFFLINE.");

  set_mirrors(cx, opts, joined);
  set_anchor(cx, opts, package + " " + version);

  std::error_code ec;
  fs::create_directories(cx.dest, ec);
  if (!ec && access(cx.dest.c_str(), W_OK) != 0) ec = std::error_code(errno, std::generic_category());
  if (ec)
    throw Error(ErrorKind::Io,
                "destination store " + dest_store + " is not a writable directory: " + ec.message(),
                {{"path", dest_store}});

  TrustedIndex ti = fetch_trusted_index(cx, package, version, missing);
  cx.index = ti.index;
  cx.index_url = ti.url;
  std::vector<format::IndexEntry> todo;
  for (const auto& t : missing) {
    auto it = archive_for(ti.index, t, opts.driver, package, version);
    if (it == ti.index.archives.end()) {
      std::string have =
          util::join(ti.index.archives, ", ", [](const format::IndexEntry& e) { return e.target; });
      throw Error(ErrorKind::NotFound, "release " + package + " " + version +
                                           " has no archive for " + t + " (index from " +
                                           ti.mirror + " lists: " + (have.empty() ? "none" : have) +
                                           ")");
    }
    todo.push_back(*it);
  }

  std::vector<ArchiveOutcome> outcomes(todo.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < todo.size();) {
      try {
        outcomes[i] = fetch_archive(cx, todo[i]);
      } catch (...) {
        outcomes[i].error = std::current_exception();
      }
    }
  };
  std::size_t n_threads =
      std::min<std::size_t>(todo.size(), static_cast<std::size_t>(std::max(1, opts.max_parallel)));
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < n_threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  for (auto& o : outcomes) {
    if (o.error) std::rethrow_exception(o.error);
    (o.installed ? result.installed : result.already_present).push_back(o.store_dir);
  }
  if (want_description && ti.index.description) result.description = fetch_description(cx, ti);
  result.failures = cx.failures;
  result.index_json = cx.index_json;
  result.bytes_downloaded = cx.bytes_downloaded.load();
  return result;
}


FetchedArchive fetch_archive_into_memory_with(const FetchOptions& opts, const std::string& target,
                                              const FetchDeps& deps) {
  Context cx(opts, deps);
  cx.policy = transport::RetryPolicy{opts.max_retries, opts.retry_base_ms, opts.retry_cap_ms};
  start_deadline(cx, opts);
  auto parsed = format::parse_target(target);
  if (!parsed)
    throw Error(ErrorKind::Usage, "'" + target + "' is not a target (e.g. sm_90a, compute_80)");
  const std::string canon = parsed->str();
  const std::string& package = required_package(opts);
  const std::string& version = required_version(opts);
  if (opts.offline)
    throw Error(ErrorKind::NotFound, "offline: the archive of release " + package + " " +
                                         version + " for " + canon + " was not fetched");
  set_mirrors(cx, opts, canon);
  set_anchor(cx, opts, package + " " + version);
  TrustedIndex ti = fetch_trusted_index(cx, package, version, {canon});
  cx.index = ti.index;
  cx.index_url = ti.url;
  auto it = archive_for(ti.index, canon, opts.driver, package, version);
  if (it == ti.index.archives.end())
    throw Error(ErrorKind::NotFound, "release " + package + " " + version +
                                         " has no archive for " + canon + " (index from " +
                                         ti.mirror + ")");
  const format::IndexEntry& e = *it;
  for (const auto& mirror : cx.mirrors) {
    if (transport::is_mirror_bad(mirror)) {
      cx.fail(mirror, mirror + "/" + e.file,
              "skipped: served bytes that failed verification earlier", true);
      continue;
    }
    std::string bytes;
    if (!download_from(cx, mirror, e, &bytes)) continue;
    const std::string url = mirror + "/" + e.file;
    cx.log("verified " + e.file + " (SHA-256 " + e.sha256.substr(0, 12) + "...) in memory");
    // The same order as an install: the manifest, first member, decides before the artifacts
    // are used (read_archive_bytes bounds what is unpacked).
    FetchedArchive out;
    out.file = e.file;
    out.url = url;
    out.target = e.target;
    out.members = format::read_archive_bytes(bytes, url);
    if (out.members.empty() || out.members.front().name != "manifest.json")
      throw Error(ErrorKind::Format, url + ": its first member is not manifest.json")
          .with("path", url);
    store::require_manifest_matches_index(
        format::parse_manifest(out.members.front().data, url + "/manifest.json"), e, cx.index,
        url, cx.index_url);
    return out;
  }
  throw no_mirror_served(cx, e);
}


namespace {

// What wants libcurl, for the error when it cannot be loaded (lazy_libs.hpp).
std::string downloading_from(const FetchOptions& opts, const std::string& what) {
  std::string list;
  for (const auto& m : opts.mirrors.empty() ? default_mirrors() : opts.mirrors)
    list += (list.empty() ? "" : " ") + m;
  return "downloading " + what + " from the mirrors " + (list.empty() ? "(none)" : list) +
         " (the mirror tier, kiln fetch)";
}

// libcurl is loaded by the first download, not before: a fetch with no mirror configured stays
// a usage error, and one whose archives are all installed already succeeds without libcurl.
class OnFirstUseTransport final : public transport::Transport {
 public:
  explicit OnFirstUseTransport(std::string needed_for) : needed_for_(std::move(needed_for)) {}
  transport::TransferResult get(const transport::TransferRequest& req, const transport::Sink& sink) override {
    std::call_once(once_, [this] { real_ = transport::make_curl_transport(needed_for_); });
    return real_->get(req, sink);
  }

 private:
  std::string needed_for_;
  std::once_flag once_;
  std::unique_ptr<transport::Transport> real_;
};

}  // namespace

namespace {

// The real dependencies of a fetch: libcurl (never initialised offline), a real sleep, and the
// store's verified-copy check, installer and manifest reader. `what` names what is downloaded,
// for the error when libcurl is missing.
struct RealFetch {
  std::unique_ptr<transport::Transport> transport;
  FetchDeps deps;
  RealFetch(const FetchOptions& opts, const std::string& what) {
    if (!opts.offline)
      transport = std::make_unique<OnFirstUseTransport>(downloading_from(opts, what));
    deps.transport = transport.get();
    deps.sleep_ms = [](long ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
    deps.verified_present = [](const fs::path& store, const std::string& stem) {
      return store::store_has_verified(store, stem);
    };
    deps.install = [](const fs::path& archive, const fs::path& store, const std::string& sha) {
      return store::install_archive(archive, store, sha, {}, store::ArchiveAfterInstall::Remove)
          .directory.string();
    };
    deps.read_manifest = [](const fs::path& archive) { return store::read_leading_manifest(archive); };
  }
};

}  // namespace

FetchResult fetch_targets(const FetchOptions& opts, const std::vector<std::string>& targets,
                          const std::string& dest_store) {
  RealFetch f(opts, "the release index and archives");
  return fetch_targets_with(opts, targets, dest_store, f.deps);
}

FetchedArchive fetch_archive_into_memory(const FetchOptions& opts, const std::string& target) {
  RealFetch f(opts, "the release index and an archive");
  return fetch_archive_into_memory_with(opts, target, f.deps);
}

FetchResult fetch_archive_files(const FetchOptions& opts, const std::vector<std::string>& targets,
                                const std::string& dir) {
  RealFetch f(opts, "the release index and archives");
  f.deps.verified_present = [](const fs::path&, const std::string&) { return false; };
  // The verified archive stays where the download renamed it.
  f.deps.install = [](const fs::path& archive, const fs::path&, const std::string&) {
    return archive.string();
  };
  f.deps.keep_archives = true;
  return fetch_targets_with(opts, targets, dir, f.deps);
}

FetchedIndex fetch_release_index(const FetchOptions& opts) {
  RealFetch f(opts, "the release index");
  return fetch_release_index_with(opts, f.deps);
}

std::vector<std::string> fetch_index_targets(const FetchOptions& opts) {
  return fetch_release_index(opts).targets;
}

std::vector<MirrorProbe> probe_mirrors(const FetchOptions& opts) {
  std::vector<MirrorProbe> out;
  std::vector<std::string> mirrors = opts.mirrors.empty() ? default_mirrors() : opts.mirrors;
  if (opts.offline) {
    for (const auto& m : mirrors) out.push_back({m, "", false, 0, "not probed: offline mode"});
    return out;
  }
  std::unique_ptr<transport::Transport> transport;
  try {
    transport = transport::make_curl_transport("probing the mirrors (kiln doctor)");
  } catch (const Error& e) {
    // No libcurl: every mirror gets the reason, and loading from stores is still judged.
    for (const auto& m : mirrors) out.push_back({m, "", false, 0, e.what()});
    return out;
  }
  const std::string& package = required_package(opts);
  const std::string& version = required_version(opts);
  std::string pin = opts.index_sha256.empty() ? default_index_sha256() : opts.index_sha256;
  std::transform(pin.begin(), pin.end(), pin.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // A TUF mirror serves the index under a hashed name: its timestamp is what doctor asks for.
  bool tuf = false;
  try {
    std::error_code ec;
    tuf = choose_trust_anchor(
              opts, default_index_sha256(),
              !opts.installed_tuf_root.empty() && fs::is_regular_file(opts.installed_tuf_root, ec),
              package + " " + version)
              .kind == TrustAnchor::Kind::TufRoot;
  } catch (const Error&) {
    // No anchor, or two: a fetch says so; the probe only asks for the index.
  }
  for (const auto& raw : mirrors) {
    MirrorProbe p;
    p.mirror = raw;
    try {
      std::string m = normalise_mirror(raw);
      p.url = tuf ? m + "/" + kTufMetadataDir + "/timestamp.json"
                  : m + "/" + format::index_file_name(package, version);
      transport::TransferRequest req;
      req.url = p.url;
      // doctor must answer quickly: a short connect and total timeout, no retries.
      req.connect_timeout_ms = std::min(opts.connect_timeout_ms, 3000L);
      req.total_timeout_ms = 10000;
      req.low_speed_bytes = 1;
      req.low_speed_seconds = 5;
      req.ca_bundle = opts.ca_bundle;
      std::string body;
      transport::TransferResult r = transport->get(req, [&](const char* d, std::size_t n) {
        if (body.size() + n > kMaxIndexBytes) return false;
        body.append(d, n);
        return true;
      });
      p.http_status = r.http_status;
      if (r.status != transport::TransferStatus::Ok) {
        p.detail =
            r.status == transport::TransferStatus::Aborted ? "index larger than the limit" : describe(r);
      } else if (tuf) {
        p.reachable = true;
        p.detail = "TUF timestamp served (" + std::to_string(body.size()) +
                   " bytes); signatures and expiry are checked when fetching";
      } else if (pin.empty()) {
        p.reachable = true;
        p.detail = "index served (" + std::to_string(body.size()) +
                   " bytes); no pinned digest to check it against";
      } else if (std::string got = io::sha256_hex(body); got != pin) {
        p.detail = "index served but its SHA-256 " + got + " differs from the pinned " + pin;
      } else {
        p.reachable = true;
        p.detail = "index served, SHA-256 matches the pin";
      }
    } catch (const Error& e) {
      p.detail = e.what();
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace kiln::fetch
