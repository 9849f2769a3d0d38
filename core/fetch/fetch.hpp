#pragma once
// Verified downloads from trusted mirrors (docs/mirrors.md). A mirror is a plain static file
// server (http, https or file://) holding a release directory as `kiln build --dist` wrote
// it, or, when a TUF root is the trust anchor, a TUF repository as `kiln tuf-repo` writes it
// (docs/tuf.md). The mirror is trusted for availability only: the index is accepted only if
// its SHA-256 matches a pinned digest (or the TUF targets metadata, verified from the root,
// lists its length and hashes), and every archive only if its size and digests match that
// index (and, under TUF, the targets metadata). Downloads stream into a temp file in the
// destination directory while being hashed and are renamed into place only after the digest
// matches.
#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "format/archive.hpp"

namespace kiln::fetch {

// A release's index as a fetch accepted it (fetch_release_index): its bytes, where they came from
// and the targets it lists, in index order.
struct FetchedIndex {
  std::string json;
  std::string mirror;
  std::string url;
  std::vector<std::string> targets;
};

struct FetchOptions {
  // Tried in order. Empty: the list compiled in with -DKILN_DEFAULT_MIRRORS (may be empty).
  std::vector<std::string> mirrors;
  // The package and release to fetch: <package>-<version>-index.json and its archives. Both
  // required (Error{Usage} naming the missing one).
  std::string package;
  std::string version;
  // Hex SHA-256 that pins the release index. Empty: the digest compiled in with
  // -DKILN_TRUSTED_INDEX_SHA256; when none is compiled in either, fetching is refused
  // (Error{Usage}) rather than trusting whatever a mirror serves.
  std::string index_sha256;
  // A TUF root.json file: each mirror is then a TUF repository (<mirror>/metadata,
  // <mirror>/targets) and the index and archives are its targets, verified through
  // tuf::Updater instead of the index pin. Setting both this and index_sha256 is Error{Usage};
  // with neither, `installed_tuf_root` (when that file exists), else the compiled-in pin
  // (tuf_mirror.hpp, choose_trust_anchor).
  std::string tuf_root;
  // The root installed beside libkiln (<prefix>/share/kiln/tuf/root.json, installed_tuf_root()
  // in resolver.hpp); callers fill it. Empty: none.
  std::string installed_tuf_root;
  // Where TUF metadata is kept: <tuf_metadata_dir>/<sha256 of the root file>/ (callers pass
  // <cache dir>/tuf). Required when a TUF root is the anchor.
  std::string tuf_metadata_dir;
  // The time TUF expiry is checked against. Empty: time(). Tests move it; nothing else does.
  std::function<std::time_t()> tuf_clock;
  std::string ca_bundle;  // PEM file for HTTPS; empty: the system store (callers pass
                          // LoaderConfig::ca_bundle, KILN_CA_BUNDLE)
  // The node driver's CUDA version (cuDriverGetVersion's number, 12080 for CUDA 12.8): of a
  // target's archives the newest toolkit's whose code that driver runs is fetched
  // (format/toolkit.hpp, docs/compatibility.md); none runs: Error{Unsupported} naming both
  // versions. 0: not known, the newest toolkit's.
  int driver = 0;
  int max_parallel = 4;   // archives downloading at once
  long connect_timeout_ms = 5000;
  long low_speed_bytes = 1024;    // a transfer slower than this (bytes/s) ...
  long low_speed_seconds = 10;    // ... for this long is aborted as stalled
  int max_retries = 3;            // per mirror, for 5xx, 429 and connection errors
  long retry_base_ms = 500;       // backoff: base * 2^attempt, capped at retry_cap_ms
  long retry_cap_ms = 30000;      // also caps a server's Retry-After
  long lock_timeout_ms = 600000;  // waiting for another process downloading the same archive
  // Deadlines (docs/mirrors.md, "Deadlines"; docs/security.md, "Slow mirrors"), so a mirror
  // dripping bytes just above the low-speed limit cannot hold a fetch for long. A file of
  // known size (an archive: its size from the index or the targets metadata) must arrive within
  //   download_timeout_ms + size * 1000 / download_min_rate ms
  // per request; a file only a bound limits (the index under a pin, TUF metadata) within
  // download_timeout_ms on one mirror, every retry and backoff included. Past that it is
  // abandoned, not retried, and the next mirror is asked. The whole call (lock waits, retries,
  // backoff included) must end within timeout_ms, else Error{Network} naming the deadline.
  // All three must be > 0 (Error{Usage}).
  long timeout_ms = 3600000;         // the whole fetch: 1 h
  long download_timeout_ms = 60000;  // the part of each request's deadline that does not scale
  long download_min_rate = 65536;    // bytes/s: the slowest transfer a deadline allows for
  // true: no name lookup, no socket. Targets already installed in the store are reported as
  // already_present; anything missing throws Error{NotFound} at once, naming what to run.
  bool offline = false;
  // Also install the package's description that the index pins (<name>-<version>.package.json,
  // index format 3) into the store, downloaded and checked like an archive (under TUF, also a
  // target of the metadata). `kiln fetch` asks for it; a loader has its package compiled in.
  bool with_description = false;
  // The release's index from an earlier fetch of this release (fetch_release_index), so that a
  // choice made from it (`kiln fetch --device`) does not download it again. Its bytes are
  // checked as a download's are (against the pin, or the TUF targets metadata of the refresh);
  // bytes that fail that are not used, and the index is downloaded.
  std::optional<FetchedIndex> index;
  // Progress and every fallback with its reason ("retrying in 1000 ms: HTTP 500"). Empty: quiet.
  std::function<void(const std::string&)> log;
  // The bytes of each download as they arrive: the file, its bytes so far (of this attempt) and
  // its size. Called from the downloading threads (max_parallel at once). Empty: not reported.
  std::function<void(const std::string& file, std::uint64_t received, std::uint64_t size)>
      progress;
};

struct MirrorFailure {
  std::string mirror;
  std::string url;   // what was asked for
  std::string what;  // what went wrong, e.g. "HTTP 404", "SHA-256 mismatch: expected .. got .."
  // The mirror served bytes that failed verification (wrong size or digest, too large), or was
  // skipped for having done so: an integrity failure, not an availability one.
  bool bad_bytes = false;
  // Under TUF, the attack the bytes were refused as (tuf::attack_id: "rollback", "freeze",
  // "target-mismatch", ...); empty otherwise.
  std::string attack;
  // The mirror answered that the file is not there (HTTP 404 or 410, a missing file:// path, a
  // TUF repository without the metadata or target): transport::error_kind's NotFound.
  bool not_found = false;
};

struct FetchResult {
  std::vector<std::string> installed;        // store directories unpacked by this call
  std::vector<std::string> already_present;  // store directories found verified, left as they were
  std::vector<MirrorFailure> failures;  // every failed attempt, also when another mirror served
  std::string index_json;               // the trusted index as served, when it was fetched
  std::string description;  // with_description: the description file written into the store
  // Bytes downloaded and verified by this call (archives and the description; not the index),
  // whatever mirror served them: 0 when everything was present already.
  std::uint64_t bytes_downloaded = 0;
};

// Downloads, verifies and unpacks the archive of each target into dest_store (a store: one
// directory per archive). Targets already installed and verified are not downloaded again.
// Throws Error: Usage (no mirror, no trust anchor or two of them, bad target), Integrity (the
// index digest differs from the pinned one on every mirror, both digests named), NotFound
// (offline, or the index lists no archive for a target), Network (every mirror failed, each
// failure named; or timeout_ms passed), Integrity / Stale (an archive whose manifest names
// another target / another package or CUDA version than its index entry: refused before it is
// unpacked), Io (destination not writable). Under TUF, a refused repository is the tuf::Error's
// kind (integrity for every attack, format for malformed metadata) with the field
// attack=<tuf::attack_id>, the message naming the attack, role, field and both values.
FetchResult fetch_targets(const FetchOptions& opts, const std::vector<std::string>& targets,
                          const std::string& dest_store);

// As fetch_targets, but each verified archive (digest, and its manifest against the index
// entry) is left as <dir>/<archive file> instead of being unpacked (`kiln bundle`); nothing in
// `dir` counts as present. FetchResult::installed lists the archive files.
FetchResult fetch_archive_files(const FetchOptions& opts, const std::vector<std::string>& targets,
                                const std::string& dir);

// One archive of `target`, fetched and verified as fetch_targets verifies it (the trusted index,
// size and digests, its manifest against the index entry) but kept in memory: nothing is written
// to any directory. The loader's mirror tier uses it when its cache directory cannot be written
// (docs/loader.md, "When the cache cannot be written"). Under TUF the metadata is still kept in
// tuf_metadata_dir, so an unwritable one fails as fetch_targets does. Throws like fetch_targets.
struct FetchedArchive {
  std::string file;    // the archive's file name, as the index lists it
  std::string url;     // where the verified bytes came from
  std::string target;  // as the index lists it
  std::vector<format::ArchiveMember> members;  // manifest.json first, as the archive holds them
};
FetchedArchive fetch_archive_into_memory(const FetchOptions& opts, const std::string& target);

// The targets release opts.version offers, as its index lists them, in index order: one
// fetch of the index from the first mirror that serves it with the pinned digest (no archive
// is downloaded). Callers choose among them with the target-choice rule (`kiln fetch --device`,
// the loader's mirror tier). Throws like fetch_targets; offline: Error{NotFound}.
std::vector<std::string> fetch_index_targets(const FetchOptions& opts);
// The same fetch of the index, keeping its bytes: hand it to a later fetch_targets as
// FetchOptions::index so the index is downloaded once.
FetchedIndex fetch_release_index(const FetchOptions& opts);

// Reachability of each mirror for `kiln doctor`: one real request for the release index with
// a short timeout (no retries); reachable means the index was served and matched the pin
// (when a pin is known).
struct MirrorProbe {
  std::string mirror;
  std::string url;
  bool reachable = false;
  long http_status = 0;  // 0 for file:// or when no response came
  std::string detail;    // "ok, index digest matches", or what went wrong
};
std::vector<MirrorProbe> probe_mirrors(const FetchOptions& opts);

// The mirror list and index digest this libkiln was built with (may be empty).
std::vector<std::string> default_mirrors();
std::string default_index_sha256();

}  // namespace kiln::fetch
