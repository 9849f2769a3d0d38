// The result cache in a directory (a shared filesystem, a CI cache action's directory): entries
// are plain files at the layout's paths, written through AtomicFile, so concurrent builds sharing
// the directory see an entry whole or not at all, and a killed build leaves at most a temporary
// file (<path>.tmp.<random>) that no lookup reads.
#include <filesystem>
#include <system_error>

#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "result_cache/result_cache.hpp"

namespace kiln::result_cache {

namespace fs = std::filesystem;

namespace {

class DirectoryBackend final : public CacheBackend {
 public:
  explicit DirectoryBackend(fs::path dir) : dir_(std::move(dir)) {}

  std::string location() const override { return dir_.string(); }

  BackendRead read(const std::string& path, std::uint64_t max_bytes) override {
    BackendRead r;
    try {
      r.bytes = io::read_whole_file(dir_ / path, max_bytes);
      r.status = BackendRead::Status::Found;
    } catch (const Error& e) {
      r.reason = e.what();
      r.status = e.kind() == ErrorKind::NotFound ? BackendRead::Status::Absent
                 : e.kind() == ErrorKind::Limit  ? BackendRead::Status::TooLarge
                                                 : BackendRead::Status::Failed;
    }
    return r;
  }

  BackendWrite write(const std::string& path, std::string_view bytes) override {
    BackendWrite w;
    fs::path file = dir_ / path;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    if (ec) {
      w.reason = "cannot create " + file.parent_path().string() + ": " + ec.message();
      return w;
    }
    try {
      io::write_file_atomically(file, bytes);
      w.ok = true;
    } catch (const Error& e) {
      w.reason = e.what();
    }
    return w;
  }

 private:
  fs::path dir_;
};

}  // namespace

std::unique_ptr<CacheBackend> make_directory_backend(const std::string& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "dir/" names dir
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec || !fs::is_directory(p, ec))
    throw Error(ErrorKind::Io, "build cache directory " + p.string() + " cannot be created" +
                                   (ec ? ": " + ec.message() : std::string(" (not a directory)")));
  return std::make_unique<DirectoryBackend>(p);
}

}  // namespace kiln::result_cache
