// libcurl behind the Transport interface, and the pure retry decision.
#include "transport/http_transport.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <set>

#include "kiln/error.hpp"
#include "kiln/version.hpp"
#include "runtime/lazy_libs.hpp"
#include "transport/curl_protocols.hpp"

namespace kiln::transport {

const char* to_string(TransferStatus s) {
  switch (s) {
    case TransferStatus::Ok:
      return "ok";
    case TransferStatus::Http:
      return "HTTP error";
    case TransferStatus::Connection:
      return "connection failed";
    case TransferStatus::Timeout:
      return "timed out";
    case TransferStatus::Deadline:
      return "deadline passed";
    case TransferStatus::Tls:
      return "TLS verification failed";
    case TransferStatus::Refused:
      return "redirect refused";
    case TransferStatus::Missing:
      return "file missing";
    case TransferStatus::Aborted:
      return "aborted";
  }
  return "?";
}

ErrorKind error_kind(const TransferResult& r) {
  if (r.status == TransferStatus::Missing) return ErrorKind::NotFound;
  if (r.status == TransferStatus::Http && (r.http_status == 404 || r.http_status == 410))
    return ErrorKind::NotFound;
  return ErrorKind::Network;
}

std::optional<long> parse_retry_after_seconds(const std::string& value) {
  std::size_t b = value.find_first_not_of(" \t");
  std::size_t e = value.find_last_not_of(" \t\r\n");
  if (b == std::string::npos) return std::nullopt;
  std::string v = value.substr(b, e - b + 1);
  if (v.empty() || v.size() > 9) return std::nullopt;
  for (char c : v)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return std::stol(v);
}

std::optional<std::string> header_value(const std::string& line, std::string_view name) {
  std::size_t colon = line.find(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string key = line.substr(0, colon);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (key != name) return std::nullopt;
  return line.substr(colon + 1);
}

std::optional<long> parse_retry_after(const std::string& value, std::time_t now) {
  if (auto seconds = parse_retry_after_seconds(value)) return seconds;
  std::string trimmed = value.substr(0, value.find_last_not_of(" \t\r\n") + 1);
  time_t when = runtime::lazy_libs::curl("parsing the HTTP date of a Retry-After header")
                    .getdate(trimmed.c_str(), nullptr);
  if (when > 0) return std::max<long>(0, static_cast<long>(when - now));
  return std::nullopt;
}

RetryDecision decide_retry(const TransferResult& r, int attempts_made, const RetryPolicy& p) {
  RetryDecision d;
  bool transient = false;
  switch (r.status) {
    case TransferStatus::Http:
      transient = r.http_status >= 500 || r.http_status == 429 || r.http_status == 408;
      d.reason =
          "HTTP " + std::to_string(r.http_status) + (transient ? " is transient" : " is permanent");
      break;
    case TransferStatus::Connection:
    case TransferStatus::Timeout:
      transient = true;
      d.reason = std::string(to_string(r.status)) + " may be transient";
      break;
    case TransferStatus::Ok:
      d.reason = "succeeded";
      break;
    default:
      d.reason = std::string(to_string(r.status)) + " will not change on retry";
      break;
  }
  if (!transient) return d;
  if (attempts_made > p.max_retries) {
    d.reason += ", but " + std::to_string(attempts_made) + " attempts made";
    return d;
  }
  d.retry = true;
  long backoff = p.base_ms;
  for (int i = 1; i < attempts_made && backoff < p.cap_ms; ++i) backoff *= 2;
  if (r.retry_after_s && (r.http_status == 429 || r.http_status == 503)) {
    // The server said when; a hostile or confused one must not park us for hours.
    backoff = *r.retry_after_s * 1000;
    d.reason += " (Retry-After " + std::to_string(*r.retry_after_s) + " s)";
  }
  d.delay_ms = std::clamp(backoff, 0L, p.cap_ms);
  return d;
}

namespace {
std::mutex g_bad_mutex;
std::set<std::string>& bad_set() {
  static std::set<std::string> s;
  return s;
}
}  // namespace

void mark_mirror_bad(const std::string& mirror) {
  std::lock_guard<std::mutex> g(g_bad_mutex);
  bad_set().insert(mirror);
}
bool is_mirror_bad(const std::string& mirror) {
  std::lock_guard<std::mutex> g(g_bad_mutex);
  return bad_set().count(mirror) > 0;
}
void forget_bad_mirrors() {
  std::lock_guard<std::mutex> g(g_bad_mutex);
  bad_set().clear();
}

namespace {

using runtime::lazy_libs::CurlApi;

struct EasyFree {
  const CurlApi* api = nullptr;
  void operator()(CURL* c) const { api->easy_cleanup(c); }
};
struct UrlFree {
  const CurlApi* api = nullptr;
  void operator()(CURLU* u) const { api->url_cleanup(u); }
};
using UrlHandle = std::unique_ptr<CURLU, UrlFree>;

std::string url_part(const CurlApi& api, CURLU* u, CURLUPart part) {
  char* out = nullptr;
  if (api.url_get(u, part, &out, 0) != CURLUE_OK || !out) return "";
  std::string s = out;
  api.free(out);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// `location` (absolute or relative) resolved against `base`; empty when either does not parse.
// Needs libcurl's URL API (api.has_url_api()).
std::string resolve_location(const CurlApi& api, const std::string& base,
                             const std::string& location) {
  UrlHandle u(api.url(), {&api});
  if (!u || api.url_set(u.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK ||
      api.url_set(u.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK)
    return "";
  char* out = nullptr;
  if (api.url_get(u.get(), CURLUPART_URL, &out, 0) != CURLUE_OK || !out) return "";
  std::string s = out;
  api.free(out);
  return s;
}

struct CallState {
  const CurlApi* api = nullptr;
  CURL* curl = nullptr;
  const Sink* sink = nullptr;
  long status = 0;
  std::optional<long> retry_after;
  bool error_status = false;  // body of an error response: not the caller's bytes
  // Stall detection: curl's low-speed check averages over several seconds, so after a burst a
  // dead connection survives ~6 s longer than asked. No new byte for stall_ms aborts at once.
  long stall_ms = 0;
  curl_off_t last_bytes = -1;
  std::chrono::steady_clock::time_point last_progress = std::chrono::steady_clock::now();
  bool stalled = false;
  std::string redirect_refused;  // why a redirect was not followed; empty: none refused
};

int on_progress(void* userdata, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t ulnow) {
  auto* st = static_cast<CallState*>(userdata);
  auto now = std::chrono::steady_clock::now();
  // Bytes either way count as progress: an upload (put) sends before it receives.
  if (dlnow + ulnow != st->last_bytes) {
    st->last_bytes = dlnow + ulnow;
    st->last_progress = now;
    return 0;
  }
  if (st->stall_ms > 0 &&
      std::chrono::duration_cast<std::chrono::milliseconds>(now - st->last_progress).count() >
          st->stall_ms) {
    st->stalled = true;
    return 1;
  }
  return 0;
}

size_t on_header(char* buf, size_t size, size_t n, void* userdata) {
  auto* st = static_cast<CallState*>(userdata);
  std::string line(buf, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after a redirect or 100-continue): forget the previous one's headers.
    st->retry_after.reset();
    return size * n;
  }
  // Whether this response redirects is libcurl's reading of its status line, which it has
  // stored by now and follows by: a reading of our own could differ (libcurl takes
  // "HTTP/2<TAB>302" as a 302), and a Location it follows would go unchecked.
  long status = 0;
  st->api->easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 300 && status < 400) {
    if (auto location = header_value(line, "location")) {
      // curl would follow this next; decide first (the same-host rule is not a curl option).
      std::string value = *location;
      std::size_t b = value.find_first_not_of(" \t");
      std::size_t e = value.find_last_not_of(" \t\r\n");
      value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
      char* current = nullptr;
      st->api->easy_getinfo(st->curl, CURLINFO_EFFECTIVE_URL, &current);
      std::string from = current ? current : "";
      // Without the URL API nothing resolves it, and redirect_refusal refuses it, saying why.
      std::string to =
          st->api->has_url_api() ? resolve_location(*st->api, from, value) : value;
      std::string why = to.empty() ? "redirect from " + from + " to '" + value + "', not a URL"
                                   : redirect_refusal(*st->api, from, to);
      if (!why.empty()) {
        st->redirect_refused = why;
        return 0;  // aborts the transfer before curl follows
      }
    }
  }
  if (auto value = header_value(line, "retry-after"))
    st->retry_after = parse_retry_after(*value, std::time(nullptr));
  return size * n;
}

size_t on_body(char* buf, size_t size, size_t n, void* userdata) {
  auto* st = static_cast<CallState*>(userdata);
  long code = 0;
  st->api->easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &code);
  if (code >= 300) {
    // An error page is not the file; stop reading it (it may be endless too).
    st->error_status = true;
    return 0;
  }
  if (!(*st->sink)(buf, size * n)) return 0;
  return size * n;
}

// The body of a put, handed to curl as it asks.
struct UploadState {
  std::string_view data;
  std::size_t sent = 0;
};

size_t on_upload(char* buf, size_t size, size_t n, void* userdata) {
  auto* up = static_cast<UploadState*>(userdata);
  std::size_t chunk = std::min(size * n, up->data.size() - up->sent);
  std::copy_n(up->data.data() + up->sent, chunk, buf);
  up->sent += chunk;
  return chunk;
}

// A put's reply is a status page at most; more than this is not an answer worth reading.
constexpr std::size_t kMaxPutReplyBytes = 64 * 1024;

std::string scheme_of(const std::string& url) {
  std::size_t p = url.find("://");
  if (p == std::string::npos) return "";
  std::string s = url.substr(0, p);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

TransferStatus classify(CURLcode rc) {
  switch (rc) {
    case CURLE_OK:
      return TransferStatus::Ok;
    case CURLE_OPERATION_TIMEDOUT:
      return TransferStatus::Timeout;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CRL_BADFILE:
      return TransferStatus::Tls;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_TOO_MANY_REDIRECTS:
      return TransferStatus::Refused;
    case CURLE_FILE_COULDNT_READ_FILE:
      return TransferStatus::Missing;
    case CURLE_WRITE_ERROR:
    case CURLE_ABORTED_BY_CALLBACK:
      return TransferStatus::Aborted;
    default:
      return TransferStatus::Connection;
  }
}

}  // namespace

std::string redirect_refusal(const std::string& from_url, const std::string& to_url) {
  return redirect_refusal(runtime::lazy_libs::curl("checking a redirect from " + from_url),
                          from_url, to_url);
}

std::string redirect_refusal(const runtime::lazy_libs::CurlApi& api, const std::string& from_url,
                             const std::string& to_url) {
  if (!api.has_url_api())
    return "redirect from " + from_url + " to '" + to_url +
           "' not followed: the loaded libcurl is older than 7.62 and has no URL API (curl_url) "
           "to check where it leads; give the mirror's final URL, or install libcurl 7.62 or "
           "newer";
  UrlHandle f(api.url(), {&api}), t(api.url(), {&api});
  if (!f || !t || api.url_set(f.get(), CURLUPART_URL, from_url.c_str(), 0) != CURLUE_OK)
    return "redirect from '" + from_url + "', not a URL";
  if (api.url_set(t.get(), CURLUPART_URL, to_url.c_str(), 0) != CURLUE_OK)
    return "redirect from " + from_url + " to '" + to_url + "', not a URL";
  std::string fs = url_part(api, f.get(), CURLUPART_SCHEME),
              ts = url_part(api, t.get(), CURLUPART_SCHEME);
  std::string fh = url_part(api, f.get(), CURLUPART_HOST),
              th = url_part(api, t.get(), CURLUPART_HOST);
  if (fs == "https") {
    if (ts == "https") return "";
    return "redirect from https to " + ts + " (" + from_url + " -> " + to_url +
           "): https mirrors redirect to https only";
  }
  if (fs == "http") {
    if (ts != "http" && ts != "https")
      return "redirect from http to " + ts + " (" + from_url + " -> " + to_url + ")";
    if (th != fh)
      return "redirect from http host " + fh + " to another host " + th + " (" + from_url + " -> " +
             to_url + "): http mirrors redirect within their own host only";
    return "";
  }
  return "redirect from " + fs + " (" + from_url + "): never followed";
}

namespace {

class CurlTransport final : public Transport {
 public:
  explicit CurlTransport(const std::string& needed_for) : api_(runtime::lazy_libs::curl(needed_for)) {
    static std::once_flag once;
    std::call_once(once, [this] {
      if (api_.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        throw Error(ErrorKind::Internal, "curl_global_init failed");
    });
  }

  TransferResult get(const TransferRequest& req, const Sink& sink) override {
    return perform(req, sink, nullptr);
  }

  TransferResult put(const TransferRequest& req, std::string_view body) override {
    std::size_t replied = 0;
    Sink drop = [&replied](const char*, std::size_t n) {
      replied += n;
      return replied <= kMaxPutReplyBytes;
    };
    UploadState up{body};
    return perform(req, drop, &up);
  }

 private:
  // One request: a get, or a put when `upload` is given (which never follows a redirect).
  TransferResult perform(const TransferRequest& req, const Sink& sink, UploadState* upload) {
    std::unique_ptr<CURL, EasyFree> easy(api_.easy_init(), {&api_});
    if (!easy) throw Error(ErrorKind::Internal, "curl_easy_init failed");
    CURL* c = easy.get();
    CallState st;
    st.api = &api_;
    st.curl = c;
    st.sink = &sink;
    char errbuf[CURL_ERROR_SIZE] = {0};

    std::string scheme = scheme_of(req.url);
    std::string ua = std::string("kiln/") + kiln::version();
    bool ok = true;
    auto set = [&ok](CURLcode rc) { ok = ok && rc == CURLE_OK; };
    set(api_.easy_setopt(c, CURLOPT_URL, req.url.c_str()));
    set(api_.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf));
    set(api_.easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
    set(allow_protocols(api_, c, scheme));  // curl_protocols.hpp: the rule, any libcurl
    set(api_.easy_setopt(c, CURLOPT_FOLLOWLOCATION, scheme == "file" || upload ? 0L : 1L));
    set(api_.easy_setopt(c, CURLOPT_MAXREDIRS, 5L));
    set(api_.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L));
    set(api_.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L));
    if (!req.ca_bundle.empty()) set(api_.easy_setopt(c, CURLOPT_CAINFO, req.ca_bundle.c_str()));
    set(api_.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, req.connect_timeout_ms));
    set(api_.easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, req.low_speed_bytes));
    set(api_.easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.low_speed_seconds));
    if (req.total_timeout_ms > 0)
      set(api_.easy_setopt(c, CURLOPT_TIMEOUT_MS, req.total_timeout_ms));
    set(api_.easy_setopt(c, CURLOPT_USERAGENT, ua.c_str()));
    // Larger reads mean fewer write(2) calls into the temp file for 100 MB archives.
    set(api_.easy_setopt(c, CURLOPT_BUFFERSIZE, 256L * 1024));
    if (req.head) set(api_.easy_setopt(c, CURLOPT_NOBODY, 1L));
    if (upload) {
      set(api_.easy_setopt(c, CURLOPT_UPLOAD, 1L));
      set(api_.easy_setopt(c, CURLOPT_READFUNCTION, on_upload));
      set(api_.easy_setopt(c, CURLOPT_READDATA, upload));
      set(api_.easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
                           static_cast<curl_off_t>(upload->data.size())));
    }
    st.stall_ms = req.low_speed_bytes > 0 ? req.low_speed_seconds * 1000 : 0;
    set(api_.easy_setopt(c, CURLOPT_NOPROGRESS, 0L));
    set(api_.easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress));
    set(api_.easy_setopt(c, CURLOPT_XFERINFODATA, &st));
    set(api_.easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header));
    set(api_.easy_setopt(c, CURLOPT_HEADERDATA, &st));
    set(api_.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body));
    set(api_.easy_setopt(c, CURLOPT_WRITEDATA, &st));
    if (!ok) throw Error(ErrorKind::Internal, "libcurl refused an option for " + req.url);

    auto started = std::chrono::steady_clock::now();
    CURLcode rc = api_.easy_perform(c);
    long elapsed_ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - started)
                                            .count());
    TransferResult r;
    api_.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.http_status);
    r.retry_after_s = st.retry_after;
    if (st.error_status || (rc == CURLE_OK && r.http_status >= 300)) {
      r.status = TransferStatus::Http;
      r.message = "HTTP " + std::to_string(r.http_status);
      return r;
    }
    r.status = classify(rc);
    if (!st.redirect_refused.empty()) {
      r.status = TransferStatus::Refused;
      r.message = st.redirect_refused;
      return r;
    }
    // curl's timer fires up to a millisecond early by this clock (seen: 1499 ms for a 1500 ms
    // deadline, then retried as a plain timeout under load); kDeadlineSlackMs keeps it a
    // Deadline. fetch's command deadline uses the same slack (fetch.cpp, check_deadline), so a
    // request curl ends early at the command's deadline ends the command, as one on time does.
    if (rc == CURLE_OPERATION_TIMEDOUT && req.total_timeout_ms > 0 &&
        elapsed_ms + kDeadlineSlackMs >= req.total_timeout_ms) {
      curl_off_t got = 0;
      api_.easy_getinfo(c, CURLINFO_SIZE_DOWNLOAD_T, &got);
      r.status = TransferStatus::Deadline;
      r.message = "not done within its deadline of " + std::to_string(req.total_timeout_ms) +
                  " ms (" + std::to_string(static_cast<long long>(got)) + " bytes received)";
      return r;
    }
    if (st.stalled) {
      r.status = TransferStatus::Timeout;
      r.message = "stalled: no data for " + std::to_string(req.low_speed_seconds) + " s";
      return r;
    }
    if (r.status != TransferStatus::Ok) {
      r.message = api_.easy_strerror(rc);
      if (errbuf[0]) r.message += std::string(": ") + errbuf;
    }
    return r;
  }

  const CurlApi& api_;
};

}  // namespace

TransferResult Transport::put(const TransferRequest& req, std::string_view) {
  TransferResult r;
  r.status = TransferStatus::Refused;
  r.message = "this transport does not upload (" + req.url + ")";
  return r;
}

std::unique_ptr<Transport> make_curl_transport(const std::string& needed_for) {
  return std::make_unique<CurlTransport>(needed_for);
}

}  // namespace kiln::transport
