// PLACEHOLDER while under construction: replaced by the real command.
#include "commands.hpp"
#include "kiln/error.hpp"

namespace kiln::cli {

void add_wheel_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("wheel", "(under construction)");
  cmd->callback([&rc] {
    rc = 1;
    throw Error(ErrorKind::Internal, "kiln wheel: under construction");
  });
}

}  // namespace kiln::cli
