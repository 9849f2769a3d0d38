#include "io/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "io/file_descriptor.hpp"
#include "io/io_error.hpp"
#include "kiln/error.hpp"

namespace kiln::io {
namespace {

std::string holder_text() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
  return "pid " + std::to_string(getpid()) + " host " + host + "\n";
}

// One attempt. Returns the locked fd, or -1 when someone else holds the lock.
int lock_once(const std::filesystem::path& path) {
  for (;;) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd) throw_io_error("cannot open lock file", path, errno);
    int rc;
    do rc = ::flock(fd.get(), LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      int err = errno;
      fd.reset();
      if (err == EWOULDBLOCK) return -1;
      throw_io_error("cannot flock lock file", path, err);
    }
    // Someone may have removed or replaced the file between our open and flock (a cache
    // cleaner): our lock would then guard an orphan inode. Start over on the new file.
    struct stat by_fd {
    }, by_path{};
    if (::fstat(fd.get(), &by_fd) == 0 && ::stat(path.c_str(), &by_path) == 0 &&
        by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino) {
      std::string who = holder_text();
      // Best effort: the holder note is only for error messages.
      if (::ftruncate(fd.get(), 0) == 0) {
        ssize_t written = ::pwrite(fd.get(), who.data(), who.size(), 0);
        (void)written;
      }
      return fd.release();
    }
  }
}

constexpr int kCannotLockDirectories = -2;

// One attempt on a directory's own descriptor. Returns it locked, -1 when someone else holds the
// lock, kCannotLockDirectories where the filesystem cannot flock a directory (NFS emulates flock
// with byte-range locks, which a descriptor opened for reading cannot take): the caller goes on
// without the lock (acquire_directory returns one not held) rather than failing a build or a
// sync that worked before directories were locked.
int lock_directory_once(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) throw_io_error("cannot open directory to lock", dir, errno);
  int rc;
  do rc = ::flock(fd.get(), LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return fd.release();
  if (errno == EWOULDBLOCK) return -1;
  if (errno == EBADF || errno == ENOLCK || errno == EOPNOTSUPP || errno == EINVAL)
    return kCannotLockDirectories;
  throw_io_error("cannot flock directory", dir, errno);
}

}  // namespace

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path) {
  int fd = lock_once(path);
  if (fd < 0) return std::nullopt;
  FileLock lock;
  lock.fd_ = fd;
  lock.path_ = path;
  return lock;
}

FileLock FileLock::acquire(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  return acquire_with(path, timeout, false);
}

FileLock FileLock::acquire_directory(const std::filesystem::path& dir,
                                     std::chrono::milliseconds timeout) {
  return acquire_with(dir, timeout, true);
}

FileLock FileLock::acquire_with(const std::filesystem::path& path,
                                std::chrono::milliseconds timeout, bool directory) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (directory) {
      FileLock lock;
      int fd = lock_directory_once(path);
      lock.path_ = path;
      if (fd == kCannotLockDirectories) return lock;  // not held: see lock_directory_once
      lock.fd_ = fd;
      if (lock.held()) return lock;
    } else if (auto lock = try_acquire(path)) {
      return std::move(*lock);
    }
    auto now = Clock::now();
    if (now >= deadline) {
      std::string holder = directory ? "" : describe_lock_holder(path);
      std::ostringstream msg;
      msg << "timed out after " << timeout.count() << " ms waiting for lock " << path.string()
          << " (held by " << (holder.empty() ? "an unknown process" : holder)
          << "). A live holder is still working; if that process is gone, the filesystem does "
             "not release its locks (network filesystem?): put the cache or lock directory on "
             "a local disk";
      throw Error(ErrorKind::Io, msg.str());
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    std::this_thread::sleep_for(std::min(pause, left));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

void FileLock::release() {
  if (fd_ < 0) return;
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

std::string describe_lock_holder(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return line;
}

}  // namespace kiln::io
