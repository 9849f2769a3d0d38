#include "transport/curl_protocols.hpp"

namespace kiln::transport {

CURLcode allow_protocols(const runtime::lazy_libs::CurlApi& api, CURL* easy,
                         const std::string& scheme) {
  // The options by number, so that libcurl headers older and newer than 7.85 compile this
  // (older ones lack the text options, newer ones mark the masks deprecated).
  constexpr auto kText = static_cast<CURLoption>(CURLOPTTYPE_STRINGPOINT + 318);
  constexpr auto kRedirectText = static_cast<CURLoption>(CURLOPTTYPE_STRINGPOINT + 319);
  constexpr auto kMask = static_cast<CURLoption>(CURLOPTTYPE_LONG + 181);
  constexpr auto kRedirectMask = static_cast<CURLoption>(CURLOPTTYPE_LONG + 182);
  constexpr long kHttp = 1L << 0, kHttps = 1L << 1, kFile = 1L << 10;
  const bool https = scheme == "https", http = scheme == "http";
  const char* text = https ? "https" : http ? "http,https" : "file";
  CURLcode rc = api.easy_setopt(easy, kText, text);
  if (rc == CURLE_OK) return api.easy_setopt(easy, kRedirectText, text);
  if (rc != CURLE_UNKNOWN_OPTION) return rc;
  const long mask = https ? kHttps : http ? kHttp | kHttps : kFile;
  rc = api.easy_setopt(easy, kMask, mask);
  return rc == CURLE_OK ? api.easy_setopt(easy, kRedirectMask, mask) : rc;
}

}  // namespace kiln::transport
