#pragma once
// kiln build's result cache: compile results stored under a key that names everything they
// depend on (packager/builder derives it: compile_key), in a directory or on a server speaking the
// HTTP cache protocol of Bazel's remote caching (bazel-remote, nginx with WebDAV PUT). The cache
// is untrusted: every read is bounded and checked against its digest here, and the build checks
// a hit like a fresh compile before using it. A cache that fails never fails the build.
//
// Layout, the same paths in a directory (<dir>/<path>) and on a server (<url>/<path>):
//
//   ac/<key>        an ActionResult of Bazel's remote execution API v2 (protobuf, at most
//                   kMaxActionResultBytes) holding exactly one OutputFile: path = the output's
//                   name (e.g. "axpy_dtype_f32.fatbin"), digest = {SHA-256 hex, size}
//   cas/<sha256>    the output's bytes (at most io::limits::kMaxMemberBytes)
//
// <key> and <sha256> are 64 lowercase hex digits. A store writes cas/ first and ac/ last, so an
// entry whose ac/ is there has its bytes there too (unless something removed them: a miss).
//
// Version history of the entry format: 1 (this). A change of the key's contents bumps the key's
// own version field (kCompileKeyVersion, build/build.hpp), never this layout.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::result_cache {

constexpr std::size_t kMaxActionResultBytes = 64 * 1024;

// ---- the entry (pure) ----

struct CachedOutput {
  std::string name;    // OutputFile.path
  std::string sha256;  // lowercase hex
  std::uint64_t size = 0;
};
// ActionResult{output_files: [OutputFile{path, digest{hash, size_bytes}}]} in protobuf wire form.
std::string encode_action_result(const CachedOutput& out);
// The one output of an ActionResult; throws Error{Format} naming `origin` when the bytes are not
// a protobuf message, hold no or several output files, or a digest that is not SHA-256 hex.
// Fields kiln does not write (exit code, stdout digests, metadata) are skipped.
CachedOutput decode_action_result(std::string_view bytes, const std::string& origin);

std::string action_path(const std::string& key);   // "ac/<key>"
std::string blob_path(const std::string& sha256);  // "cas/<sha256>"

// ---- where the entries are (I/O behind a small interface, no policy) ----

struct BackendRead {
  enum class Status { Found, Absent, TooLarge, Failed };
  Status status = Status::Absent;
  std::string bytes;   // Found
  std::string reason;  // TooLarge, Failed: what happened, naming the path or URL
};
struct BackendWrite {
  bool ok = false;
  std::string reason;  // !ok: what happened, naming the path or URL
};

class CacheBackend {
 public:
  virtual ~CacheBackend() = default;
  // The directory or URL, without credentials: for messages and --json.
  virtual std::string location() const = 0;
  // Thread-safe. Reads <location>/<path>, refusing more than max_bytes (TooLarge).
  virtual BackendRead read(const std::string& path, std::uint64_t max_bytes) = 0;
  // Thread-safe. Replaces <location>/<path> as a whole: a reader sees the old or the new bytes.
  virtual BackendWrite write(const std::string& path, std::string_view bytes) = 0;
};

// A directory (created when missing): atomic writes (a temporary file beside, renamed).
// Throws Error{Io} naming the directory when it cannot be created or is not a directory.
std::unique_ptr<CacheBackend> make_directory_backend(const std::string& dir);

// Time bounds of one request to a remote cache (core/transport); a remote that breaks one is
// dropped for the rest of the build (ResultCache), so a dead or slow one costs at most about one
// request's deadline, plus the connect timeout for one that does not answer at all.
struct RemoteBounds {
  long connect_timeout_ms = 2000;
  long request_deadline_ms = 10000;  // the whole request, body included
  long low_speed_bytes = 4096;       // slower than this for low_speed_seconds: timed out
  long low_speed_seconds = 3;
};
// An http:// or https:// base URL (user:password@ in it is sent as basic auth, never printed).
// `ca_bundle`: PEM file for https (empty: the system store; KILN_CA_BUNDLE in the CLI).
std::unique_ptr<CacheBackend> make_http_backend(const std::string& url,
                                                const RemoteBounds& bounds = {},
                                                const std::string& ca_bundle = "");

// ---- the policy ----

struct CacheLookup {
  enum class Outcome {
    Hit,          // bytes: the output, size and SHA-256 as its entry says
    Miss,         // no entry, or an entry whose bytes are gone
    Refused,      // an entry that is malformed, too large, or whose bytes do not match it
    Unavailable,  // the cache failed (I/O error, connection, timeout, HTTP error)
  };
  Outcome outcome = Outcome::Miss;
  std::string bytes;
  std::string reason;               // Refused, Unavailable: why, naming the entry
  std::uint64_t bytes_fetched = 0;  // entry and output bytes read
};

struct CacheStore {
  bool ok = false;
  std::string reason;              // !ok: why
  std::uint64_t bytes_stored = 0;  // entry and output bytes written
};

class ResultCache {
 public:
  explicit ResultCache(std::unique_ptr<CacheBackend> backend) : backend_(std::move(backend)) {}
  std::string location() const { return backend_->location(); }
  // Thread-safe. `output_name` is what the entry must name (another name: Refused).
  CacheLookup lookup(const std::string& key, const std::string& output_name);
  // Thread-safe. The output first, then the entry that points at it.
  CacheStore store(const std::string& key, const std::string& output_name,
                   const std::string& bytes);

 private:
  std::unique_ptr<CacheBackend> backend_;
};

// --cache's value: http:// or https:// is a remote, any other text without "://" a directory;
// another scheme (s3://, grpc://, file://) is Error{Usage} naming the value and both forms.
// The directory is created when missing (Error{Io} when it cannot be).
std::unique_ptr<ResultCache> open_result_cache(const std::string& location,
                                               const RemoteBounds& bounds = {},
                                               const std::string& ca_bundle = "");

}  // namespace kiln::result_cache
