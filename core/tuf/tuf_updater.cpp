#include "tuf/tuf_updater.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

#include "io/atomic_file.hpp"
#include "io/file_lock.hpp"
#include "runtime/log.hpp"
#include "transport/http_transport.hpp"
#include "tuf/tuf_delegation.hpp"

namespace kiln::tuf {

namespace fs = std::filesystem;

namespace {

std::string with_slash(std::string url) {
  if (!url.empty() && url.back() != '/') url += '/';
  return url;
}

class CurlFetcher : public Fetcher {
 public:
  CurlFetcher()
      : transport_(transport::make_curl_transport("downloading TUF metadata and targets")) {}

  std::optional<std::string> get(const std::string& url, std::size_t max_bytes) override {
    std::string body;
    bool found = stream(url, max_bytes, [&](const char* d, std::size_t n) {
      body.append(d, n);
      return true;
    });
    if (!found) return std::nullopt;
    return body;
  }

  bool stream(const std::string& url, std::size_t max_bytes,
              const std::function<bool(const char*, std::size_t)>& sink) override {
    transport::TransferRequest req;
    req.url = url;
    req.total_timeout_ms = 0;
    std::size_t received = 0;
    bool too_large = false, sink_refused = false;
    auto r = transport_->get(req, [&](const char* d, std::size_t n) {
      received += n;
      if (received > max_bytes) {
        too_large = true;
        return false;
      }
      if (!sink(d, n)) {
        sink_refused = true;
        return false;
      }
      return true;
    });
    if (too_large)
      throw Error(Attack::TooLarge, url + ": more than " + std::to_string(max_bytes) +
                                        " bytes served, the bound for this file");
    if (r.status == transport::TransferStatus::Ok) return true;
    if (r.status == transport::TransferStatus::Missing) return false;
    if (r.status == transport::TransferStatus::Http &&
        (r.http_status == 404 || r.http_status == 403))
      return false;
    if (sink_refused) throw kiln::Error(ErrorKind::Io, url + ": writing the download failed");
    throw Error(Attack::Network, url + ": " + transport::to_string(r.status) +
                                     (r.message.empty() ? "" : " (" + r.message + ")"));
  }

