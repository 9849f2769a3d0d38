#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "io/io_error.hpp"
#include "kiln/error.hpp"

namespace kiln::io {
namespace {

std::string random_suffix() {
  // random_device reads the kernel's generator: two processes never pick the same suffix by
  // sharing a seed (O_EXCL below catches the rest).
  static thread_local std::mt19937_64 gen{
      (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::uint64_t v = gen();
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = digits[(v >> (4 * i)) & 15];
  return s;
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp_path_ = path_;
    tmp_path_ += ".tmp." + random_suffix();
    fd_.reset(::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd_) return;
    if (errno != EEXIST) throw_io_error("cannot create temporary file", tmp_path_, errno);
  }
  throw Error(ErrorKind::Io, "cannot create a unique temporary file beside " + path_.string());
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  fd_.reset();
  if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

void AtomicFile::write(std::string_view data) {
  if (!fd_) throw Error(ErrorKind::Internal, "AtomicFile::write after commit: " + path_.string());
  if (!write_all(fd_.get(), data)) throw_io_error("cannot write", tmp_path_, errno);
}

void AtomicFile::commit() {
  if (!fd_) throw Error(ErrorKind::Internal, "AtomicFile committed twice: " + path_.string());
  // fsync before rename: otherwise a crash can leave the new name pointing at empty data.
  if (::fsync(fd_.get()) != 0) {
    int err = errno;
    discard();
    throw_io_error("cannot fsync", tmp_path_, err);
  }
  if (fd_.close() != 0) {
    int err = errno;
    discard();
    throw_io_error("cannot close", tmp_path_, err);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    discard();
    throw Error(ErrorKind::Io, "cannot rename " + tmp_path_.string() + " to " + path_.string() +
                                   ": " + std::strerror(err));
  }
  committed_ = true;
  // The rename itself is durable only once the directory is synced; best effort.
  sync_directory(path_.has_parent_path() ? path_.parent_path() : ".");
}

void sync_directory(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd) ::fsync(fd.get());
}

namespace {

// The file whose temporary `name` is ("<file>.tmp.<16 hex digits>", AtomicFile's name), or
// nothing when it is not one.
std::optional<std::string_view> atomic_temp_of(std::string_view name) {
  constexpr std::string_view kInfix = ".tmp.";
  constexpr std::size_t kSuffix = 16;
  if (name.size() < kInfix.size() + kSuffix + 1) return std::nullopt;
  std::string_view file = name.substr(0, name.size() - kInfix.size() - kSuffix);
  if (name.substr(file.size(), kInfix.size()) != kInfix) return std::nullopt;
  for (char c : name.substr(name.size() - kSuffix))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return file;
}

}  // namespace

std::vector<std::filesystem::path> remove_orphaned_temps_if(
    const std::filesystem::path& dir, const std::function<bool(std::string_view file)>& whose) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::optional<std::string_view> file = atomic_temp_of(name);
    if (!file || !whose(*file)) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;
    if (::unlink(it->path().c_str()) == 0) removed.push_back(it->path());
  }
  return removed;
}

std::vector<std::filesystem::path> remove_orphaned_temps(const std::filesystem::path& dir,
                                                         std::string_view file) {
  return remove_orphaned_temps_if(dir,
                                  [file](std::string_view f) { return file.empty() || f == file; });
}

void write_file_atomically(const std::filesystem::path& path, std::string_view data) {
  AtomicFile f(path);
  f.write(data);
  f.commit();
}

std::string read_whole_file(const std::filesystem::path& p, std::uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) throw Error(ErrorKind::NotFound, "file not found: " + p.string());
    throw Error(ErrorKind::Io, "cannot open " + p.string() + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw Error(ErrorKind::Io, "cannot stat " + p.string() + ": " + std::strerror(errno));
  // A FIFO, a device (/dev/zero behind a symlink) or a socket has no end: never read one whole.
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::Io, p.string() + ": not a regular file (a FIFO, device, socket or " +
                                   "directory is never read whole)");
  auto too_big = [&](std::uint64_t n) {
    return Error(ErrorKind::Limit, p.string() + ": file is " + std::to_string(n) +
                                       " bytes, more than the limit of " +
                                       std::to_string(max_bytes) + " (docs/security.md)");
  };
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw too_big(static_cast<std::uint64_t>(st.st_size));
  // Read straight into the result, asking for one byte more than stat said: a short read that
  // returns exactly the size stat gave is the end of a regular file, so an unchanged file takes
  // one read() and no copy. Anything else reads on until read() returns 0.
  std::string out;
  std::size_t used = 0;
  out.resize(static_cast<std::size_t>(st.st_size) + 1);
  for (;;) {
    if (used == out.size()) out.resize(out.size() + (1 << 16));
    std::size_t want = out.size() - used;
    ssize_t n = read_some(fd.get(), out.data() + used, want);
    if (n < 0)
      throw Error(ErrorKind::Io, "cannot read " + p.string() + ": " + std::strerror(errno));
    used += static_cast<std::size_t>(n);
    // The file may grow while it is read: the limit holds for what is read, not only for stat.
    if (used > max_bytes) throw too_big(used);
    if (n == 0 ||
        (static_cast<std::size_t>(n) < want && used == static_cast<std::size_t>(st.st_size)))
      break;
  }
  out.resize(used);
  return out;
}

}  // namespace kiln::io
