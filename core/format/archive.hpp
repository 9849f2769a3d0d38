#pragma once
// Reproducible tar.zst archives through libarchive, and safe extraction.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::format {

struct ArchiveMember {
  std::string name;  // plain file name inside the archive (no directories)
  std::string data;
};

// Writes members in the given order (manifest.json first, then sorted artifacts) with fixed
// mtime (mtime_epoch), uid/gid 0, numeric owner, mode 0644, no pax atime/ctime, zstd at a fixed
// level. Writes to a temp file beside `out` and renames on success: no partial archive is left.
void write_archive(const std::filesystem::path& out, const std::vector<ArchiveMember>& members,
                   std::int64_t mtime_epoch, int zstd_level = 19);

// Reads every member into memory, refusing absolute paths, "..", directories, links, device
// files and anything but regular files; throws Error{Format} naming the archive and the entry.
std::vector<ArchiveMember> read_archive(const std::filesystem::path& archive);

// The most read_archive accepts in all members together: a decompression bomb stops here.
constexpr std::uint64_t kMaxArchiveBytes = std::uint64_t{4} << 30;
// As above with an explicit limit (tests, and callers that know a smaller bound).
std::vector<ArchiveMember> read_archive(const std::filesystem::path& archive,
                                        std::uint64_t max_total_bytes);
// As read_archive, over bytes already in memory: callers that hash the archive first unpack the
// very bytes they hashed. `origin` names the archive in errors.
std::vector<ArchiveMember> read_archive_bytes(std::string_view bytes, const std::string& origin,
                                              std::uint64_t max_total_bytes = kMaxArchiveBytes);

}  // namespace kiln::format
