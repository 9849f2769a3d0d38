#include "project/project_paths.hpp"

#include <system_error>

namespace kiln::project {

namespace fs = std::filesystem;

std::string default_project_dir(const std::string& built_from) {
  std::error_code ec;
  if (fs::exists("registry/package.json", ec)) return ".";
  if (!built_from.empty() && fs::exists(fs::path(built_from) / "registry" / "package.json", ec))
    return built_from;
  return ".";
}

bool is_package_description_file(const fs::path& p) {
  const std::string suffix = ".package.json", name = p.filename().string();
  std::error_code ec;
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         fs::is_regular_file(p, ec);
}

}  // namespace kiln::project
