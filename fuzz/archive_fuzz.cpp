// The tar.zst archive reader (core/format/archive.cpp read_archive_bytes, what `kiln fetch`,
// `kiln install` and the loader unpack; plain tar too, which it also accepts, so that mutations
// reach the tar headers instead of dying in the zstd frame) and the member check that follows it
// (verify_archive_members: manifest.json first, every artifact as the manifest says).
#include "format/archive.hpp"
#include "fuzz_util.hpp"
#include "store/store.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz.tar.zst";
  // The bound every caller uses (kMaxArchiveBytes): memory beyond -rss_limit_mb is a finding,
  // so a bomb that the reader lets through is one.
  std::vector<format::ArchiveMember> members;
  if (!fuzz::refuses_cleanly(
          [&] { members = format::read_archive_bytes(fuzz::as_text(data, size), origin); },
          {ErrorKind::Format, ErrorKind::Limit}, origin))
    return 0;
  std::uint64_t total = 0;
  for (const auto& m : members) {
    total += m.data.size();
    if (m.name.empty() || m.name.find('/') != std::string::npos || m.name == "..")
      fuzz::finding("read_archive_bytes returned member name '" + m.name + "'");
  }
  if (total > format::kMaxArchiveBytes) fuzz::finding("members hold " + std::to_string(total) + " bytes");
  fuzz::refuses_cleanly([&] { (void)store::verify_archive_members(members, origin); },
                        {ErrorKind::Format, ErrorKind::Stale, ErrorKind::Limit}, origin);
  return 0;
}
