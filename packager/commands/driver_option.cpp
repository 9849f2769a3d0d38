// `--driver X.Y`: the driver the commands weigh toolkits against when it is not this node's
// (resolve, compat, fetch, bundle), else this node's, as the loader does.
#include "commands/commands.hpp"
#include "format/toolkit.hpp"
#include "kiln/error.hpp"
#include "runtime/driver.hpp"

namespace kiln::commands {

std::string DriverChoice::words() const {
  if (number <= 0)
    return "no driver here nor --driver: the toolkits were not weighed (pass --driver X.Y)";
  return format::driver_words(number) + " (" + from + ")";
}

DriverChoice choose_driver(const std::string& flag_value) {
  if (!flag_value.empty()) return {format::parse_driver_option(flag_value, "--driver"), "--driver"};
  try {
    auto driver = runtime::make_cuda_driver();
    driver->init();
    return {driver->driver_version(), "this node's driver"};
  } catch (const Error&) {
    return {0, ""};  // no driver: not weighed
  }
}

void add_driver_option(CLI::App* cmd, std::string& value, const std::string& what) {
  cmd->add_option("--driver", value,
                  "a driver's CUDA version (12.8, as nvidia-smi prints it) to answer for a "
                  "driver that is not here: " +
                      what +
                      "; default: this node's driver, when there is one (else toolkits are not "
                      "weighed, and the output says so)");
}

}  // namespace kiln::commands
