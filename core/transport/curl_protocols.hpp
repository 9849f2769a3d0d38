#pragma once
// Which protocols one libcurl transfer may use, set the way the loaded libcurl understands: as
// text (CURLOPT_PROTOCOLS_STR, libcurl 7.85 and later, where the bit-mask options are
// deprecated) or, where libcurl answers CURLE_UNKNOWN_OPTION to that (Debian 11's 7.74, Ubuntu
// 22.04's 7.81, RHEL 9's 7.76: the hosts of the tarballs' and wheels' glibc floors), as bit masks
// (CURLOPT_PROTOCOLS). The rule: https may only ever lead to https; plain http may upgrade to
// https (the transport checks the host of a redirect); file:// never leaves file://.
#include <string>

#include "runtime/lazy_libs.hpp"

namespace kiln::transport {

// Sets the allow-list for the first request and for redirects on `easy` for a URL of `scheme`
// ("https", "http", anything else: file). Returns libcurl's answer to the last option set.
CURLcode allow_protocols(const runtime::lazy_libs::CurlApi& api, CURL* easy,
                         const std::string& scheme);

}  // namespace kiln::transport
