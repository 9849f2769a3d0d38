// `kiln mirror sync`, the transfer (mirror.hpp: sync_release_with, sync_release; what to publish
// is plan_sync, mirror_sync_plan.cpp). The state machine of a sync:
//
//   no --index-sha256 and no --sums-sha256       -> Usage, nothing fetched
//   GET <from>/<pkg>-<ver>-SHA256SUMS (capped) -> --sums-sha256 (when given), parse strictly
//   GET <from>/<pkg>-<ver>-index.json          -> pin (when given) + its SHA256SUMS line,
//                                                 parse, version
//   plan_sync: every SUMS line a file of <ver>, else Format (nothing written); archives agree
//     with the index; wheels/tarballs published only under a pinned SUMS, else withheld
//   for each file to publish: <to>/<name> has the listed digest? -> already good, no transfer
//     else (under a flock on <to>, taking which removes what a killed sync left)
//     stream into <to>/.kiln-sync-<pkg>-<ver>-XXXXXX/<name>, hashing; > cap -> abort
//       (download_verified, verified_download.hpp: the verified download and retry loop that
//       kiln fetch and the loader's mirror tier use)
//       digest (and size, archive members, manifest for archives) verified -> next file
//       anything else -> remove the staging dir, throw naming file, URL, expected and got
//   every file verified -> rename into <to>: archives/wheels/tarballs, then the index, then
//   the pip index (simple_index.hpp) from what is there, then SHA256SUMS; remove the staging dir
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fetch/fetch_internal.hpp"
#include "fetch/verified_download.hpp"
#include "format/manifest.hpp"
#include "io/atomic_file.hpp"
#include "io/private_key_scan.hpp"
#include "io/scratch_dir.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/mirror_internal.hpp"
#include "mirror/simple_index.hpp"
#include "store/store.hpp"
#include "transport/http_transport.hpp"

namespace kiln::mirror {

namespace fs = std::filesystem;
using namespace detail;

namespace {

using fetch::describe;
using fetch::DownloadExpect;
using fetch::DownloadStatus;
using transport::RetryDecision;
using fetch::RetryLoop;
using transport::RetryPolicy;
using transport::TransferRequest;
using transport::TransferResult;

class Syncer {
 public:
  Syncer(const SyncOptions& o, transport::Transport& t, const std::function<void(long)>& s)
      : opts_(o), transport_(t), sleep_(s) {
    policy_ = RetryPolicy{o.max_retries, o.retry_base_ms, o.retry_cap_ms};
  }

  void log(const std::string& line) const {
    if (opts_.log) opts_.log(line);
  }

  TransferRequest request(const std::string& url) const {
    TransferRequest r;
    r.url = url;
    r.connect_timeout_ms = opts_.connect_timeout_ms;
    r.low_speed_bytes = opts_.low_speed_bytes;
    r.low_speed_seconds = opts_.low_speed_seconds;
    r.ca_bundle = opts_.ca_bundle;
    return r;
  }

  // The one retry loop (verified_download.hpp) for `name` at `url`: a failure that is not
  // retried ends the sync naming the file, the URL and what came; a retry is logged.
  RetryLoop retry_loop(const std::string& name, const std::string& url) const {
    RetryLoop loop;
    loop.transport = &transport_;
    loop.policy = policy_;
    loop.sleep_ms = sleep_;
    loop.on_failure = [this, name, url](const TransferResult& r, const RetryDecision& d, int n) {
      if (!d.retry)
        throw Error(transport::error_kind(r),
                    name + ": " + url + ": " + describe(r) +
                        (n > 1 ? " (after " + std::to_string(n) + " attempts)" : ""));
      log(name + ": " + url + ": " + describe(r) + ", retrying in " + std::to_string(d.delay_ms) +
          " ms");
    };
    return loop;
  }

  std::string fetch_small(const std::string& name, const std::string& url, std::size_t cap) {
    std::string body;
    bool over = false;
    fetch::get_with_retries(
        retry_loop(name, url), [&] { return request(url); },
        [&] {
          body.clear();
          over = false;
        },
        [&](const char* d, std::size_t n) {
          if (body.size() + n > cap) return !(over = true);
          body.append(d, n);
          return true;
        });
    if (over)
      throw Error(ErrorKind::Integrity, name + ": " + url + ": served more than " +
                                            std::to_string(cap) + " bytes: aborted");
    bytes_downloaded_ += body.size();
    return body;
  }

