#pragma once
// The one shape of a failed file-system call's error: what was attempted, the path, and the
// system's own words for errno ("cannot write /x/y: No space left on device"), kind Io.
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "kiln/error.hpp"

namespace kiln::io {

[[noreturn]] inline void throw_io_error(const std::string& what, const std::filesystem::path& path,
                                        int err) {
  throw Error(ErrorKind::Io, what + " " + path.string() + ": " + std::strerror(err));
}

// A std::filesystem call that threw (a full disk, a read-only mount, EIO) as the same io error:
// its message already holds the call, the system's words and the path(s) ("cannot create
// directories: No space left on device [repo/metadata]").
inline Error io_error_of(const std::filesystem::filesystem_error& e) {
  std::string message = e.what();
  constexpr std::string_view kPrefix = "filesystem error: ";
  if (message.rfind(kPrefix, 0) == 0) message.erase(0, kPrefix.size());
  return Error(ErrorKind::Io, message, {{"path", e.path1().string()}});
}

}  // namespace kiln::io
