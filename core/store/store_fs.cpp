#include "store/store_fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "io/atomic_file.hpp"
#include "io/file_descriptor.hpp"

namespace kiln {

StoreListing DiskStoreFs::list(const std::string& dir, std::string_view package) const {
  return list_store_archive_dirs(dir, package);
}

std::optional<FileIdentity> DiskStoreFs::identity(const std::string& path) const {
  return identity_of(path);
}

std::string DiskStoreFs::read(const std::string& path, std::uint64_t max_bytes) const {
  return read_whole_file(path, max_bytes);
}

std::optional<std::vector<std::string>> DiskStoreFs::pread(
    const std::string& path, const FileIdentity& id,
    const std::vector<std::pair<std::size_t, std::size_t>>& ranges) const {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !(identity_of(st) == id))
    return std::nullopt;
  std::vector<std::string> out;
  out.reserve(ranges.size());
  for (const auto& [begin, end] : ranges) {
    if (begin > end || end > static_cast<std::uint64_t>(id.size)) return std::nullopt;
    std::string bytes(end - begin, '\0');
    if (pread_full(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(begin)) !=
        static_cast<ssize_t>(bytes.size()))
      return std::nullopt;
    out.push_back(std::move(bytes));
  }
  // Rewritten in place while read: the parts may mix two texts.
  if (::fstat(fd.get(), &st) != 0 || !(identity_of(st) == id)) return std::nullopt;
  return out;
}

std::shared_ptr<const StoreFs> disk_store_fs() {
  static const std::shared_ptr<const StoreFs> disk = std::make_shared<DiskStoreFs>();
  return disk;
}

}  // namespace kiln
