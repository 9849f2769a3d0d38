// The one store scanning rule (store_scan.hpp).
#include "store_scan.hpp"

#include <algorithm>
#include <system_error>

namespace kiln {

namespace fs = std::filesystem;

bool is_archive_dir_name(std::string_view name) {
  return name.size() > kArchiveDirPrefix.size() &&
         name.compare(0, kArchiveDirPrefix.size(), kArchiveDirPrefix) == 0 &&
         name.find('/') == std::string_view::npos;
}

StoreListing list_store_archive_dirs(const fs::path& store) {
  StoreListing out;
  std::error_code ec;
  auto st = fs::status(store, ec);
  if (ec || !fs::exists(st)) {
    out.problem = "does not exist";
    return out;
  }
  if (!fs::is_directory(st)) {
    out.problem = "not a directory";
    return out;
  }
  fs::directory_iterator it(store, ec);
  if (ec) {
    out.problem = "cannot be listed: " + ec.message();
    return out;
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) {
      out.problem = "cannot be listed: " + ec.message();
      return out;
    }
    if (!is_archive_dir_name(it->path().filename().string())) continue;
    std::error_code dec;
    if (it->is_directory(dec)) out.archive_dirs.push_back(it->path());  // follows symlinks
  }
  std::sort(out.archive_dirs.begin(), out.archive_dirs.end());
  out.readable = true;
  return out;
}

std::optional<std::string> archive_dir_name_problem(const fs::path& dir, const Manifest& m) {
  std::string stem = archive_stem(m.package_version, m.cuda_version, m.target);
  if (dir.filename().string() == stem) return std::nullopt;
  return dir.string() + ": directory name does not match its manifest (expected '" + stem +
         "' from package_version, cuda_version and target)";
}

}  // namespace kiln
