#pragma once
// What reading a store takes from the disk, and nothing more: list a store directory by the
// store rule (store_scan.hpp), a file's identity, a whole file, ranges of a file while it keeps
// an identity. No memory, no scan records, no ranking: that policy sits above, in plan's
// StoreScanner (plan/resolver.hpp), as ninja keeps DiskInterface apart from the caching above
// it. Tests put a fake behind this interface to count or refuse what is read.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/manifest_entry.hpp"
#include "io/identity_cache.hpp"
#include "store/store_scan.hpp"

namespace kiln::store {

class StoreFs {
 public:
  virtual ~StoreFs() = default;
  // The archive directories of `dir` (list_store_archive_dirs); `package` empty: of any
  // package. Never throws: a store that cannot be listed says why in the listing.
  virtual StoreListing list(const std::string& dir, std::string_view package) const = 0;
  // stat(path), following links; nullopt when it fails.
  virtual std::optional<io::FileIdentity> identity(const std::string& path) const = 0;
  // The whole of a regular file of at most `max_bytes` (read_whole_file). Throws Error
  // (NotFound, Io, Limit) naming the path.
  virtual std::string read(const std::string& path, std::uint64_t max_bytes) const = 0;
  // Byte ranges [first, second) of `path` while it has identity `id`, one open and a pread per
  // range; nullopt when it is no longer `id` (rewritten, replaced, grown, changed while read),
  // is not a regular file, or a range cannot be read. Never throws.
  virtual std::optional<std::vector<std::string>> pread(
      const std::string& path, const io::FileIdentity& id,
      const std::vector<std::pair<std::size_t, std::size_t>>& ranges) const = 0;
  // `path` opened while it has identity `id`, for a manifest lookup's reads one range at a time
  // (ManifestEntries::open) and a last check that it is still `id`; nullptr when it is not `id`
  // or not a regular file. Never throws. By default each range is one pread() above (a fake
  // disk need not implement it); the real disk keeps one descriptor.
  virtual std::unique_ptr<format::ManifestFile> open_manifest(const std::string& path,
                                                      const io::FileIdentity& id) const;
};

// The real disk.
class DiskStoreFs : public StoreFs {
 public:
  StoreListing list(const std::string& dir, std::string_view package) const override;
  std::optional<io::FileIdentity> identity(const std::string& path) const override;
  std::string read(const std::string& path, std::uint64_t max_bytes) const override;
  std::optional<std::vector<std::string>> pread(
      const std::string& path, const io::FileIdentity& id,
      const std::vector<std::pair<std::size_t, std::size_t>>& ranges) const override;
  std::unique_ptr<format::ManifestFile> open_manifest(const std::string& path,
                                              const io::FileIdentity& id) const override;
};

// One DiskStoreFs shared by every reader that is given none.
std::shared_ptr<const StoreFs> disk_store_fs();

}  // namespace kiln::store
