#pragma once
// A directory made for one operation (mkdtemp under a chosen parent) and removed on every way
// out, unless the operation renamed it into place and said so with release().
#include <filesystem>
#include <string>

namespace kiln::io {

class ScratchDir {
 public:
  // Creates <parent>/<prefix>XXXXXX. `what` names it in the error, which also names the parent
  // and the system's words: "cannot create a staging directory in /srv/mirror: Read-only file
  // system" (kind Io).
  ScratchDir(const std::filesystem::path& parent, const std::string& prefix,
             const std::string& what = "scratch directory");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The directory was renamed into place (or handed on): nothing to remove.
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

}  // namespace kiln::io
