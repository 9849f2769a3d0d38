#pragma once
// What the TUF attack tests forge with: the keys of a role as `kiln tuf-repo` keeps them, and a
// replayed snapshot re-signed with stolen online keys. One copy for the tuf-client tests
// (integration/tuf_loopback_test.cpp) and the loader/fetch tests (integration/tuf_mirror_test.cpp).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "tuf/tuf_metadata.hpp"
#include "tuf/tuf_signer.hpp"

namespace kiln::test::tuf_forge {

// The "signed" part of <metadata_dir>/<file>.
inline nlohmann::json signed_of(const std::filesystem::path& metadata_dir,
                                const std::string& file) {
  return nlohmann::json::parse(read_file(metadata_dir / file))["signed"];
}

// The private keys of `role` under `keys_dir` (offline/ for root and targets, online/ for the
// rest; `sub`: "retired" for keys that left the role), each with the scheme the current root
// lists for it (ed25519 when the root no longer lists it).
inline std::vector<tuf::Signer> keys_of(const std::filesystem::path& keys_dir,
                                        const std::filesystem::path& metadata_dir,
                                        const std::string& role, const std::string& sub = "") {
  std::string base = role == "root" || role == "targets" ? "offline" : "online";
  nlohmann::json root = signed_of(metadata_dir, "root.json");
  std::vector<tuf::Signer> out;
  for (const auto& e : std::filesystem::directory_iterator(keys_dir / base / sub / role)) {
    std::string id = e.path().stem().string();
    std::string scheme = root["keys"].contains(id) ? root["keys"][id]["scheme"] : "ed25519";
    out.push_back(tuf::Signer::from_private_pem(read_file(e.path()), scheme));
  }
  return out;
}

// The first `n` of `v`, as sign_metadata takes them.
inline std::vector<const tuf::Signer*> ptrs(const std::vector<tuf::Signer>& v, std::size_t n = 99) {
  std::vector<const tuf::Signer*> out;
  for (std::size_t i = 0; i < v.size() && i < n; ++i) out.push_back(&v[i]);
  return out;
}

// A rollback with stolen online keys: `old_snapshot` (an earlier release's, naming older targets)
// re-signed as snapshot version 4, and timestamp version 4 naming it, written into
// `metadata_dir` as 4.snapshot.json and timestamp.json.
inline void resign_old_snapshot_as_v4(const std::filesystem::path& metadata_dir,
                                      nlohmann::json old_snapshot,
                                      const std::vector<tuf::Signer>& snapshot_keys,
                                      const std::vector<tuf::Signer>& timestamp_keys) {
  old_snapshot["version"] = 4;
  std::string snap = tuf::sign_metadata(old_snapshot, ptrs(snapshot_keys));
  write_file(metadata_dir / "4.snapshot.json", snap);
  nlohmann::json ts = signed_of(metadata_dir, "timestamp.json");
  ts["version"] = 4;
  ts["meta"]["snapshot.json"] = {{"version", 4},
                                 {"length", snap.size()},
                                 {"hashes", {{"sha256", *tuf::hex_digest("sha256", snap)}}}};
  write_file(metadata_dir / "timestamp.json", tuf::sign_metadata(ts, ptrs(timestamp_keys)));
}

}  // namespace kiln::test::tuf_forge
