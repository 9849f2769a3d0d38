#include <cstdio>
#include <iostream>

#include "commands/commands.hpp"
#include "io/io_error.hpp"
#include "kiln/error.hpp"
#include "kiln/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "kiln: build CUDA kernels ahead of time into versioned, verified packages, and\n"
      "inspect, verify and resolve them. Exit codes: docs/exit-codes.md."};
  app.name("kiln");
  app.require_subcommand(0, 1);
  bool show_version = false;
  app.add_flag("--version", show_version, "print the version, git commit and CUDA toolkit");
  int rc = 0;
  kiln::commands::add_registry_command(app, rc);
  kiln::commands::add_format_commands(app, rc);
  kiln::commands::add_fetch_command(app, rc);
  kiln::commands::add_build_command(app, rc);
  kiln::commands::add_merge_command(app, rc);
  kiln::commands::add_loader_commands(app, rc);
  kiln::commands::add_tarball_command(app, rc);
  kiln::commands::add_wheel_command(app, rc);
  kiln::commands::add_mirror_command(app, rc);
  kiln::commands::add_compat_command(app, rc);
  kiln::commands::add_tuf_client_command(app, rc);
  kiln::commands::add_tuf_repo_command(app, rc);
  kiln::commands::add_package_command(app, rc);
  kiln::commands::add_bundle_command(app, rc);
  auto report = [&app](const kiln::Error& e) {
    std::fflush(stdout);
    std::cerr << "kiln: error (" << kiln::to_string(e.kind()) << "): " << e.what() << "\n";
    if (kiln::commands::json_requested(app)) std::cout << kiln::commands::error_json(e) << std::endl;
    return kiln::exit_code(e.kind());
  };
  try {
    app.parse(argc, argv);
    if (show_version) {
      std::string commit = kiln::git_commit();
      std::cout << "kiln " << kiln::version() << "\n"
                << "commit " << (commit.empty() ? "unknown" : commit) << ", built with CUDA "
                << kiln::cuda_full_version() << "\n";
      return 0;
    }
    if (app.get_subcommands().empty()) {
      std::cout << app.help();
      return 2;
    }
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kiln::exit_code(kiln::ErrorKind::Usage);
  } catch (const kiln::Error& e) {
    return report(e);
  } catch (const std::filesystem::filesystem_error& e) {
    // A file-system call of a command that throws rather than answers (a full disk, a read-only
    // mount, EIO): an io error like any other, not an internal one.
    return report(kiln::io::io_error_of(e));
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error: " << e.what() << "\n";
    return 1;
  }
  return rc;
}
