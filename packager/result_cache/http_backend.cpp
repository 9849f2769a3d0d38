// The result cache on a server speaking the HTTP cache protocol of Bazel's remote caching: GET
// and PUT of <url>/ac/<key> and <url>/cas/<sha256>, 404 for an entry that is not there. Served
// by bazel-remote, BuildBuddy and others, and by nginx's WebDAV module (`dav_methods PUT;
// create_full_put_path on;`). Every request goes through core/transport, bounded in size and
// time (RemoteBounds).
#include <string>

#include "result_cache/result_cache.hpp"
#include "transport/http_transport.hpp"

namespace kiln::result_cache {

namespace {

using transport::TransferRequest;
using transport::TransferResult;
using transport::TransferStatus;

// The URL with any user:password@ taken out, for what kiln prints.
std::string without_credentials(const std::string& url) {
  std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  std::size_t host = scheme_end + 3;
  std::size_t path = url.find('/', host);
  std::size_t at = url.rfind('@', path == std::string::npos ? std::string::npos : path);
  if (at == std::string::npos || at < host) return url;
  return url.substr(0, host) + url.substr(at + 1);
}

std::string failure(const char* method, const std::string& url, const TransferResult& r) {
  std::string what = r.status == TransferStatus::Http ? "HTTP " + std::to_string(r.http_status)
                                                      : std::string(to_string(r.status));
  if (!r.message.empty() && r.status != TransferStatus::Http) what += " (" + r.message + ")";
  return std::string(method) + " " + url + ": " + what;
}

class HttpBackend final : public CacheBackend {
 public:
  HttpBackend(std::string url, const RemoteBounds& bounds, std::string ca_bundle)
      : url_(std::move(url)),
        shown_(without_credentials(url_)),
        bounds_(bounds),
        ca_bundle_(std::move(ca_bundle)),
        transport_(transport::make_curl_transport("kiln build's result cache (--cache)")) {}

  std::string location() const override { return shown_; }

  BackendRead read(const std::string& path, std::uint64_t max_bytes) override {
    BackendRead out;
    bool too_large = false;
    TransferResult r = transport_->get(request(path), [&](const char* data, std::size_t n) {
      if (out.bytes.size() + n > max_bytes) {
        too_large = true;
        return false;
      }
      out.bytes.append(data, n);
      return true;
    });
    if (r.status == TransferStatus::Ok) {
      out.status = BackendRead::Status::Found;
    } else if (r.status == TransferStatus::Http && r.http_status == 404) {
      out.status = BackendRead::Status::Absent;
    } else if (too_large) {
      out.status = BackendRead::Status::TooLarge;
      out.reason = shown_ + "/" + path + ": more than " + std::to_string(max_bytes) + " bytes";
    } else {
      out.status = BackendRead::Status::Failed;
      out.reason = failure("GET", shown_ + "/" + path, r);
    }
    if (out.status != BackendRead::Status::Found) out.bytes.clear();
    return out;
  }

  BackendWrite write(const std::string& path, std::string_view bytes) override {
    BackendWrite w;
    TransferResult r = transport_->put(request(path), bytes);
    w.ok = r.status == TransferStatus::Ok;
    if (!w.ok) w.reason = failure("PUT", shown_ + "/" + path, r);
    return w;
  }

 private:
  TransferRequest request(const std::string& path) const {
    TransferRequest req;
    req.url = url_ + "/" + path;
    req.connect_timeout_ms = bounds_.connect_timeout_ms;
    req.total_timeout_ms = bounds_.request_deadline_ms;
    req.low_speed_bytes = bounds_.low_speed_bytes;
    req.low_speed_seconds = bounds_.low_speed_seconds;
    req.ca_bundle = ca_bundle_;
    return req;
  }

  std::string url_;    // no trailing '/'
  std::string shown_;  // url_ without credentials
  RemoteBounds bounds_;
  std::string ca_bundle_;
  std::unique_ptr<transport::Transport> transport_;
};

}  // namespace

std::unique_ptr<CacheBackend> make_http_backend(const std::string& url, const RemoteBounds& bounds,
                                                const std::string& ca_bundle) {
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return std::make_unique<HttpBackend>(base, bounds, ca_bundle);
}

}  // namespace kiln::result_cache
