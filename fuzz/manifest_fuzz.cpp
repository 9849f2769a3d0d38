// parse_manifest (core/format/manifest.cpp) over any bytes: manifest.json from an archive or a
// store. Accepted input must round-trip through manifest_to_json, and find() must find every
// artifact it lists.
#include "format/manifest.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz-manifest.json";
  format::Manifest m;
  if (!fuzz::refuses_cleanly([&] { m = format::parse_manifest(fuzz::as_text(data, size), origin); },
                             {ErrorKind::Format, ErrorKind::Stale, ErrorKind::Limit}, origin))
    return 0;
  for (const auto& a : m.artifacts)
    if (m.find(a.uri) == nullptr) fuzz::finding("find() misses listed uri '" + a.uri + "'");
  const std::string canonical = format::manifest_to_json(m);
  format::Manifest again;
  if (!fuzz::refuses_cleanly([&] { again = format::parse_manifest(canonical, "canonical"); }, {})) return 0;
  if (format::manifest_to_json(again) != canonical)
    fuzz::finding("manifest_to_json(parse_manifest(x)) is not stable:\n" + canonical);
  return 0;
}
