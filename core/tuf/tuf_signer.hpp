#pragma once
// Signing for TUF metadata through OpenSSL: ed25519 and ecdsa-sha2-nistp256 keys (what the
// repository side signs with), plus rsassa-pss-sha256 and rsa-pkcs1v15-sha256 so tests can
// produce every scheme the client verifies. Public keys are written in the formats
// securesystemslib uses: ed25519 as 64 hex characters, ecdsa and rsa as PEM
// SubjectPublicKeyInfo. The keyid is the SHA-256 of the canonical JSON of
// {"keytype", "scheme", "keyval": {"public"}}.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tuf/tuf_metadata.hpp"

namespace kiln::tuf {

class Signer {
 public:
  // scheme: "ed25519", "ecdsa-sha2-nistp256", "rsassa-pss-sha256", "rsa-pkcs1v15-sha256".
  // Throws Error{Usage} for another scheme.
  static Signer generate(std::string_view scheme);
  // A PKCS#8 PEM private key written by private_pem(), with its scheme.
  static Signer from_private_pem(const std::string& pem, std::string_view scheme);

  ~Signer();
  Signer(Signer&&) noexcept;
  Signer& operator=(Signer&&) noexcept;
  Signer(const Signer&) = delete;
  Signer& operator=(const Signer&) = delete;

  const Key& public_key() const { return key_; }
  const std::string& keyid() const { return keyid_; }
  std::string sign(std::string_view data) const;  // raw signature bytes
  std::string private_pem() const;

 private:
  struct Impl;
  Signer(std::unique_ptr<Impl> impl, Key key);
  std::unique_ptr<Impl> impl_;
  Key key_;
  std::string keyid_;
};

std::string key_id(const Key& key);
nlohmann::json key_to_json(const Key& key);

// {"signatures": [{"keyid", "sig"}...], "signed": signed_json}, serialized.
std::string sign_metadata(const nlohmann::json& signed_json,
                          const std::vector<const Signer*>& signers);

}  // namespace kiln::tuf
