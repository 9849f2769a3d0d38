// `kiln tuf-repo`: write and sign a TUF repository for kiln releases (tuf_repo.hpp layout):
// init, add (release files as targets), refresh (the scheduled snapshot/timestamp re-sign),
// rotate (a role's key; root N+1 signed by N). docs/tuf.md.
#include <ctime>
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "kiln/error.hpp"
#include "tuf_repo.hpp"

namespace kiln::cli {

void add_tuf_repo_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "tuf-repo",
      "write and sign a TUF repository (keys/, metadata/, targets/ under --dir): init, add "
      "FILES, refresh (re-sign snapshot and timestamp), rotate ROLE. Keys are OpenSSL "
      "ed25519 or ecdsa-p256 PEM files; root and targets keys belong offline. docs/tuf.md.");
  struct Opts {
    std::string dir;
    std::string scheme = "ed25519";
    std::vector<std::string> files;
    std::string role;
    tuf_repo::Expiry expiry;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--dir", o->dir, "repository directory")->required();
  cmd->add_option("--scheme", o->scheme,
                  "key scheme for new keys: ed25519 (default) or "
                  "ecdsa-sha2-nistp256");
  cmd->add_option("--root-days", o->expiry.root_days, "root expiry in days (365)");
  cmd->add_option("--targets-days", o->expiry.targets_days, "targets expiry in days (90)");
  cmd->add_option("--snapshot-days", o->expiry.snapshot_days, "snapshot expiry in days (7)");
  cmd->add_option("--timestamp-days", o->expiry.timestamp_days, "timestamp expiry in days (1)");
  cmd->require_subcommand(1, 1);
  cmd->add_subcommand("init", "create keys and version 1 of every role")->callback([o, &rc] {
    tuf_repo::init_repository(o->dir, o->scheme, o->expiry, std::time(nullptr));
    std::cout << "initialized TUF repository in " << o->dir << "\n";
    rc = 0;
  });
  auto* add = cmd->add_subcommand("add", "add files (archives, index, wheels) as targets");
  add->add_option("FILE", o->files, "files to publish")->required();
  add->callback([o, &rc] {
    std::vector<std::filesystem::path> files(o->files.begin(), o->files.end());
    for (const auto& n : tuf_repo::add_targets(o->dir, files, o->expiry, std::time(nullptr)))
      std::cout << "target " << n << "\n";
    rc = 0;
  });
  cmd->add_subcommand("refresh", "new snapshot and timestamp versions with fresh expiry")
      ->callback([o, &rc] {
        tuf_repo::refresh_snapshot_timestamp(o->dir, o->expiry, std::time(nullptr));
        rc = 0;
      });
  auto* rotate = cmd->add_subcommand("rotate", "new key for ROLE, published in root N+1");
  rotate->add_option("ROLE", o->role, "root, targets, snapshot or timestamp")->required();
  rotate->callback([o, &rc] {
    tuf_repo::rotate_key(o->dir, o->role, o->scheme, o->expiry, std::time(nullptr));
    rc = 0;
  });
}

}  // namespace kiln::cli
