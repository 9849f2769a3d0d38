// HTTP response header lines as libcurl hands them to kiln (core/transport/http_transport.cpp):
// header_value picks Retry-After out of a raw line, parse_retry_after reads delta-seconds or an
// HTTP-date. Whatever a mirror sends, the delay is never negative, and delta-seconds never
// exceed the nine digits the parser takes.
#include "fuzz_util.hpp"
#include "transport/http_transport.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string line(kiln::fuzz::as_text(data, size));
  const std::time_t now = 1700000000;
  kiln::fuzz::refuses_cleanly(
      [&] {
        if (auto s = kiln::transport::parse_retry_after_seconds(line); s && (*s < 0 || *s > 999999999))
          kiln::fuzz::finding("delta-seconds out of range: " + std::to_string(*s));
        auto value = kiln::transport::header_value(line, "retry-after");
        if (!value) return;
        if (auto delay = kiln::transport::parse_retry_after(*value, now); delay && *delay < 0)
          kiln::fuzz::finding("negative Retry-After delay " + std::to_string(*delay));
      },
      {});
  return 0;
}
