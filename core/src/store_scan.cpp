// The one store scanning rule (store_scan.hpp).
#include "store_scan.hpp"

#include <algorithm>
#include <system_error>

namespace kiln {

namespace fs = std::filesystem;

std::optional<std::string_view> archive_name_package(std::string_view name) {
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  for (std::size_t dash = name.find('-'); dash != std::string_view::npos;
       dash = name.find('-', dash + 1)) {
    if (dash + 1 < name.size() && name[dash + 1] >= '0' && name[dash + 1] <= '9') {
      std::string_view pkg = name.substr(0, dash);
      if (is_package_name(pkg)) return pkg;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

bool is_archive_dir_name(std::string_view name, std::string_view package) {
  std::optional<std::string_view> pkg = archive_name_package(name);
  return pkg && (package.empty() || *pkg == package);
}

StoreListing list_store_archive_dirs(const fs::path& store, std::string_view package) {
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
    if (!is_archive_dir_name(it->path().filename().string(), package)) continue;
    std::error_code dec;
    if (it->is_directory(dec)) out.archive_dirs.push_back(it->path());  // follows symlinks
  }
  std::sort(out.archive_dirs.begin(), out.archive_dirs.end());
  out.readable = true;
  return out;
}

std::optional<std::string> archive_dir_name_problem(const fs::path& dir, const Manifest& m) {
  std::string stem = archive_stem(m.package, m.package_version, m.cuda_version, m.target);
  if (dir.filename().string() == stem) return std::nullopt;
  return dir.string() + ": directory name does not match its manifest (expected '" + stem +
         "' from package, package_version, cuda_version and target)";
}

}  // namespace kiln
