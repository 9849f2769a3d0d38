#pragma once
// The network side of fetching, behind a small interface so the retry and trust logic in
// fetch.cpp is testable with fakes. libcurl stays inside http_transport.cpp, called through the
// table lazy_libs.hpp loads on first use (libkiln does not link it).
#include <cstddef>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/error.hpp"

// runtime/lazy_libs.hpp's libcurl table, declared only: that header brings curl.h.
namespace kiln::runtime::lazy_libs {
struct CurlApi;
}

namespace kiln::transport {

enum class TransferStatus {
  Ok,          // 2xx, or a file:// read that completed
  Http,        // the server answered with a status >= 300 (see http_status)
  Connection,  // name lookup, connect, reset, empty or cut-short reply
  Timeout,     // connect timeout, or the low-speed limit tripped (a stalled body)
  Deadline,    // the request ran past total_timeout_ms (a mirror dripping bytes just fast enough)
  Tls,         // certificate not trusted, handshake failed
  Refused,     // a redirect kiln does not follow (see make_curl_transport), too many redirects
  Missing,     // file:// path does not exist
  Aborted,     // the sink said stop (too many bytes, or writing failed): the caller knows why
};
const char* to_string(TransferStatus s);

// How early a timer may fire by steady_clock and still count as the deadline reached: curl's
// does by up to a millisecond. Used for a request's deadline and for fetch's command deadline.
constexpr long kDeadlineSlackMs = 10;

struct TransferRequest {
  std::string url;
  bool head = false;  // probe only: no body
  long connect_timeout_ms = 5000;
  long low_speed_bytes = 1024;
  long low_speed_seconds = 10;
  long total_timeout_ms = 0;  // the whole request, redirects included; 0: none (Deadline)
  std::string ca_bundle;      // empty: the system store
};

struct TransferResult {
  TransferStatus status = TransferStatus::Ok;
  long http_status = 0;
  std::optional<long> retry_after_s;  // from a Retry-After header, in seconds from now
  std::string message;                // human-readable detail (curl's error text)
};

// The one rule for what a failed transfer means to the user, on every path (kiln fetch under a
// pin or TUF, the loader's mirror tier, kiln mirror sync): NotFound when the file is not there
// (HTTP 404 or 410, a missing file:// path), Network for everything else (refused, timed out,
// 5xx after retries, TLS, a refused redirect, 403). Not for Ok or Aborted: the caller knows.
ErrorKind error_kind(const TransferResult& r);

// Receives the body in pieces; returning false aborts the transfer (status Aborted).
using Sink = std::function<bool(const char* data, std::size_t size)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // Thread-safe: called from several download threads at once.
  virtual TransferResult get(const TransferRequest& req, const Sink& sink) = 0;
  // Uploads `body` to req.url with HTTP PUT (kiln build's result cache; nothing on the loader's
  // path writes). Never follows a redirect: a 3xx is an Http failure. The reply's body is read
  // up to 64 KiB and dropped. Transports that only read answer Refused.
  virtual TransferResult put(const TransferRequest& req, std::string_view body);
};

// libcurl. Redirects (at most 5): from https only to https, any host (TLS names the new host);
// from http only to the same host name, http or https (nothing authenticates a plain-http
// answer, so it may not send kiln elsewhere); file:// never redirects. Anything else: Refused.
// libcurl is loaded here on first use (lazy_libs.hpp): Error{Unsupported} naming libcurl, its
// SONAME and `needed_for` (what wanted to download) when it cannot be loaded.
std::unique_ptr<Transport> make_curl_transport(
    const std::string& needed_for = "downloading from a mirror");

// The redirect rule above as a pure function over the URL that answered 3xx and the absolute
// URL it points to: empty when allowed, else why not.
std::string redirect_refusal(const std::string& from_url, const std::string& to_url);
// The same through `api`, a libcurl table: one without the URL API (libcurl older than 7.62,
// RHEL 8's 7.61) refuses every redirect, saying so; every other download works the same.
std::string redirect_refusal(const runtime::lazy_libs::CurlApi& api, const std::string& from_url,
                             const std::string& to_url);

// What to do after a failed attempt: the one place that decides retries.
struct RetryPolicy {
  int max_retries = 3;  // further attempts after the first
  long base_ms = 500;
  long cap_ms = 30000;
};
struct RetryDecision {
  bool retry = false;
  long delay_ms = 0;
  std::string reason;  // why (not) retried, for the log
};
// attempts_made counts the attempt that just failed (1 after the first). Retries 5xx, 408,
// 429 and connection errors/timeouts with exponential backoff (Retry-After honoured, capped);
// never retries 4xx, TLS failures, refused redirects, missing files, aborted transfers or a
// request past its deadline (the same mirror would drip again: the next mirror is asked).
RetryDecision decide_retry(const TransferResult& r, int attempts_made, const RetryPolicy& p);

// Parses a Retry-After value given as delta-seconds; nullopt for anything else.
std::optional<long> parse_retry_after_seconds(const std::string& value);
// The value of header `name` (lowercase) in one raw header line as curl hands it over
// ("Name: value\r\n"), untrimmed; nullopt when the line is another header or no header.
std::optional<std::string> header_value(const std::string& line, std::string_view name);
// A Retry-After value in seconds from `now`: delta-seconds, or an HTTP-date (a date already
// past gives 0); nullopt when it is neither.
std::optional<long> parse_retry_after(const std::string& value, std::time_t now);

// Mirrors that served bytes failing verification are not asked again in this process.
void mark_mirror_bad(const std::string& mirror);
bool is_mirror_bad(const std::string& mirror);
void forget_bad_mirrors();  // tests

}  // namespace kiln::transport
