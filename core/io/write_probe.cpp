// A directory really written to (write_probe.hpp).
#include "io/write_probe.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace kiln::io {

std::string write_probe(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create it: " + ec.message();
  std::string probe = dir + "/.kiln-doctor-" + std::to_string(static_cast<long>(::getpid()));
  FILE* f = std::fopen(probe.c_str(), "w");
  if (!f) return std::string("cannot create a file in it: ") + std::strerror(errno);
  bool ok = std::fputs("probe\n", f) >= 0;
  ok = (std::fclose(f) == 0) && ok;
  if (std::remove(probe.c_str()) != 0 || !ok) return "cannot write and delete a file in it";
  return "";
}

}  // namespace kiln::io
