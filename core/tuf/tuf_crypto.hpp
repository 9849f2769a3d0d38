#pragma once
// The cryptography of the TUF client: public keys and their signatures, the hash algorithms
// metadata names, and the length-and-hashes check of bytes against metadata. OpenSSL stays in
// the .cpp files (tuf_openssl.hpp owns its handles).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tuf/tuf_error.hpp"

namespace kiln::tuf {

struct Key {
  std::string keytype;       // "ed25519", "ecdsa", "ecdsa-sha2-nistp256", "rsa"
  std::string scheme;        // "ed25519", "ecdsa-sha2-nistp256", "rsassa-pss-sha256", ...
  std::string public_value;  // ed25519: 64 hex chars; ecdsa and rsa: PEM SubjectPublicKeyInfo
};
// True when `signature` (raw bytes) is a valid signature of `data` under `key`. Unknown
// key types or schemes and unparsable keys verify nothing (false), as do bad signatures.
bool verify_signature(const Key& key, std::string_view signature, std::string_view data);

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
  std::unique_ptr<Impl> impl_;
};

// Length and hashes of `data` against `expected_*`; throws `attack` naming `what`, the field
// and both values.
void verify_length_and_hashes(std::string_view data, std::optional<std::int64_t> expected_length,
                              const std::map<std::string, std::string>& expected_hashes,
                              Attack attack, const std::string& what);

std::string hex_encode(std::string_view bytes);
std::optional<std::string> hex_decode(std::string_view hex);

}  // namespace kiln::tuf
