#include "plan/install_location.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <unordered_map>

namespace kiln::plan {

namespace fs = std::filesystem;

namespace {

// <dir of the file holding `address`>/../share/kiln: what an install tree puts beside a library.
// For the main executable dladdr gives the name it was started by (argv[0]): with no '/' it was
// found on PATH, and /proc/self/exe is the file.
// Asked when a Loader's store tier first reaches the installed store (and for the TUF root when a
// mirror is first used): dladdr is cheap, the canonical path less so (realpath(3) reads each
// component's link), so it is remembered per file name dladdr gives.
fs::path share_dir_beside(const void* address) {
  Dl_info info{};
  if (!::dladdr(address, &info) || !info.dli_fname) return {};
  static std::mutex mu;
  static auto* known = new std::unordered_map<std::string, fs::path>();
  std::lock_guard<std::mutex> lock(mu);
  auto hit = known->find(info.dli_fname);
  if (hit != known->end()) return hit->second;
  std::string file = info.dli_fname;
  if (file.find('/') == std::string::npos) {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    file = exe.string();
  }
  // The real file, links resolved: a library reached through a symbolic link (lib/libx.so ->
  // /opt/x/lib/libx.so.1) has its store beside the file, not beside the link.
  if (char* real = ::realpath(file.c_str(), nullptr)) {
    file = real;
    std::free(real);
  }
  fs::path share =
      (fs::path(file).parent_path().parent_path() / "share" / "kiln").lexically_normal();
  if (known->size() < 64) known->emplace(info.dli_fname, share);
  return share;
}

}  // namespace

std::string installed_store_dir(const void* address) {
  fs::path share = share_dir_beside(address);
  return share.empty() ? "" : (share / "artifacts").string();
}

// The TUF root is libkiln's install's: beside libkiln (or the kiln binary, which carries the core).
std::string installed_tuf_root() {
  fs::path share = share_dir_beside(reinterpret_cast<const void*>(&installed_tuf_root));
  return share.empty() ? "" : (share / "tuf" / "root.json").string();
}

}  // namespace kiln::plan
