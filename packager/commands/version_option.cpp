// The one check for every command's --version: a release version as the formats spell it
// (MAJOR.MINOR.PATCH[-prerelease]). It becomes part of file names and URLs, so anything else
// ("../../etc/x") is refused before it is used.
#include "commands/commands.hpp"
#include "format/manifest.hpp"

namespace kiln::commands {

CLI::Validator package_version_option() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (format::is_package_version(value)) return "";
        return "--version '" + value.substr(0, 80) +
               "' is not a release version: expected MAJOR.MINOR.PATCH[-prerelease], e.g. 0.1.0";
      },
      "MAJOR.MINOR.PATCH");
}

}  // namespace kiln::commands
