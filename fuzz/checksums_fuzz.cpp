// parse_checksums (packager/mirror/mirror_files.cpp): the upstream <pkg>-<ver>-SHA256SUMS that
// `kiln mirror sync` reads, and classify_release_file on every name it lists. What parses must
// survive checksums_to_text and parse again to the same entries.
#include "fuzz_util.hpp"
#include "mirror/mirror.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz-SHA256SUMS";
  const std::string self = mirror::checksums_file_name("kiln-kernels", "0.1.0");
  std::vector<mirror::ChecksumEntry> entries;
  if (!fuzz::refuses_cleanly(
          [&] { entries = mirror::parse_checksums(fuzz::as_text(data, size), origin, self); },
          {ErrorKind::Format}, origin))
    return 0;
  for (const auto& e : entries) (void)mirror::classify_release_file(e.name, "kiln-kernels", "0.1.0");
  std::string text;
  if (!fuzz::refuses_cleanly([&] { text = mirror::checksums_to_text(entries); }, {})) return 0;
  std::vector<mirror::ChecksumEntry> again;
  if (!fuzz::refuses_cleanly([&] { again = mirror::parse_checksums(text, "canonical", self); }, {}))
    return 0;
  if (again.size() != entries.size()) fuzz::finding("round trip changed the entry count");
  for (std::size_t i = 0; i < again.size(); ++i)
    if (again[i].name != entries[i].name || again[i].sha256 != entries[i].sha256)
      fuzz::finding("round trip changed entry '" + entries[i].name + "'");
  return 0;
}
