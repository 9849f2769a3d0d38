#pragma once
// The TUF client workflow (specification 1.0.34 section 5) over a metadata directory and a
// repository URL: refresh the top-level roles, look a target up through the delegation tree,
// download it verified. Trust is anchored in <metadata dir>/root.json; every file there is
// written atomically (AtomicFile) under <metadata dir>/.tuf.lock, with non-versioned names
// ("root.json", "<quoted role>.json").
//
// HTTP requests, in order (the conformance suite checks this sequence):
//   <url>/<N+1>.root.json ... until 404/403 (at most 256 new roots)
//   <url>/timestamp.json
//   <url>/[<v>.]snapshot.json            unless the stored snapshot is still valid as final
//   <url>/[<v>.]<role>.json for targets and each delegated role visited, unless stored and valid
//   <target base>/[<hash>.]<target path>
#include <cstddef>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tuf/tuf_trusted_set.hpp"

namespace kiln::tuf {

// Where the bytes come from. get() returns nullopt for "not there" (HTTP 403/404, a missing
// file), the body otherwise; it throws Error(Attack::TooLarge) when the body would exceed
// `max_bytes`, and Error(Attack::Network) for any other failure.
class Fetcher {
 public:
  virtual ~Fetcher() = default;
  virtual std::optional<std::string> get(const std::string& url, std::size_t max_bytes) = 0;
  // Streams a body into `sink` (false aborts); same errors as get(). Returns false for
  // "not there".
  virtual bool stream(const std::string& url, std::size_t max_bytes,
                      const std::function<bool(const char*, std::size_t)>& sink) = 0;
};
std::unique_ptr<Fetcher> make_curl_fetcher();

// Upper bounds on untrusted bytes when the referring metadata gives no length
// (python-tuf's defaults, which the suite's repositories fit).
struct Limits {
  std::size_t root = 512000;
  std::size_t timestamp = 16384;
  std::size_t snapshot = 2000000;
  std::size_t targets = 5000000;
  int max_root_rotations = 256;
  int max_delegations = 32;
};

struct UpdaterOptions {
  std::filesystem::path metadata_dir;
  std::string metadata_url;  // a trailing '/' is added when missing
  std::filesystem::path target_dir;
  std::string target_base_url;  // a trailing '/' is added when missing
  Limits limits;
  bool prefix_targets_with_hash = true;  // "<hash>.<name>" under consistent snapshots
  // Also store each root reached as "<N>.root.json": the chain a bundle carries to a node that
  // trusts an older root (the conformance client keeps only root.json, as python-tuf does).
  bool keep_root_history = false;
};

// Where a target lies under the repository's target base URL: its path, with the first hash's
// hex digest before the file name under consistent snapshots ("dir/<sha256>.name").
std::string remote_target_path(const TargetFile& info, bool consistent_snapshot);

class Updater {
 public:
  // Loads <metadata dir>/root.json and verifies its own signatures; takes the lock.
  Updater(UpdaterOptions opts, Fetcher& fetcher, std::time_t now);
  ~Updater();

  // Root chain, timestamp, snapshot, top-level targets. Throws tuf::Error.
  void refresh();
  // Refreshes first when needed; nullopt when no trusted role lists the path.
  std::optional<TargetFile> get_targetinfo(const std::string& target_path);
  // The stored copy in target_dir, when its length and hashes match `info`.
  std::optional<std::filesystem::path> find_cached_target(const TargetFile& info) const;
  // Downloads, verifies while streaming, then renames into target_dir. Returns the path.
  std::filesystem::path download_target(const TargetFile& info);

  const TrustedSet& trusted() const { return *trusted_; }
  std::filesystem::path target_path_for(const TargetFile& info) const;

 private:
  void load_root();
  void load_timestamp();
  void load_snapshot();
  const Targets& load_targets(const std::string& role, const std::string& delegator);
  std::optional<std::string> read_local(const std::string& role) const;
  void persist(const std::string& role, const std::string& bytes);
  std::string download_metadata(const std::string& role, std::size_t max_bytes,
                                std::optional<std::int64_t> version);

  struct Lock;
  UpdaterOptions opts_;
  Fetcher& fetcher_;
  std::unique_ptr<Lock> lock_;
  std::unique_ptr<TrustedSet> trusted_;
  bool refreshed_ = false;
};

}  // namespace kiln::tuf