 private:
  std::unique_ptr<transport::Transport> transport_;
};

}  // namespace

std::unique_ptr<Fetcher> make_curl_fetcher() { return std::make_unique<CurlFetcher>(); }

struct Updater::Lock {
  io::FileLock lock;
};

Updater::Updater(UpdaterOptions opts, Fetcher& fetcher, std::time_t now)
    : opts_(std::move(opts)), fetcher_(fetcher) {
  opts_.metadata_url = with_slash(opts_.metadata_url);
  if (!opts_.target_base_url.empty()) opts_.target_base_url = with_slash(opts_.target_base_url);
  lock_ = std::make_unique<Lock>();
  lock_->lock = io::FileLock::acquire(opts_.metadata_dir / ".tuf.lock", std::chrono::seconds(60));
  // Every writer of the directory holds the lock: a temporary file here is a dead writer's.
  io::remove_orphaned_temps(opts_.metadata_dir);
  std::string root = io::read_whole_file(opts_.metadata_dir / "root.json");
  trusted_ = std::make_unique<TrustedSet>(root, now);
}

Updater::~Updater() = default;

std::optional<std::string> Updater::read_local(const std::string& role) const {
  fs::path p = opts_.metadata_dir / (quote_name(role) + ".json");
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  try {
    return io::read_whole_file(p);
  } catch (const kiln::Error& e) {
    // Unreadable is absent, as in python-tuf: the repository's copy is fetched and verified
    // instead. Only root.json must load, and the constructor reads it, not this.
    log(runtime::LogLevel::Warn, "tuf: stored " + role + " cannot be read, fetching it again: " + e.what());
    return std::nullopt;
  }
}

void Updater::persist(const std::string& role, const std::string& bytes) {
  io::write_file_atomically(opts_.metadata_dir / (quote_name(role) + ".json"), bytes);
}

std::string Updater::download_metadata(const std::string& role, std::size_t max_bytes,
                                       std::optional<std::int64_t> version) {
  std::string url = opts_.metadata_url + (version ? std::to_string(*version) + "." : "") +
                    quote_name(role) + ".json";
  auto body = fetcher_.get(url, max_bytes);
  if (!body) throw Error(Attack::Network, url + ": not found on the repository");
  return *body;
}

void Updater::refresh() {
  load_root();
  load_timestamp();
  load_snapshot();
  load_targets("targets", "root");
  refreshed_ = true;
}

void Updater::load_root() {
  std::int64_t lower = trusted_->root().version + 1;
  std::int64_t upper = lower + opts_.limits.max_root_rotations;
  for (std::int64_t next = lower; next < upper; ++next) {
    std::string url = opts_.metadata_url + std::to_string(next) + ".root.json";
    auto body = fetcher_.get(url, opts_.limits.root);
    if (!body) break;
    trusted_->update_root(*body);
    persist("root", *body);
    if (opts_.keep_root_history)
      io::write_file_atomically(opts_.metadata_dir / (std::to_string(next) + ".root.json"), *body);
    log(runtime::LogLevel::Debug, "tuf: trusted root v" + std::to_string(next));
  }
}

void Updater::load_timestamp() {
  if (auto local = read_local("timestamp")) {
    try {
      trusted_->update_timestamp(*local);
    } catch (const Error& e) {
      // A stored timestamp that no longer verifies (keys rotated, expired) is no reference for
      // rollback: this is the spec's fast-forward recovery.
      log(runtime::LogLevel::Debug, std::string("tuf: stored timestamp not used: ") + e.what());
    }
  }
  std::string data = download_metadata("timestamp", opts_.limits.timestamp, std::nullopt);
  try {
    trusted_->update_timestamp(data);
  } catch (const Error& e) {
    if (e.attack() != Attack::EqualVersion) throw;
    return;  // the repository has nothing newer: keep ours
  }
  persist("timestamp", data);
}

void Updater::load_snapshot() {
  if (auto local = read_local("snapshot")) {
    try {
      trusted_->update_snapshot(*local, true);
      return;  // still valid as final: no download
    } catch (const Error& e) {
      log(runtime::LogLevel::Debug, std::string("tuf: stored snapshot not final: ") + e.what());
    }
  }
  const MetaFile& meta = trusted_->timestamp()->snapshot_meta;
  std::size_t max = meta.length ? static_cast<std::size_t>(*meta.length) : opts_.limits.snapshot;
  std::optional<std::int64_t> version;
  if (trusted_->root().consistent_snapshot) version = meta.version;
  std::string data = download_metadata("snapshot", max, version);
  trusted_->update_snapshot(data, false);
  persist("snapshot", data);
}

const Targets& Updater::load_targets(const std::string& role, const std::string& delegator) {
  if (const Targets* t = trusted_->trusted_targets(role, delegator)) return *t;
  if (const std::string* bytes = trusted_->trusted_targets_bytes(role)) {
    // Trusted already through another delegator: its authority here comes from this one.
    std::string copy = *bytes;
    return trusted_->update_delegated_targets(copy, role, delegator);
  }
  if (auto local = read_local(role)) {
    try {
      return trusted_->update_delegated_targets(*local, role, delegator);
    } catch (const Error& e) {
      log(runtime::LogLevel::Debug, "tuf: stored " + role + " not used: " + e.what());
    }
  }
  trusted_->check_final_snapshot();
  const auto& meta = trusted_->snapshot()->meta;
  auto it = meta.find(role + ".json");
  if (it == meta.end())
    throw Error(Attack::NotDelegated, "role \"" + role + "\" is delegated by \"" + delegator +
                                          "\" but snapshot.json v" +
                                          std::to_string(trusted_->snapshot()->version) +
                                          " has no meta entry for \"" + role + ".json\"");
  std::size_t max =
      it->second.length ? static_cast<std::size_t>(*it->second.length) : opts_.limits.targets;
  std::optional<std::int64_t> version;
  if (trusted_->root().consistent_snapshot) version = it->second.version;
  std::string data = download_metadata(role, max, version);
  const Targets& t = trusted_->update_delegated_targets(data, role, delegator);
  persist(role, data);
  return t;
}

std::optional<TargetFile> Updater::get_targetinfo(const std::string& target_path) {
  if (!refreshed_) refresh();
  // Pre-order depth-first search of the delegation tree (spec 5.6.7.2).
  std::vector<std::pair<std::string, std::string>> to_visit{{"targets", "root"}};
  std::vector<std::string> visited;
  int budget = opts_.limits.max_delegations;
  while (budget > 0 && !to_visit.empty()) {
    auto [role, parent] = to_visit.back();
    to_visit.pop_back();
    if (std::find(visited.begin(), visited.end(), role) != visited.end()) continue;
    const Targets& t = load_targets(role, parent);
    auto hit = t.targets.find(target_path);
    if (hit != t.targets.end()) return hit->second;
    visited.push_back(role);
    --budget;
    if (!t.delegations) continue;
    std::vector<std::pair<std::string, std::string>> children;
    if (t.delegations->succinct) {
      children.emplace_back(succinct_role_for_target(*t.delegations->succinct, target_path), role);
      to_visit.clear();
    } else {
      for (const auto& d : t.delegations->roles) {
        if (!role_delegates_path(d, target_path)) continue;
        children.emplace_back(d.name, role);
        if (d.terminating) {
          to_visit.clear();
          break;
        }
      }
    }
    to_visit.insert(to_visit.end(), children.rbegin(), children.rend());
  }
  return std::nullopt;
}

fs::path Updater::target_path_for(const TargetFile& info) const {
  return opts_.target_dir / quote_name(info.path);
}

std::optional<fs::path> Updater::find_cached_target(const TargetFile& info) const {
  fs::path p = target_path_for(info);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::string data = io::read_whole_file(p);
  try {
    verify_length_and_hashes(data, info.length, info.hashes, Attack::TargetMismatch, p.string());
  } catch (const Error& e) {
    // Other bytes than the metadata's are a miss: download_target replaces them. Any other
    // refusal (an algorithm this build lacks) is the metadata's fault and is reported.
    if (e.attack() != Attack::TargetMismatch) throw;
    log(runtime::LogLevel::Debug, std::string("tuf: stored target not used: ") + e.what());
    return std::nullopt;
  }
  return p;
}

std::string remote_target_path(const TargetFile& info, bool consistent_snapshot) {
  if (!consistent_snapshot || info.hashes.empty()) return info.path;
  auto slash = info.path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : info.path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? info.path : info.path.substr(slash + 1);
  return dir + info.hashes.begin()->second + "." + base;
}

fs::path Updater::download_target(const TargetFile& info) {
  if (opts_.target_base_url.empty())
    throw kiln::Error(ErrorKind::Usage, "tuf: no target base URL given for " + info.path);
  std::string url =
      opts_.target_base_url + remote_target_path(info, trusted_->root().consistent_snapshot &&
                                                           opts_.prefix_targets_with_hash);
  fs::path dest = target_path_for(info);
  io::AtomicFile out(dest);
  MultiHasher hasher(info.hashes, "target " + info.path);
  std::int64_t size = 0;
  bool found = fetcher_.stream(url, static_cast<std::size_t>(info.length),
                               [&](const char* d, std::size_t n) {
                                 hasher.update(std::string_view(d, n));
                                 out.write(std::string_view(d, n));
                                 size += static_cast<std::int64_t>(n);
                                 return true;
                               });
  if (!found) throw Error(Attack::Network, url + ": not found on the repository");
  if (size != info.length)
    throw Error(Attack::TargetMismatch, "target " + info.path + ": length is " +
                                            std::to_string(size) + " bytes, metadata says " +
                                            std::to_string(info.length));
  auto got = hasher.finish();
  for (const auto& [alg, want] : info.hashes)
    if (got[alg] != want)
      throw Error(Attack::TargetMismatch, "target " + info.path + ": " + alg + " is " + got[alg] +
                                              ", metadata says " + want);
  out.commit();
  return dest;
}

}  // namespace kiln::tuf
