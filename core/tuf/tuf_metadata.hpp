#pragma once
// TUF metadata (specification 1.0.34): the typed model of root, timestamp, snapshot and
// targets, parsed and validated from the JSON bytes a repository serves, canonical JSON and
// the signature threshold of a role. Keys, signatures and hashes are tuf_crypto.hpp's;
// delegation matching is tuf_delegation.hpp's. No I/O here: tuf_updater.cpp does the network
// and the disk.
//
// Errors: every refusal is a tuf::Error (tuf_error.hpp) carrying a named Attack.
#include <cstdint>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tuf/tuf_crypto.hpp"
#include "tuf/tuf_error.hpp"

namespace kiln::tuf {

// A UTC time as TUF writes "expires": YYYY-MM-DDTHH:MM:SSZ; nullopt for anything else.
std::optional<std::time_t> parse_utc_time(std::string_view text);
std::string format_utc_time(std::time_t t);

// OLPC canonical JSON as securesystemslib writes it: objects with keys sorted (by code
// point), no whitespace, strings with only '"' and '\\' escaped, integers only (a float is
// refused: Attack::Malformed).
std::string canonical_json(const nlohmann::json& j);

struct RoleKeys {
  std::vector<std::string> keyids;
  int threshold = 1;
};

struct MetaFile {
  std::int64_t version = 0;
  std::optional<std::int64_t> length;
  std::map<std::string, std::string> hashes;  // algorithm -> hex
};

struct TargetFile {
  std::string path;
  std::int64_t length = 0;
  std::map<std::string, std::string> hashes;
};

struct DelegatedRole {
  std::string name;
  RoleKeys keys;
  bool terminating = false;
  std::optional<std::vector<std::string>> paths;
  std::optional<std::vector<std::string>> path_hash_prefixes;
};

struct SuccinctRoles {
  RoleKeys keys;
  int bit_length = 1;
  std::string name_prefix;  // bins are "<prefix>-<hex bin>" (tuf_delegation.hpp)
};

struct Delegations {
  std::map<std::string, Key> keys;
  std::vector<DelegatedRole> roles;  // in delegation order
  std::optional<SuccinctRoles> succinct;
};

// The fields every role has.
struct Common {
  std::string type;
  std::int64_t version = 0;
  std::string spec_version;
  std::time_t expires = 0;
  std::string expires_text;
  bool expired(std::time_t now) const { return now >= expires; }
};

struct Root : Common {
  bool consistent_snapshot = false;
  std::map<std::string, Key> keys;
  std::map<std::string, RoleKeys> roles;  // exactly root, timestamp, snapshot, targets
};
struct Timestamp : Common {
  MetaFile snapshot_meta;
};
struct Snapshot : Common {
  std::map<std::string, MetaFile> meta;  // "<role>.json" -> info
};
struct Targets : Common {
  std::map<std::string, TargetFile> targets;
  std::optional<Delegations> delegations;
};

// A metadata file split into its signed part (as canonical bytes) and its signatures.
struct Envelope {
  nlohmann::json signed_json;
  std::string canonical_signed;
  std::map<std::string, std::string> signatures;  // keyid -> raw signature bytes
};
// Parses bytes into an envelope; `what` names the file for messages. Refuses duplicate
// signature keyids (spec: keyids are unique in "signatures").
Envelope parse_envelope(std::string_view bytes, const std::string& what);

Root parse_root(const nlohmann::json& signed_json, const std::string& what);
Timestamp parse_timestamp(const nlohmann::json& signed_json, const std::string& what);
Snapshot parse_snapshot(const nlohmann::json& signed_json, const std::string& what);
Targets parse_targets(const nlohmann::json& signed_json, const std::string& what);

// Throws unless at least `role.threshold` distinct keyids of `role` (found in `keys`) carry a
// valid signature over env.canonical_signed: Attack::UntrustedKey when no signature is valid
// and every signature comes from a keyid the role does not list (a revoked key, an attacker's
// own key), Attack::BadSignature otherwise (too few, or invalid, signatures).
void verify_threshold(const Envelope& env, const std::map<std::string, Key>& keys,
                      const RoleKeys& role, const std::string& role_name,
                      const std::string& signer_name);

// Percent-encoding of a role or target name for URLs and file names: everything but
// A-Z a-z 0-9 "_.-~" becomes %XX (as Python's urllib.parse.quote(name, safe="")).
std::string quote_name(std::string_view name);

}  // namespace kiln::tuf
