// `kiln tuf-client`: the TUF client workflow behind the tuf-conformance suite's client
// protocol (CLIENT-CLI.md): `--metadata-dir D init ROOT`, `--metadata-dir D --metadata-url U
// refresh`, and `... --target-name T [--target-name T2] --target-base-url B --target-dir D
// download`. Exit 0 on success, 1 on any failure (the protocol's two codes), with the error
// (its attack, role, field and both values) on stderr.
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands/commands.hpp"
#include "io/atomic_file.hpp"
#include "kiln/error.hpp"
#include "tuf/tuf_updater.hpp"

namespace kiln::commands {

namespace {

namespace fs = std::filesystem;

struct TufClientOpts {
  std::string metadata_dir;
  std::string metadata_url;
  std::vector<std::string> target_names;
  std::string target_base_url;
  std::string target_dir;
  std::string trusted_root;
};

void require(const std::string& value, const char* flag, const char* command) {
  if (value.empty())
    throw Error(ErrorKind::Usage, std::string("tuf-client ") + command + " needs " + flag);
}

// One attempt; kiln::Error and filesystem errors become exit 1 with the message on stderr.
template <typename F>
int run_protocol(F&& f) {
  try {
    f();
    return 0;
  } catch (const Error& e) {
    std::cerr << "kiln tuf-client: error (" << to_string(e.kind()) << "): " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "kiln tuf-client: error: " << e.what() << "\n";
  }
  return 1;
}

}  // namespace

void add_tuf_client_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "tuf-client",
      "a TUF client (specification 1.0.34) speaking the tuf-conformance CLIENT-CLI protocol: "
      "init stores a trusted root, refresh updates root/timestamp/snapshot/targets, download "
      "fetches verified targets. Exit 0 on success, 1 on any failure. docs/tuf.md.");
  auto o = std::make_shared<TufClientOpts>();
  cmd->add_option("--metadata-dir", o->metadata_dir,
                  "trusted metadata directory (root.json, timestamp.json, ...)")
      ->required();
  cmd->add_option("--metadata-url", o->metadata_url, "repository metadata URL");
  cmd->add_option("--target-name", o->target_names, "target path to download (repeatable)");
  cmd->add_option("--target-base-url", o->target_base_url, "repository targets URL");
  cmd->add_option("--target-dir", o->target_dir, "where verified targets are stored");
  cmd->require_subcommand(1, 1);

  auto* init = cmd->add_subcommand("init", "store TRUSTED_ROOT as the metadata dir's root.json");
  init->add_option("TRUSTED_ROOT", o->trusted_root, "initial root.json")->required();
  init->callback([o, &rc] {
    rc = run_protocol([&] {
      fs::create_directories(o->metadata_dir);
      io::write_file_atomically(fs::path(o->metadata_dir) / "root.json",
                            io::read_whole_file(o->trusted_root));
    });
  });

  auto* refresh = cmd->add_subcommand("refresh", "update top-level metadata from --metadata-url");
  refresh->callback([o, &rc] {
    rc = run_protocol([&] {
      require(o->metadata_url, "--metadata-url", "refresh");
      auto fetcher = tuf::make_curl_fetcher();
      tuf::UpdaterOptions uo;
      uo.metadata_dir = o->metadata_dir;
      uo.metadata_url = o->metadata_url;
      tuf::Updater updater(uo, *fetcher, std::time(nullptr));
      updater.refresh();
    });
  });

  auto* download = cmd->add_subcommand(
      "download",
      "refresh, then download each --target-name in order (stops at the first failure)");
  download->callback([o, &rc] {
    rc = run_protocol([&] {
      require(o->metadata_url, "--metadata-url", "download");
      require(o->target_dir, "--target-dir", "download");
      require(o->target_base_url, "--target-base-url", "download");
      if (o->target_names.empty())
        throw Error(ErrorKind::Usage, "tuf-client download needs --target-name");
      auto fetcher = tuf::make_curl_fetcher();
      tuf::UpdaterOptions uo;
      uo.metadata_dir = o->metadata_dir;
      uo.metadata_url = o->metadata_url;
      uo.target_dir = o->target_dir;
      uo.target_base_url = o->target_base_url;
      tuf::Updater updater(uo, *fetcher, std::time(nullptr));
      for (const auto& name : o->target_names) {
        auto info = updater.get_targetinfo(name);
        if (!info)
          throw tuf::Error(tuf::Attack::TargetNotFound,
                           "no trusted targets role lists \"" + name + "\"");
        if (!updater.find_cached_target(*info)) updater.download_target(*info);
      }
    });
  });
}

}  // namespace kiln::commands
