#include "io/file_descriptor.hpp"

#include <unistd.h>

#include <cerrno>

namespace kiln::io {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int UniqueFd::close() {
  int fd = release();
  return fd < 0 ? 0 : ::close(fd);
}

ssize_t read_some(int fd, char* buf, std::size_t size) {
  for (;;) {
    ssize_t n = ::read(fd, buf, size);
    if (n >= 0 || errno != EINTR) return n;
  }
}

ssize_t read_full(int fd, char* buf, std::size_t size) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = read_some(fd, buf + got, size - got);
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

ssize_t pread_full(int fd, char* buf, std::size_t size, off_t offset) {
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, buf + got, size - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = EIO;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace kiln::io
