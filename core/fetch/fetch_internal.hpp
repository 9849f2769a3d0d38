#pragma once
// fetch_targets with its collaborators passed in, so tests can swap the network, the clock
// and the store for fakes. fetch.cpp wires in libcurl, real sleeps and store/store.hpp.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fetch/fetch.hpp"
#include "format/manifest.hpp"
#include "transport/http_transport.hpp"

namespace kiln::fetch {

struct FetchDeps {
  transport::Transport* transport = nullptr;
  std::function<void(long ms)> sleep_ms;
  // Is <store>/<stem> installed, and does every artifact still match its manifest?
  std::function<bool(const std::filesystem::path& store, const std::string& stem)> verified_present;
  // Unpacks a verified archive into the store (re-checking its digest); returns the directory.
  std::function<std::string(const std::filesystem::path& archive,
                            const std::filesystem::path& store, const std::string& sha256)>
      install;
  // The manifest of a downloaded (digest-verified) archive, read before it is unpacked, so it
  // can be checked against its index entry; nullopt when its first member is not manifest.json.
  std::function<std::optional<format::Manifest>(const std::filesystem::path& archive)> read_manifest;
  // Monotonic milliseconds, for the deadlines. Empty: std::chrono::steady_clock.
  std::function<std::int64_t()> now_ms;
  // Leave each verified archive at <dest>/<file> after install() instead of removing it
  // (`kiln bundle`, whose install() keeps it as is).
  bool keep_archives = false;
};

FetchResult fetch_targets_with(const FetchOptions& opts, const std::vector<std::string>& targets,
                               const std::string& dest_store, const FetchDeps& deps);

FetchedArchive fetch_archive_into_memory_with(const FetchOptions& opts, const std::string& target,
                                              const FetchDeps& deps);

FetchedIndex fetch_release_index_with(const FetchOptions& opts, const FetchDeps& deps);

// Mirror URL as used in messages and the bad-mirror set: trailing '/' removed, a bare
// absolute path turned into file://. Throws Error{Usage} for any other scheme.
std::string normalise_mirror(const std::string& mirror);

// The largest index accepted: a mirror streaming garbage is cut off here.
constexpr std::size_t kMaxIndexBytes = 16u << 20;

// The one rule for how long a mirror may take to serve one file (docs/security.md, "Slow
// mirrors"); returns the deadline of the next attempt, in ms. Pure.
//   `pinned_bytes` (an archive, a description, a TUF target: a size the index or signed
//   metadata states): download_timeout_ms plus those bytes at download_min_rate, for each
//   attempt (a slow link still completes a large archive).
//   nullopt (the index under a digest pin, TUF metadata: only a bound, up to 16 MiB, limits
//   its size): what is left of download_timeout_ms after `spent_ms`, the time this mirror has
//   already had for this file (earlier attempts and backoff), at least 0. The bound does not
//   scale the deadline, so a mirror dripping an endless file costs download_timeout_ms (60 s),
//   not 60 s + 16 MiB at 64 KiB/s (316 s).
long download_deadline_ms(const FetchOptions& opts, std::optional<std::uint64_t> pinned_bytes,
                          std::int64_t spent_ms = 0);

}  // namespace kiln::fetch
