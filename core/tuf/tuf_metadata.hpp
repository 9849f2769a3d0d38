#pragma once
// TUF metadata (specification 1.0.34): the typed model of root, timestamp, snapshot and
// targets, parsed and validated from the JSON bytes a repository serves, plus the pieces of
// pure logic the client workflow needs (canonical JSON, signature thresholds, hashes,
// delegation matching). No I/O here: tuf_updater.cpp does the network and the disk.
//
// Errors: every refusal is a tuf::Error (a kiln::Error) carrying a named Attack, so a caller
// and a test can tell a rollback from a freeze from a bad signature.
#include <cstdint>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/error.hpp"

namespace kiln::tuf {

// What the client refused, by the attack (or fault) it guards against. docs/tuf.md lists them.
enum class Attack {
  Malformed,         // not TUF metadata: bad JSON, a missing or mistyped field
  WrongType,         // "_type" is not the role asked for
  BadSignature,      // fewer valid signatures than the role's threshold
  UntrustedKey,      // signed only by keys the role does not list (revoked, or never trusted)
  RootVersionGap,    // root N+1 is not version N+1
  Rollback,          // a version lower than the trusted one
  EqualVersion,      // timestamp version equal to the trusted one (not an attack: keep ours)
  Expired,           // freeze: metadata past its "expires"
  SnapshotMismatch,  // snapshot differs from what timestamp names (version, length, hashes)
  MixAndMatch,       // a targets role differs from what snapshot names
  TooLarge,          // a response longer than the bound for it (endless data)
  TargetMismatch,    // target bytes differ from their length or hashes
  NotDelegated,      // a role that no trusted delegation names, or missing from snapshot
  TargetNotFound,    // no trusted role lists the target
  Network,           // the repository did not answer
};
const char* to_string(Attack a);
// The attack as one word for programs: the value of the error's "attack" field
// ("rollback", "freeze", "mix-and-match", ...; docs/tuf.md "Errors").
const char* attack_id(Attack a);

// Carries the field attack=<attack_id>, so the attack survives a copy into a plain kiln::Error
// (Error::with, the loader's resolution failure, `kiln fetch --json`).
class Error : public kiln::Error {
 public:
  Error(Attack attack, const std::string& message);
  Attack attack() const { return attack_; }

 private:
  Attack attack_;
};

// A UTC time as TUF writes "expires": YYYY-MM-DDTHH:MM:SSZ; nullopt for anything else.
std::optional<std::time_t> parse_utc_time(std::string_view text);
std::string format_utc_time(std::time_t t);

// OLPC canonical JSON as securesystemslib writes it: objects with keys sorted (by code
// point), no whitespace, strings with only '"' and '\\' escaped, integers only (a float is
// refused: Attack::Malformed).
std::string canonical_json(const nlohmann::json& j);

struct Key {
  std::string keytype;       // "ed25519", "ecdsa", "ecdsa-sha2-nistp256", "rsa"
  std::string scheme;        // "ed25519", "ecdsa-sha2-nistp256", "rsassa-pss-sha256", ...
  std::string public_value;  // ed25519: 64 hex chars; ecdsa and rsa: PEM SubjectPublicKeyInfo
};
// True when `signature` (raw bytes) is a valid signature of `data` under `key`. Unknown
// key types or schemes and unparsable keys verify nothing (false), as do bad signatures.
bool verify_signature(const Key& key, std::string_view signature, std::string_view data);

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
  std::string name_prefix;
  // The bin a target path falls into: "<prefix>-<hex bin, zero-padded>".
  std::string role_for_target(std::string_view target_path) const;
  bool is_role(std::string_view name) const;
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

// Hex digest of `data` with a TUF hash algorithm name ("sha256", "sha512", ...); nullopt for
// an algorithm this build does not know.
std::optional<std::string> hex_digest(std::string_view algorithm, std::string_view data);

// Incremental hashing of one stream with every algorithm a hashes map names.
class MultiHasher {
 public:
  // Throws Attack::Malformed naming `what` for an unknown algorithm.
  MultiHasher(const std::map<std::string, std::string>& expected, const std::string& what);
  ~MultiHasher();
  MultiHasher(const MultiHasher&) = delete;
  MultiHasher& operator=(const MultiHasher&) = delete;
  void update(std::string_view data);
  // algorithm -> hex digest; call once.
  std::map<std::string, std::string> finish();

 private:
  struct Impl;
  Impl* impl_;
};

// Length and hashes of `data` against `expected_*`; throws `attack` naming `what`, the field
// and both values.
void verify_length_and_hashes(std::string_view data, std::optional<std::int64_t> expected_length,
                              const std::map<std::string, std::string>& expected_hashes,
                              Attack attack, const std::string& what);

// fnmatch-style matching of one target path against one delegation pattern, segment by
// segment ("/" never matched by a wildcard); '*', '?', '[abc]', '[!abc]'.
bool path_matches_pattern(std::string_view target_path, std::string_view pattern);
bool role_delegates_path(const DelegatedRole& role, std::string_view target_path);

// Percent-encoding of a role or target name for URLs and file names: everything but
// A-Z a-z 0-9 "_.-~" becomes %XX (as Python's urllib.parse.quote(name, safe="")).
std::string quote_name(std::string_view name);

std::string hex_encode(std::string_view bytes);
std::optional<std::string> hex_decode(std::string_view hex);

}  // namespace kiln::tuf
