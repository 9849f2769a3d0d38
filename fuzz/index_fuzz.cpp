// parse_index (core/format/manifest.cpp) over any bytes: the release index a mirror serves.
// Accepted input must round-trip: index_to_json of what was parsed parses again to the same
// canonical bytes.
#include "format/manifest.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz-index.json";
  format::Index idx;
  if (!fuzz::refuses_cleanly([&] { idx = format::parse_index(fuzz::as_text(data, size), origin); },
                             {ErrorKind::Format, ErrorKind::Stale, ErrorKind::Limit}, origin))
    return 0;
  const std::string canonical = format::index_to_json(idx);
  format::Index again;
  if (!fuzz::refuses_cleanly([&] { again = format::parse_index(canonical, "canonical"); }, {})) return 0;
  if (format::index_to_json(again) != canonical)
    fuzz::finding("index_to_json(parse_index(x)) is not stable:\n" + canonical);
  return 0;
}
