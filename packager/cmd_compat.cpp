// PLACEHOLDER while under construction: replaced by the real command.
#include "commands.hpp"
#include "kiln/error.hpp"

namespace kiln::cli {

void add_compat_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("compat", "(under construction)");
  cmd->callback([&rc] {
    rc = 1;
    throw Error(ErrorKind::Internal, "kiln compat: under construction");
  });
}

}  // namespace kiln::cli
