#pragma once
// A streaming reader for kiln archives (.tar.zst): one member at a time, never the whole
// archive in memory. Every member header is checked (plain regular file, safe name, no
// duplicates) and every count and size is capped (limits.hpp) before its data is read, and
// again on the bytes actually decompressed, so a decompression bomb stops at the first header
// that claims too much. Callers decide from the manifest (the first member) what to accept
// next: see check_archive_stream in store.cpp.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "io/limits.hpp"

namespace kiln::io {
class Sha256;
}

namespace kiln::format {

struct ArchiveLimits {
  std::uint64_t max_member_bytes = io::limits::kMaxMemberBytes;
  std::uint64_t max_total_bytes = io::limits::kMaxUnpackedBytes;
  std::uint64_t max_members = io::limits::kMaxMembers;
};

struct ArchiveMemberHeader {
  std::string name;
  std::uint64_t size = 0;  // as the tar header declares it; the data is checked against it
};

class ArchiveStream {
 public:
  // Opens a regular file (a FIFO or device is refused with Error{Io}, without blocking).
  // Every compressed byte read is also fed to `raw_hash` when given; finish() feeds the rest,
  // so after finish() it holds the digest of the whole file as read.
  static ArchiveStream open_file(const std::filesystem::path& path, ArchiveLimits limits = {},
                                 io::Sha256* raw_hash = nullptr);
  // Over bytes in memory; `origin` names the archive in errors.
  static ArchiveStream open_memory(std::string_view bytes, const std::string& origin,
                                   ArchiveLimits limits = {});

  ArchiveStream(ArchiveStream&&) noexcept;
  ArchiveStream& operator=(ArchiveStream&&) noexcept;
  ~ArchiveStream();

  // The next member's checked header, or nullopt at the end. The previous member's data is
  // skipped if it was not read. Error{Format} for a refused entry, Error{Limit} when the
  // member count, the member's declared size or the running total exceeds a limit.
  std::optional<ArchiveMemberHeader> next();
  // Streams the current member's data to `sink` in chunks; Error{Format} when the data does
  // not match the declared size.
  void read_data(const std::function<void(const char*, std::size_t)>& sink);
  // The current member's data, at most `max_bytes` (Error{Limit} above it).
  std::string read_data_whole(std::uint64_t max_bytes);
  // Reads the remaining raw bytes (into raw_hash) and closes: call after next() gave nullopt.
  void finish();

  const std::string& origin() const;

 private:
  struct Impl;
  explicit ArchiveStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::format