  // Streams `url` into `dst` through the one verified download. `exact_size`: the size the
  // index lists (archives); otherwise --max-file-bytes bounds it. Throws Integrity naming
  // expected and got on any difference.
  std::uint64_t download(const std::string& name, const std::string& url, const fs::path& dst,
                         const std::string& sha256, std::optional<std::uint64_t> exact_size) {
    std::uint64_t cap = exact_size ? *exact_size : opts_.max_file_bytes;
    RetryLoop loop = retry_loop(name, url);
    if (opts_.progress)
      loop.on_bytes = [&](std::uint64_t n) { opts_.progress(name, n, exact_size); };
    auto d = fetch::download_verified(loop, [&] { return request(url); }, dst,
                                      DownloadExpect{sha256, exact_size, cap});
    switch (d.status) {
      case DownloadStatus::Verified:
        break;
      case DownloadStatus::TooBig:
        throw Error(ErrorKind::Integrity,
                    name + ": " + url + ": served more than " +
                        (exact_size ? "the " + std::to_string(cap) + " bytes the index lists"
                                    : std::to_string(cap) + " bytes (--max-file-bytes)") +
                        ": aborted");
      case DownloadStatus::WriteFailed:
        throw Error(ErrorKind::Io, name + ": " + d.write_error);
      case DownloadStatus::TransferFailed:
        // on_failure threw for every failure that is not retried: not reached.
        throw Error(transport::error_kind(d.transfer),
                    name + ": " + url + ": " + describe(d.transfer));
      case DownloadStatus::SizeMismatch:
        bytes_downloaded_ += d.bytes;
        throw Error(ErrorKind::Integrity, name + ": " + url + ": size mismatch: the index lists " +
                                              std::to_string(*exact_size) + " bytes, served " +
                                              std::to_string(d.bytes));
      case DownloadStatus::DigestMismatch:
        bytes_downloaded_ += d.bytes;
        throw Error(ErrorKind::Integrity, name + ": " + url + ": sha256 mismatch: expected " +
                                              sha256 + ", served " + d.sha256 + " (" +
                                              std::to_string(d.bytes) + " bytes)");
    }
    bytes_downloaded_ += d.bytes;
    return d.bytes;
  }

  std::uint64_t bytes_downloaded() const { return bytes_downloaded_; }

