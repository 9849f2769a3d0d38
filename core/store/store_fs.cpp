#include "store/store_fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "io/atomic_file.hpp"
#include "io/file_descriptor.hpp"

namespace kiln::store {

StoreListing DiskStoreFs::list(const std::string& dir, std::string_view package) const {
  return list_store_archive_dirs(dir, package);
}

std::optional<io::FileIdentity> DiskStoreFs::identity(const std::string& path) const {
  return io::identity_of(path);
}

std::string DiskStoreFs::read(const std::string& path, std::uint64_t max_bytes) const {
  return io::read_whole_file(path, max_bytes);
}

std::optional<std::vector<std::string>> DiskStoreFs::pread(
    const std::string& path, const io::FileIdentity& id,
    const std::vector<std::pair<std::size_t, std::size_t>>& ranges) const {
  io::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !(io::identity_of(st) == id))
    return std::nullopt;
  std::vector<std::string> out;
  out.reserve(ranges.size());
  for (const auto& [begin, end] : ranges) {
    if (begin > end || end > static_cast<std::uint64_t>(id.size)) return std::nullopt;
    std::string bytes(end - begin, '\0');
    if (io::pread_full(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(begin)) !=
        static_cast<ssize_t>(bytes.size()))
      return std::nullopt;
    out.push_back(std::move(bytes));
  }
  // Rewritten in place while read: the parts may mix two texts.
  if (::fstat(fd.get(), &st) != 0 || !(io::identity_of(st) == id)) return std::nullopt;
  return out;
}

namespace {

// StoreFs::open_manifest's default: every range through pread(), the identity stat'ed again.
class ManifestThroughPread : public format::ManifestFile {
 public:
  ManifestThroughPread(const StoreFs& fs, std::string path, const io::FileIdentity& id)
      : fs_(fs), path_(std::move(path)), id_(id) {}
  std::optional<std::string> read(std::size_t begin, std::size_t end) override {
    auto parts = fs_.pread(path_, id_, {{begin, end}});
    if (!parts || parts->size() != 1) return std::nullopt;
    return std::move((*parts)[0]);
  }
  bool unchanged() override {
    std::optional<io::FileIdentity> now = fs_.identity(path_);
    return now && *now == id_;
  }

 private:
  const StoreFs& fs_;
  std::string path_;
  io::FileIdentity id_;
};

// One descriptor for a lookup's reads.
class DiskManifestFile : public format::ManifestFile {
 public:
  DiskManifestFile(io::UniqueFd fd, const io::FileIdentity& id) : fd_(std::move(fd)), id_(id) {}
  std::optional<std::string> read(std::size_t begin, std::size_t end) override {
    if (begin > end || end > static_cast<std::uint64_t>(id_.size)) return std::nullopt;
    std::string bytes(end - begin, '\0');
    if (io::pread_full(fd_.get(), bytes.data(), bytes.size(), static_cast<off_t>(begin)) !=
        static_cast<ssize_t>(bytes.size()))
      return std::nullopt;
    return bytes;
  }
  // Rewritten in place while read: the parts may mix two texts.
  bool unchanged() override {
    struct stat st {};
    return ::fstat(fd_.get(), &st) == 0 && io::identity_of(st) == id_;
  }

 private:
  io::UniqueFd fd_;
  io::FileIdentity id_;
};

}  // namespace

std::unique_ptr<format::ManifestFile> StoreFs::open_manifest(const std::string& path,
                                                     const io::FileIdentity& id) const {
  return std::make_unique<ManifestThroughPread>(*this, path, id);
}

std::unique_ptr<format::ManifestFile> DiskStoreFs::open_manifest(const std::string& path,
                                                         const io::FileIdentity& id) const {
  io::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return nullptr;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !(io::identity_of(st) == id))
    return nullptr;
  return std::make_unique<DiskManifestFile>(std::move(fd), id);
}

std::shared_ptr<const StoreFs> disk_store_fs() {
  static const std::shared_ptr<const StoreFs> disk = std::make_shared<DiskStoreFs>();
  return disk;
}

}  // namespace kiln::store
