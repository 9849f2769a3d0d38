#include "io/scratch_dir.hpp"

#include <stdlib.h>

#include <cerrno>
#include <system_error>

#include "io/io_error.hpp"

namespace kiln::io {

ScratchDir::ScratchDir(const std::filesystem::path& parent, const std::string& prefix,
                       const std::string& what) {
  std::string tmpl = (parent / (prefix + "XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) throw_io_error("cannot create a " + what + " in", parent, errno);
  path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace kiln::io