 private:
  const SyncOptions& opts_;
  transport::Transport& transport_;
  const std::function<void(long)>& sleep_;
  RetryPolicy policy_;
  std::uint64_t bytes_downloaded_ = 0;
};

}  // namespace

SyncResult sync_release_with(const SyncOptions& opts, transport::Transport& transport,
                             const std::function<void(long ms)>& sleep_ms) {
  const ReleaseName release = detail::resolved_release(opts.package, opts.version);
  const std::string& package = release.package;
  const std::string& version = release.version;
  const std::string pin = detail::resolved_pin(opts.index_sha256);
  const std::string sums_pin = detail::resolved_pin(opts.sums_sha256, "--sums-sha256");
  if (opts.from.empty()) throw Error(ErrorKind::Usage, "no upstream mirror given (--from)");
  if (opts.to.empty()) throw Error(ErrorKind::Usage, "no destination directory given (--to)");
  if (pin.empty() && sums_pin.empty())
    throw Error(ErrorKind::Usage,
                "no pin: give --index-sha256 (or KILN_INDEX_SHA256; covers the index and its "
                "archives) and/or --sums-sha256 (covers every file the checksum file lists, "
                "wheels and tarballs included). A mirror publishes nothing that is not covered "
                "by a digest you trust.");
  const std::string base = fetch::normalise_mirror(opts.from);
  const fs::path to = opts.to;
  io::refuse_private_key_in({to}, "mirror sync", "would be served from the mirror " + to.string());
  Syncer sx(opts, transport, sleep_ms);

  // 1. The checksum file, then the index it lists.
  const std::string sums_name = checksums_file_name(package, version);
  const std::string sums_url = base + "/" + sums_name;
  sx.log("fetching " + sums_url);
  const std::string sums_text = sx.fetch_small(sums_name, sums_url, kMaxChecksumsBytes);
  const std::string sums_sha = io::sha256_hex(sums_text);
  if (!sums_pin.empty() && sums_sha != sums_pin)
    throw Error(ErrorKind::Integrity, sums_name + ": " + sums_url + ": sha256 mismatch: pinned " +
                                          sums_pin + " (--sums-sha256), served " + sums_sha +
                                          "\nNothing was written to " + to.string() + ".");
  const auto entries = parse_checksums(sums_text, sums_url, sums_name);
  std::map<std::string, std::string> listed;
  for (const auto& e : entries) listed[e.name] = e.sha256;

  const std::string index_name = format::index_file_name(package, version);
  const std::string index_url = base + "/" + index_name;
  if (!listed.count(index_name))
    throw Error(ErrorKind::Format,
                sums_url + " does not list " + index_name + ": not the checksum file of a release");
  sx.log("fetching " + index_url);
  const std::string index_text =
      sx.fetch_small(index_name, index_url, fetch::kMaxIndexBytes);
  const std::string index_sha = io::sha256_hex(index_text);
  if (!pin.empty() && index_sha != pin)
    throw Error(ErrorKind::Integrity, index_name + ": " + index_url + ": sha256 mismatch: pinned " +
                                          pin + ", served " + index_sha);
  if (index_sha != listed[index_name])
    throw Error(ErrorKind::Integrity, index_name + ": " + index_url +
                                          ": sha256 mismatch: " + sums_name + " lists " +
                                          listed[index_name] + ", served " + index_sha);
  const format::Index idx = format::parse_index(index_text, index_url);
  if (idx.package != package)
    throw Error(ErrorKind::Stale,
                index_url + ": package is " + idx.package + ", expected " + package);
  if (idx.package_version != version)
    throw Error(ErrorKind::Stale, index_url + ": package_version is " + idx.package_version +
                                      ", expected " + version);
  std::map<std::string, const format::IndexEntry*> archives;
  for (const auto& e : idx.archives) archives[e.file] = &e;
  SyncPlan plan;
  try {
    plan = plan_sync(entries, sums_text, idx, package, version, !pin.empty(), !sums_pin.empty(),
                     sums_url);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(e.what()) + "\nNothing was written to " + to.string() + ".",
                e.fields());
  }
  listed.clear();
  std::map<std::string, std::string> covered_by;
  for (const auto& f : plan.publish) {
    listed[f.name] = f.sha256;
    covered_by[f.name] = f.covered_by;
  }

