#pragma once
// The one shape of a failed file-system call's error: what was attempted, the path, and the
// system's own words for errno ("cannot write /x/y: No space left on device"), kind Io.
#include <cstring>
#include <filesystem>
#include <string>

#include "kiln/error.hpp"

namespace kiln::io {

[[noreturn]] inline void throw_io_error(const std::string& what, const std::filesystem::path& path,
                                        int err) {
  throw Error(ErrorKind::Io, what + " " + path.string() + ": " + std::strerror(err));
}

}  // namespace kiln::io
