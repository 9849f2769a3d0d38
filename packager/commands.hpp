#pragma once
// Each `kiln` subcommand registers itself on the CLI11 app; its callback stores the exit code
// in `rc`. kiln::Error escapes to main(), which prints it and maps its kind to an exit code.
#include <CLI/CLI.hpp>
#include <string>

namespace kiln::cli {

void add_registry_command(CLI::App& app, int& rc);

// The source tree kiln was configured from (used by `kiln build` when --source is not given).
std::string default_source_dir();

}  // namespace kiln::cli