  // 2. What the destination already holds with the listed digest needs no transfer.
  SyncResult result;
  result.withheld = plan.withheld;
  for (const auto& w : plan.withheld)
    sx.log("not published: " + w.name + " (" + to_string(w.kind) + "): " + w.reason);
  const std::string& sums_out = plan.checksums_text;
  std::vector<std::string> todo;
  auto already_good = [&](const std::string& name, const std::string& sha) {
    if (!detail::is_regular(to / name)) return false;
    try {
      return detail::digest_of(to / name).sha256 == sha;
    } catch (const Error&) {
      return false;  // unreadable: replaced below, or the rename fails loudly
    }
  };
  for (const auto& f : plan.publish) {
    if (already_good(f.name, f.sha256)) {
      result.already_good.push_back(f.name);
      sx.log("already good " + f.name);
    } else {
      todo.push_back(f.name);
    }
  }
  if (already_good(sums_name, io::sha256_hex(sums_out)))
    result.already_good.push_back(sums_name);
  else
    todo.push_back(sums_name);
  auto rank = [&](const std::string& n) { return n == sums_name ? 2 : n == index_name ? 1 : 0; };
  std::stable_sort(todo.begin(), todo.end(),
                   [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  if (todo.empty()) {
    // Nothing to transfer; what a sync of the release killed after its renames left (its staging
    // directory) is removed all the same, unless a writer holds the mirror now: then it is
    // that writer's to remove, and a sync with nothing to do does not wait for it.
    std::error_code ec;
    if (fs::is_directory(to, ec)) {
      std::optional<io::FileLock> lock;
      try {
        lock.emplace(
            detail::lock_release_in_mirror(to, package, version, std::chrono::milliseconds(0)));
      } catch (const Error&) {
        sx.log("leftovers of killed syncs not looked for: " + to.string() +
               " is being written by another stage or sync");
      }
      // The pip index, brought up to date when nothing else writes the mirror (a mirror synced
      // before it had one gets it).
      if (lock)
        result.index_written =
            write_simple_index(to, FreshRelease{ReleaseName{package, version},
                                                parse_checksums(sums_out, sums_name, sums_name)})
                .written;
    }
    sx.log("0 files transferred, " + std::to_string(result.already_good.size()) + " already good");
    result.bytes_downloaded = sx.bytes_downloaded();
    return result;
  }

  // 3. Download and verify everything into a staging directory; 4. rename into place.
  std::error_code ec;
  const bool created_to = !fs::exists(to, ec);
  fs::create_directories(to, ec);
  if (ec || !fs::is_directory(to, ec) || ::access(to.c_str(), W_OK) != 0)
    throw Error(ErrorKind::Io,
                to.string() + " is not a writable directory" + (ec ? ": " + ec.message() : ""));
  bool committing = false;
  try {
    io::FileLock lock = detail::lock_release_in_mirror(to, package, version);
    io::ScratchDir staging(to, detail::sync_staging_prefix(package, version), "staging directory");
    std::uint64_t bytes = 0;
    for (const auto& name : todo) {
      const fs::path staged = staging.path() / name;
      if (name == sums_name || name == index_name) {
        // Already fetched and verified above: the very bytes that were checked.
        io::write_file_atomically(staged, name == sums_name ? sums_out : index_text);
        bytes += name == sums_name ? sums_out.size() : index_text.size();
        continue;
      }
      const std::string url = base + "/" + name;
      auto arch = archives.find(name);
      std::optional<std::uint64_t> size;
      if (arch != archives.end()) size = arch->second->size;
      sx.log("downloading " + url + (size ? " (" + std::to_string(*size) + " bytes)" : ""));
      bytes += sx.download(name, url, staged, listed[name], size);
      std::vector<store::VerifyProblem> problems;
      const auto kind =
          classify_release_file(name, package, version).value_or(ReleaseFileKind::Other);
      if (arch != archives.end())
        problems = detail::check_archive_content(staged, *arch->second, idx, version, index_url);
      if (is_wheel(kind))
        for (const auto& p : check_wheel(staged))
          problems.push_back({ErrorKind::Integrity, name, "RECORD", p});
      if (!problems.empty())
        throw Error(*store::most_severe(problems),
                    name + ": " + url +
                        ": digest matches but the content is wrong:" + detail::join_problems(problems));
      sx.log("verified " + name + " (covered by " + covered_by[name] + ")");
    }
    // Every file verified: archives, wheels and tarballs first, then the index, then the
    // checksum file, so a reader never sees an index whose archives are missing.
    // The pip index (simple_index.hpp) goes between the files it names and the checksum file.
    committing = true;
    auto rename_in = [&](const std::string& name) {
      if (::rename((staging.path() / name).c_str(), (to / name).c_str()) != 0)
        throw Error(ErrorKind::Io, "cannot rename " + (staging.path() / name).string() + " to " +
                                       (to / name).string() + ": " + std::strerror(errno));
    };
    for (const auto& name : todo)
      if (name != sums_name) rename_in(name);
    result.index_written =
        write_simple_index(to, FreshRelease{ReleaseName{package, version},
                                            parse_checksums(sums_out, sums_name, sums_name)})
            .written;
    for (const auto& p : result.index_written) sx.log("wrote " + (to / p).string());
    if (std::find(todo.begin(), todo.end(), sums_name) != todo.end()) rename_in(sums_name);
    io::sync_directory(to);
    result.transferred = todo;
    result.bytes_transferred = bytes;
  } catch (const Error& e) {
    if (created_to) fs::remove(to, ec);  // only if still empty
    throw Error(
        e.kind(),
        std::string(e.what()) + (committing ? "\nFiles renamed before this one are in place and "
                                              "verified; the index and checksum file come last."
                                            : "\nNothing was changed in " + to.string() +
                                                  " (staged downloads removed)."),
        e.fields());
  }
  result.bytes_downloaded = sx.bytes_downloaded();
  sx.log(std::to_string(result.transferred.size()) + " files transferred, " +
         std::to_string(result.already_good.size()) + " already good");
  return result;
}

SyncResult sync_release(const SyncOptions& opts) {
  auto transport = transport::make_curl_transport("syncing a mirror (kiln mirror sync)");
  std::function<void(long)> sleep_ms = [](long ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  return sync_release_with(opts, *transport, sleep_ms);
}

}  // namespace kiln::mirror
