#pragma once
// One owner for a POSIX file descriptor, and the read and write loops every caller needs: a
// read or write may return fewer bytes than asked or fail with EINTR, and each is handled here
// once rather than in a loop per call site.
#include <sys/types.h>

#include <cstddef>
#include <string_view>

namespace kiln::io {

// Owns a descriptor and closes it when destroyed (or on reset); -1 owns nothing. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // Gives the descriptor up without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the one held (its result ignored: nothing was written through it, or the caller
  // has already checked with close()), then holds `fd`.
  void reset(int fd = -1);
  // Closes the one held and reports close(2)'s result: 0, or -1 with errno set. For a file
  // written to, where a failed close can mean lost data. Holds nothing afterwards.
  int close();

 private:
  int fd_ = -1;
};

// One read(2), retried while it fails with EINTR: the bytes read (0 at the end of the file),
// or -1 with errno set.
ssize_t read_some(int fd, char* buf, std::size_t size);
// Reads until `size` bytes or the end of the file: the bytes read (fewer than `size` only at
// the end), or -1 with errno set.
ssize_t read_full(int fd, char* buf, std::size_t size);
// The same from `offset` on (pread(2)), leaving the file position alone.
ssize_t pread_full(int fd, char* buf, std::size_t size, off_t offset);
// Writes all of `data`: true, or false with errno set (EIO when write(2) wrote nothing).
bool write_all(int fd, std::string_view data);

}  // namespace kiln::io
