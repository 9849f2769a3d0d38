// `kiln tuf-repo`: write and sign a TUF repository for kiln releases (tuf_repo.hpp layout):
// init (keys per role, thresholds, schemes), add (release files or directories as targets),
// refresh (the scheduled snapshot/timestamp re-sign, online keys only), rotate / add-key /
// revoke (root N+1 signed by a threshold of N and of N+1). docs/tuf.md.
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands/commands.hpp"
#include "kiln/error.hpp"
#include "tuf_repo/tuf_repo.hpp"

namespace kiln::commands {

namespace {

struct TufRepoOpts {
  std::string dir;
  std::string keys_dir;
  std::string offline_keys;
  std::string online_keys;
  tuf_repo::RoleOptions roles;
  bool no_consistent_snapshot = false;
  bool targets_only = false;
  std::vector<std::string> files;
  std::string role;
  std::string keyid;
  tuf_repo::Expiry expiry;
  bool json = false;

  tuf_repo::KeyDirs key_dirs() const {
    return tuf_repo::key_dirs_for(dir, {keys_dir, offline_keys, online_keys});
  }
};

void print_lines(const std::vector<std::string>& lines) {
  for (const auto& l : lines) std::cout << l << "\n";
}

const char* kOfflineAdvice =
    "move them to an offline machine and keep them off every networked one (docs/tuf.md, "
    "\"Keeping root and targets keys offline\")";
const char* kOnlineAdvice = "all `refresh` needs: keep them on the host that runs it";

// What init wrote and where: the keys are outside the repository; the offline ones belong
// offline.
void print_init(const std::string& dir, const tuf_repo::KeyDirs& k,
                const std::vector<tuf_repo::NewKey>& keys, bool as_json) {
  if (as_json) {
    nlohmann::json out = {
        {"repository", dir},
        {"offline_keys",
         {{"dir", k.offline.string()}, {"roles", {"root", "targets"}}, {"advice", kOfflineAdvice}}},
        {"online_keys",
         {{"dir", k.online.string()},
          {"roles", {"snapshot", "timestamp"}},
          {"advice", kOnlineAdvice}}},
        {"keys", nlohmann::json::array()}};
    for (const auto& key : keys)
      out["keys"].push_back({{"role", key.role},
                             {"keyid", key.keyid},
                             {"scheme", key.scheme},
                             {"file", key.file.string()},
                             {"offline", key.offline()}});
    std::cout << out.dump() << "\n";
    return;
  }
  for (const auto& key : keys) std::cout << tuf_repo::key_line(key) << "\n";
  std::cout << "initialized TUF repository in " << dir << " (serve it: metadata/, targets/)\n"
            << "private keys are outside it:\n"
            << "  offline keys (root, targets):      " << k.offline.string() << "\n"
            << "    " << kOfflineAdvice << "\n"
            << "  online keys (snapshot, timestamp): " << k.online.string() << "\n"
            << "    " << kOnlineAdvice << "\n";
}

using Opts = std::shared_ptr<TufRepoOpts>;

void add_init(CLI::App* cmd, const Opts& o, int& rc) {
  auto* init = cmd->add_subcommand(
      "init", "create keys and version 1 of every role; prints each key and where they went");
  init->add_flag("--json", o->json, "print the keys and their directories as JSON on stdout");
  init->callback([o, &rc] {
    tuf_repo::InitOptions io = tuf_repo::init_options(o->roles, !o->no_consistent_snapshot);
    tuf_repo::KeyDirs keys = o->key_dirs();
    print_init(o->dir, keys,
               tuf_repo::init_repository(o->dir, keys, io, o->expiry, std::time(nullptr)), o->json);
    rc = 0;
  });
}

void add_add(CLI::App* cmd, const Opts& o, int& rc) {
  auto* add = cmd->add_subcommand(
      "add",
      "add files, or every file under a directory (a release: index, archives, wheels, "
      "tarballs, checksum files), as targets; new targets, snapshot and timestamp");
  add->add_option("PATH", o->files, "files or directories to publish")->required();
  add->callback([o, &rc] {
    std::vector<std::filesystem::path> files(o->files.begin(), o->files.end());
    for (const auto& n : tuf_repo::add_targets(o->dir, o->key_dirs(), files, o->targets_only,
                                               o->expiry, std::time(nullptr)))
      std::cout << "target " << n << "\n";
    rc = 0;
  });
}

// rotate, add-key, revoke: root N+1 with ROLE's keys changed; prints each new key.
CLI::App* add_root_change(CLI::App* cmd, const Opts& o, int& rc, const char* name,
                          const char* help, tuf_repo::RootChange change) {
  auto* sub = cmd->add_subcommand(name, help);
  sub->add_option("ROLE", o->role, "root, targets, snapshot or timestamp")->required();
  sub->callback([o, &rc, change] {
    print_lines(tuf_repo::change_root(
        o->dir, o->key_dirs(),
        tuf_repo::root_change_options(change, o->role, o->keyid, o->targets_only, o->roles),
        o->expiry, std::time(nullptr)));
    rc = 0;
  });
  return sub;
}

}  // namespace

void add_tuf_repo_command(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "tuf-repo",
      "write and sign a TUF repository (metadata/, targets/ under --dir): init, add FILES|DIRS, "
      "refresh (re-sign snapshot and timestamp), rotate ROLE, add-key ROLE, revoke ROLE KEYID. "
      "Keys are OpenSSL ed25519 or ecdsa-p256 PEM files in <role>/<keyid>.pem under two "
      "directories outside the repository (refused inside it): offline (root, targets) and "
      "online (snapshot, timestamp; all `refresh` needs). Options go before the action. "
      "docs/tuf.md.");
  auto o = std::make_shared<TufRepoOpts>();
  cmd->add_option("--dir", o->dir, "repository directory: what a server publishes")->required();
  cmd->add_option("--keys-dir", o->keys_dir,
                  "key directory, outside --dir: KEYS/offline and KEYS/online (default DIR.keys, "
                  "beside the repository)");
  cmd->add_option("--offline-keys", o->offline_keys,
                  "directory of the root and targets keys (default KEYS/offline)");
  cmd->add_option("--online-keys", o->online_keys,
                  "directory of the snapshot and timestamp keys (default KEYS/online)");
  cmd->add_option("--scheme", o->roles.schemes,
                  "scheme of new keys, for every role or ROLE=SCHEME (repeatable): ed25519 "
                  "(default) or ecdsa-sha2-nistp256");
  cmd->add_option("--keys", o->roles.key_counts,
                  "init: keys per role, N or ROLE=N (repeatable; default 1)");
  cmd->add_option("--threshold", o->roles.thresholds,
                  "signatures a role needs, N or ROLE=N (repeatable; default 1): init, and "
                  "rotate/add-key/revoke for their role");
  cmd->add_flag("--no-consistent-snapshot", o->no_consistent_snapshot,
                "init: plain metadata and target names instead of versioned metadata and "
                "hash-prefixed targets");
  cmd->add_flag("--targets-only", o->targets_only,
                "add, rotate/add-key/revoke: sign targets (and root) but leave snapshot and "
                "timestamp to `refresh` where the online keys are");
  cmd->add_option("--root-days", o->expiry.root_days, "root expiry in days (365)");
  cmd->add_option("--targets-days", o->expiry.targets_days, "targets expiry in days (90)");
  cmd->add_option("--snapshot-days", o->expiry.snapshot_days, "snapshot expiry in days (7)");
  cmd->add_option("--timestamp-days", o->expiry.timestamp_days, "timestamp expiry in days (1)");
  cmd->require_subcommand(1, 1);

  add_init(cmd, o, rc);
  add_add(cmd, o, rc);
  cmd->add_subcommand("refresh",
                      "new snapshot and timestamp versions with fresh expiry (online keys only)")
      ->callback([o, &rc] {
        tuf_repo::refresh_snapshot_timestamp(o->dir, o->key_dirs(), o->expiry, std::time(nullptr));
        rc = 0;
      });
  add_root_change(cmd, o, rc, "rotate", "replace every key of ROLE with a new one, in root N+1",
                  tuf_repo::RootChange::Rotate);
  add_root_change(cmd, o, rc, "add-key", "add one new key to ROLE, in root N+1",
                  tuf_repo::RootChange::AddKey);
  add_root_change(cmd, o, rc, "revoke",
                  "remove KEYID (8+ leading characters) from ROLE, in root N+1; its file retires",
                  tuf_repo::RootChange::Revoke)
      ->add_option("KEYID", o->keyid, "the key to revoke")
      ->required();
}

}  // namespace kiln::commands
