// The protocol allow-list of a transfer (core/transport/curl_protocols.hpp), on a real easy
// handle of this machine's libcurl (7.85 or later: the text options), and on the same libcurl
// behind a table whose easy_setopt answers CURLE_UNKNOWN_OPTION to the text options, as the
// libcurl of Debian 11 (7.74) and Ubuntu 22.04 (7.81) does: the bit masks must then be set, and
// a transfer of a protocol they leave out must be refused by libcurl before any connection.
#include <gtest/gtest.h>

#include <cstdarg>
#include <memory>
#include <vector>

#include "runtime/lazy_libs.hpp"
#include "transport/curl_protocols.hpp"

namespace kiln::transport {
namespace {

using runtime::lazy_libs::CurlApi;

const CurlApi& real() { return runtime::lazy_libs::curl("the protocol allow-list tests"); }

// This machine's libcurl, every option recorded; with `g_text_unknown` a libcurl older than
// 7.85, to which the text options are unknown. Every other option goes to the real one (long
// options as long, the others as pointers: the only kinds set here).
std::vector<int>& options_seen() {
  static std::vector<int> seen;
  return seen;
}
bool g_text_unknown = false;
CURLcode recording_setopt(CURL* easy, CURLoption option, ...) {
  options_seen().push_back(option);
  if (g_text_unknown &&
      (option == CURLOPTTYPE_STRINGPOINT + 318 || option == CURLOPTTYPE_STRINGPOINT + 319))
    return CURLE_UNKNOWN_OPTION;
  va_list ap;
  va_start(ap, option);
  CURLcode rc = option < CURLOPTTYPE_OBJECTPOINT
                    ? real().easy_setopt(easy, option, va_arg(ap, long))
                    : real().easy_setopt(easy, option, va_arg(ap, void*));
  va_end(ap);
  return rc;
}
// A libcurl that fails every option with CURLE_OUT_OF_MEMORY.
CURLcode out_of_memory_setopt(CURL*, CURLoption option, ...) {
  options_seen().push_back(option);
  return CURLE_OUT_OF_MEMORY;
}
CurlApi recording_libcurl(bool text_unknown) {
  g_text_unknown = text_unknown;
  CurlApi api = real();
  api.easy_setopt = recording_setopt;
  return api;
}

struct Easy {
  std::unique_ptr<CURL, void (*)(CURL*)> handle{real().easy_init(), real().easy_cleanup};
  CURL* get() const { return handle.get(); }
};

// Performs a transfer of `url` on a handle whose allow-list was set for `scheme` through `api`.
CURLcode transfer(const CurlApi& api, const std::string& scheme, const std::string& url) {
  Easy easy;
  EXPECT_EQ(allow_protocols(api, easy.get(), scheme), CURLE_OK);
  real().easy_setopt(easy.get(), CURLOPT_URL, url.c_str());
  real().easy_setopt(easy.get(), CURLOPT_CONNECTTIMEOUT_MS, 200L);
  return real().easy_perform(easy.get());
}

TEST(CurlProtocols, ThisLibcurlTakesTheTextOptionsAndRefusesAProtocolLeftOut) {
  CurlApi api = recording_libcurl(/*text_unknown=*/false);
  options_seen().clear();
  {
    Easy easy;
    EXPECT_EQ(allow_protocols(api, easy.get(), "https"), CURLE_OK);
  }
  // Both text options, accepted: no bit mask is set.
  EXPECT_EQ(options_seen(),
            (std::vector<int>{CURLOPTTYPE_STRINGPOINT + 318, CURLOPTTYPE_STRINGPOINT + 319}));
  // https only: an http:// URL is refused by libcurl itself, before any connection.
  EXPECT_EQ(transfer(api, "https", "http://127.0.0.1:9/"), CURLE_UNSUPPORTED_PROTOCOL);
  EXPECT_EQ(transfer(api, "file", "http://127.0.0.1:9/"), CURLE_UNSUPPORTED_PROTOCOL);
}

TEST(CurlProtocols, ALibcurlWithoutTheTextOptionsGetsTheBitMasks) {
  CurlApi old = recording_libcurl(/*text_unknown=*/true);
  for (const char* scheme : {"https", "http", "file"}) {
    options_seen().clear();
    Easy easy;
    EXPECT_EQ(allow_protocols(old, easy.get(), scheme), CURLE_OK) << scheme;
    // The text option was tried first, then both masks.
    EXPECT_EQ(options_seen(), (std::vector<int>{CURLOPTTYPE_STRINGPOINT + 318,
                                                CURLOPTTYPE_LONG + 181, CURLOPTTYPE_LONG + 182}))
        << scheme;
  }
  // The masks hold: https only refuses http://, file only refuses http://; http may go on to
  // connect (nothing listens on port 9: a connection error, not a refusal of the protocol).
  EXPECT_EQ(transfer(old, "https", "http://127.0.0.1:9/"), CURLE_UNSUPPORTED_PROTOCOL);
  EXPECT_EQ(transfer(old, "file", "http://127.0.0.1:9/"), CURLE_UNSUPPORTED_PROTOCOL);
  EXPECT_NE(transfer(old, "http", "http://127.0.0.1:9/"), CURLE_UNSUPPORTED_PROTOCOL);
}

TEST(CurlProtocols, AnotherErrorFromTheTextOptionIsReturnedAndNoMaskIsSet) {
  CurlApi api = real();
  api.easy_setopt = out_of_memory_setopt;
  options_seen().clear();
  Easy easy;
  EXPECT_EQ(allow_protocols(api, easy.get(), "https"), CURLE_OUT_OF_MEMORY);
  EXPECT_EQ(options_seen(), (std::vector<int>{CURLOPTTYPE_STRINGPOINT + 318}));
}

}  // namespace
}  // namespace kiln::transport
