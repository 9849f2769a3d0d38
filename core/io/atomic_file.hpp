#pragma once
// Writes a file so that readers see either the old contents or the complete new contents,
// never a partial file: data goes to "<path>.tmp.<random>" in the same directory (same
// filesystem, so rename is atomic), is fsync'ed, and is renamed over <path> on commit().
// Without commit() the temporary file is removed by the destructor: a failure leaves no trace.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "io/file_descriptor.hpp"
#include "io/limits.hpp"

namespace kiln::io {

class AtomicFile {
 public:
  // Creates the temporary file (not the directory). Throws Error{Io} naming the path.
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view data);  // throws Error{Io}
  // fsync, close, rename over path(), fsync the directory. Throws Error{Io}; on failure the
  // temporary file is removed and path() is untouched.
  void commit();

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& tmp_path() const { return tmp_path_; }

 private:
  void discard() noexcept;

  std::filesystem::path path_;
  std::filesystem::path tmp_path_;
  UniqueFd fd_;
  bool committed_ = false;
};

// The whole of a file, for callers that parse or hash it in memory. Throws Error{NotFound}
// ("file not found: <path>") when it does not exist, Error{Io} naming it when it cannot be read
// or is not a regular file (FIFOs and devices, also behind a symlink, are never read: the open
// does not block), Error{Limit} when it holds more than max_bytes (limits.hpp).
std::string read_whole_file(const std::filesystem::path& path,
                            std::uint64_t max_bytes = limits::kMaxLocalWholeFileBytes);

// fsync of a directory, which makes the renames and creations inside it durable. Best effort
// (the rename has already happened): a directory that cannot be opened is left alone. The one
// place every committing path (AtomicFile, installs, mirror sync) does it.
void sync_directory(const std::filesystem::path& dir);

// Removes the temporary files AtomicFile left in `dir` ("<name>.tmp.<16 hex digits>") when their
// writer died before commit() (kill -9, power loss): they are never read, but would stay forever.
// Only those of `file` ("<file>.tmp.*") when it is given, else every one in dir. Safe only while
// holding the lock that every writer of those files holds. Returns the paths removed.
std::vector<std::filesystem::path> remove_orphaned_temps(const std::filesystem::path& dir,
                                                         std::string_view file = {});
// The same for every file whose name `whose` accepts (the name without ".tmp.<16 hex>").
std::vector<std::filesystem::path> remove_orphaned_temps_if(
    const std::filesystem::path& dir, const std::function<bool(std::string_view file)>& whose);

// Convenience: the whole of `data` written atomically to `path`.
void write_file_atomically(const std::filesystem::path& path, std::string_view data);

}  // namespace kiln::io
