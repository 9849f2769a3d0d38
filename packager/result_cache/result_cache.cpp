// The result cache's policy over a backend: what a lookup reads and checks, what a store writes
// and in which order, and which --cache values open which backend (result_cache.hpp).
#include "result_cache/result_cache.hpp"

#include "io/artifact_check.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"

namespace kiln::result_cache {

namespace {

CacheLookup unavailable(const BackendRead& r) {
  CacheLookup out;
  out.outcome = CacheLookup::Outcome::Unavailable;
  out.reason = r.reason;
  return out;
}

CacheLookup refused(std::string reason, std::uint64_t fetched) {
  CacheLookup out;
  out.outcome = CacheLookup::Outcome::Refused;
  out.reason = std::move(reason);
  out.bytes_fetched = fetched;
  return out;
}

}  // namespace

CacheLookup ResultCache::lookup(const std::string& key, const std::string& output_name) {
  using Status = BackendRead::Status;
  const std::string where = backend_->location() + "/" + action_path(key);
  BackendRead entry = backend_->read(action_path(key), kMaxActionResultBytes);
  if (entry.status == Status::Absent) return {};
  if (entry.status == Status::Failed) return unavailable(entry);
  if (entry.status == Status::TooLarge) return refused(entry.reason, 0);
  std::uint64_t fetched = entry.bytes.size();
  CachedOutput out;
  try {
    out = decode_action_result(entry.bytes, where);
  } catch (const Error& e) {
    return refused(e.what(), fetched);
  }
  if (out.name != output_name)
    return refused(where + ": names output '" + out.name + "', not '" + output_name + "'", fetched);
  if (out.size > io::limits::kMaxMemberBytes)
    return refused(where + ": its output is " + std::to_string(out.size) +
                       " bytes, over the limit of " + std::to_string(io::limits::kMaxMemberBytes),
                   fetched);
  BackendRead blob = backend_->read(blob_path(out.sha256), out.size);
  if (blob.status == Status::Absent) return {};
  if (blob.status == Status::Failed) return unavailable(blob);
  if (blob.status == Status::TooLarge) return refused(blob.reason, fetched);
  fetched += blob.bytes.size();
  if (auto bad = io::pin_mismatch(blob.bytes, {out.size, out.sha256}))
    return refused(bad->message(backend_->location() + "/" + blob_path(out.sha256), where),
                   fetched);
  CacheLookup hit;
  hit.outcome = CacheLookup::Outcome::Hit;
  hit.bytes = std::move(blob.bytes);
  hit.bytes_fetched = fetched;
  return hit;
}

CacheStore ResultCache::store(const std::string& key, const std::string& output_name,
                              const std::string& bytes) {
  CachedOutput out{output_name, io::sha256_hex(bytes), bytes.size()};
  std::string entry = encode_action_result(out);
  CacheStore r;
  // The bytes first: an entry is never visible before what it points at.
  BackendWrite w = backend_->write(blob_path(out.sha256), bytes);
  if (w.ok) w = backend_->write(action_path(key), entry);
  r.ok = w.ok;
  r.reason = w.reason;
  if (w.ok) r.bytes_stored = bytes.size() + entry.size();
  return r;
}

std::unique_ptr<ResultCache> open_result_cache(const std::string& location,
                                               const RemoteBounds& bounds,
                                               const std::string& ca_bundle) {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0)
    return std::make_unique<ResultCache>(make_http_backend(location, bounds, ca_bundle));
  if (location.empty() || location.find("://") != std::string::npos)
    throw Error(ErrorKind::Usage,
                "--cache '" + location +
                    "' is neither a directory nor an http:// or https:// URL of a server "
                    "speaking Bazel's HTTP cache protocol (bazel-remote, nginx with WebDAV PUT)");
  return std::make_unique<ResultCache>(make_directory_backend(location));
}

}  // namespace kiln::result_cache
