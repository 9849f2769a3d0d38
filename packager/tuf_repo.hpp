#pragma once
// The repository side of TUF for kiln releases (`kiln tuf-repo`, docs/tuf.md): a directory
//   <dir>/keys/<role>.pem      private keys (PKCS#8 PEM, 0600): root and targets are offline
//                              keys an operator moves away; snapshot and timestamp are online
//   <dir>/metadata/            root.json and <N>.root.json, targets.json, snapshot.json,
//                              timestamp.json (consistent_snapshot false: plain names)
//   <dir>/targets/<path>       the release files, as clients download them
// Every write is atomic; versions only go up; each role is re-signed with its key file.
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::tuf_repo {

struct Expiry {
  int root_days = 365;
  int targets_days = 90;
  int snapshot_days = 7;
  int timestamp_days = 1;
};

// Keys for the four roles (`scheme`: ed25519 or ecdsa-sha2-nistp256) and version 1 of every
// role. Throws Error{Usage} when <dir>/metadata/root.json already exists.
void init_repository(const std::filesystem::path& dir, const std::string& scheme,
                     const Expiry& expiry, std::time_t now);

// Copies each file to <dir>/targets/<name> (its file name) and lists it in targets with length
// and sha256/sha512; then new targets, snapshot and timestamp versions. Returns the names.
std::vector<std::string> add_targets(const std::filesystem::path& dir,
                                     const std::vector<std::filesystem::path>& files,
                                     const Expiry& expiry, std::time_t now);

// New snapshot and timestamp versions with fresh expiry (the scheduled re-sign).
void refresh_snapshot_timestamp(const std::filesystem::path& dir, const Expiry& expiry,
                                std::time_t now);

// Replaces `role`'s key with a new one (old key file kept as <role>.pem.<N>.old) and publishes
// root N+1, signed by root N's key and, for a root rotation, by the new root key too.
void rotate_key(const std::filesystem::path& dir, const std::string& role,
                const std::string& scheme, const Expiry& expiry, std::time_t now);

std::string format_expires(std::time_t t);

}  // namespace kiln::tuf_repo
