// Redirects through a libcurl without the URL API (older than 7.62: RHEL 8's 7.61), which
// libkiln still loads (runtime/lazy_libs.hpp): every redirect is refused, naming both URLs and
// what to do, where with the URL API the same redirect is allowed. The table is this machine's
// libcurl with the URL API's entries cleared, as dlsym leaves them on such a libcurl.
#include <gtest/gtest.h>

#include <string>

#include "runtime/lazy_libs.hpp"
#include "transport/http_transport.hpp"

namespace kiln::transport {
namespace {

using runtime::lazy_libs::CurlApi;

CurlApi without_url_api() {
  CurlApi api = runtime::lazy_libs::curl("the redirect tests");
  api.url = nullptr;
  api.url_cleanup = nullptr;
  api.url_get = nullptr;
  api.url_set = nullptr;
  return api;
}

TEST(RedirectCheck, ThisLibcurlHasTheUrlApiAndAllowsAnHttpsRedirect) {
  const CurlApi& api = runtime::lazy_libs::curl("the redirect tests");
  EXPECT_TRUE(api.has_url_api());
  EXPECT_EQ(redirect_refusal(api, "https://m.example/r/i.json", "https://cdn.example/x"), "");
}

TEST(RedirectCheck, WithoutTheUrlApiEveryRedirectIsRefusedSayingWhy) {
  CurlApi api = without_url_api();
  EXPECT_FALSE(api.has_url_api());
  std::string why = redirect_refusal(api, "https://m.example/r/i.json", "https://cdn.example/x");
  EXPECT_NE(why.find("https://m.example/r/i.json"), std::string::npos) << why;
  EXPECT_NE(why.find("https://cdn.example/x"), std::string::npos) << why;
  EXPECT_NE(why.find("older than 7.62"), std::string::npos) << why;
  EXPECT_NE(why.find("install libcurl 7.62 or newer"), std::string::npos) << why;
}

}  // namespace
}  // namespace kiln::transport
