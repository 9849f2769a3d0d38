#pragma once
// The repository side of TUF for kiln releases (`kiln tuf-repo`, docs/tuf.md). Layout:
//   <dir>/metadata/     <N>.root.json and root.json, targets.json, snapshot.json, timestamp.json;
//                       with consistent snapshots (the default) also <v>.targets.json and
//                       <v>.snapshot.json, kept for clients still reading an older snapshot
//   <dir>/targets/      the release files; with consistent snapshots as <hash>.<name> (one
//                       hard link per hash algorithm), else under their own names
//   offline key dir     <role>/<keyid>.pem for root and targets (default <dir>.keys/offline)
//   online key dir      <role>/<keyid>.pem for snapshot and timestamp (default
//                       <dir>.keys/online): all the scheduled re-sign (`refresh`) reads
// <dir> is what a server publishes, so no key directory may be in it (check_keys_apart).
//   <key dir>/retired/<role>/<keyid>.pem   keys rotated out or revoked (never used again)
// The published root.json is the only record of which keys and thresholds a role has; a key
// file's scheme is the one root.json gives for its keyid. Every write is atomic, versions only
// go up, and a role is signed only when a threshold of its keys is at hand (checked before
// anything is written).
#include <ctime>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kiln::tuf_repo {

struct Expiry {
  int root_days = 365;
  int targets_days = 90;
  int snapshot_days = 7;
  int timestamp_days = 1;
};

struct KeyDirs {
  std::filesystem::path offline;  // root, targets
  std::filesystem::path online;   // snapshot, timestamp
};
// What the command line says about the keys (any of them empty: not given).
struct KeyDirOptions {
  std::filesystem::path keys_dir;  // --keys-dir K: K/offline and K/online
  std::filesystem::path offline;   // --offline-keys, over K/offline
  std::filesystem::path online;    // --online-keys, over K/online
};
// <dir>.keys, beside the repository: <dir> resolved through symbolic links, so every spelling
// of one repository finds the same keys. Throws Error{Usage} for a <dir> with no name ("/").
std::filesystem::path default_keys_dir(const std::filesystem::path& dir);
// The key directories every action reads and writes: K = --keys-dir or default_keys_dir(dir).
KeyDirs key_dirs_for(const std::filesystem::path& dir, const KeyDirOptions& options);
// Throws Error{Usage} (fields `path`: the key directory, `repository`: <dir>) when a key
// directory is <dir>, is inside it or holds it (compared with symbolic links resolved), or when
// <dir>/keys/offline or <dir>/keys/online exists (where earlier kiln versions put keys by
// default): the message names both and says what to do. Every action calls it before it writes
// anything.
void check_keys_apart(const std::filesystem::path& dir, const KeyDirs& keys);

struct RoleSpec {
  int keys = 1;
  int threshold = 1;
  std::string scheme = "ed25519";  // ed25519 or ecdsa-sha2-nistp256
};

struct InitOptions {
  std::map<std::string, RoleSpec> roles;  // missing roles: one ed25519 key, threshold 1
  bool consistent_snapshot = true;
};

// Parses "ROLE=VALUE" (or a bare VALUE for every role) options into `roles`: `what` is
// "keys", "threshold" or "scheme". Throws Error{Usage} naming the option and the value.
void apply_role_option(std::map<std::string, RoleSpec>& roles, const std::string& what,
                       const std::string& option);

// A key file an action wrote.
struct NewKey {
  std::string role;
  std::string keyid;
  std::string scheme;
  std::filesystem::path file;
  bool offline() const { return role == "root" || role == "targets"; }
};
// "<role> <keyid> <scheme> <file>"
std::string key_line(const NewKey& key);

// Keys for the four roles and version 1 of every role. Throws Error{Usage} when
// <dir>/metadata/root.json already exists or a threshold is not in 1..keys.
// Returns the keys written, in role order.
std::vector<NewKey> init_repository(const std::filesystem::path& dir, const KeyDirs& keys,
                                    const InitOptions& options, const Expiry& expiry,
                                    std::time_t now);

// Adds files as targets with length, sha256 and sha512, then new targets, snapshot and
// timestamp versions (`targets_only`: targets alone, for a machine without the online keys;
// the next `refresh` publishes it). A directory adds every regular file under it, its target
// path relative to the directory; a file is added under its file name. A path already listed
// is replaced. Every key needed is checked before anything is written, and so is what would be
// published: a private key under `paths` or <dir> (io/private_key_scan.hpp) is refused with
// Error{Usage} naming its file. Returns the paths.
std::vector<std::string> add_targets(const std::filesystem::path& dir, const KeyDirs& keys,
                                     const std::vector<std::filesystem::path>& paths,
                                     bool targets_only, const Expiry& expiry, std::time_t now);

// New snapshot and timestamp versions with fresh expiry (the scheduled re-sign): online keys
// only.
void refresh_snapshot_timestamp(const std::filesystem::path& dir, const KeyDirs& keys,
                                const Expiry& expiry, std::time_t now);

// A change of root: root N+1 with `role`'s keys changed, signed by a threshold of root N's
// root keys and of its own (checked before anything is written); the role's metadata is then
// re-signed by its new keys. Keys that leave a role move to <key dir>/retired/<role>/.
//   Rotate:  every key of the role replaced by a new one (`scheme`, or each key's own)
//   AddKey:  one new key (`scheme`, default ed25519)
//   Revoke:  `keyid` (or a unique prefix of at least 8 characters) removed from the role
// `threshold` > 0 sets the role's threshold in root N+1. Returns one line per new key.
enum class RootChange { Rotate, AddKey, Revoke };
struct RootChangeOptions {
  RootChange change = RootChange::Rotate;
  std::string role;
  std::string scheme;  // empty: keep (Rotate) or ed25519 (AddKey)
  std::string keyid;   // Revoke
  int threshold = 0;
  bool targets_only = false;  // re-sign only targets after the root (no online keys here)
};
std::vector<std::string> change_root(const std::filesystem::path& dir, const KeyDirs& keys,
                                     const RootChangeOptions& options, const Expiry& expiry,
                                     std::time_t now);

// The role options of `kiln tuf-repo` as given (role_options.cpp): --scheme, --keys and
// --threshold, each a bare VALUE (every role) or ROLE=VALUE, repeatable.
struct RoleOptions {
  std::vector<std::string> schemes;
  std::vector<std::string> key_counts;
  std::vector<std::string> thresholds;
};
// init's options: every role option applied in turn (schemes, then keys, then thresholds).
// Throws Error{Usage} naming a malformed option.
InitOptions init_options(const RoleOptions& options, bool consistent_snapshot);
// A root change of `role`: the scheme of new keys when any --scheme was given (ROLE=SCHEME's,
// or the bare one), the threshold when a --threshold was bare or of this role. Every option is
// checked, those of other roles too (Error{Usage}).
RootChangeOptions root_change_options(RootChange change, const std::string& role,
                                      const std::string& keyid, bool targets_only,
                                      const RoleOptions& options);

}  // namespace kiln::tuf_repo
