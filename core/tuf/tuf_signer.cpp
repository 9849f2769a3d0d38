#include "tuf/tuf_signer.hpp"

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "tuf/tuf_openssl.hpp"

namespace kiln::tuf {

namespace {

[[noreturn]] void ossl_fail(const char* what) {
  throw kiln::Error(ErrorKind::Internal, std::string("tuf signer: OpenSSL ") + what + " failed");
}

std::string bio_string(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

Key public_key_of(EVP_PKEY* pkey, std::string_view scheme) {
  Key k;
  k.scheme = std::string(scheme);
  if (scheme == "ed25519") {
    k.keytype = "ed25519";
    unsigned char raw[32];
    std::size_t len = sizeof raw;
    if (EVP_PKEY_get_raw_public_key(pkey, raw, &len) != 1 || len != 32)
      ossl_fail("EVP_PKEY_get_raw_public_key");
    k.public_value = hex_encode(std::string_view(reinterpret_cast<char*>(raw), len));
    return k;
  }
  k.keytype = scheme == "ecdsa-sha2-nistp256" ? "ecdsa" : "rsa";
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), pkey) != 1) ossl_fail("PEM_write_bio_PUBKEY");
  k.public_value = bio_string(bio.get());
  return k;
}

void check_scheme(std::string_view scheme) {
  if (scheme != "ed25519" && scheme != "ecdsa-sha2-nistp256" && scheme != "rsassa-pss-sha256" &&
      scheme != "rsa-pkcs1v15-sha256")
    throw kiln::Error(ErrorKind::Usage, "unsupported signing scheme \"" + std::string(scheme) +
                                            "\" (ed25519, ecdsa-sha2-nistp256, rsassa-pss-sha256, "
                                            "rsa-pkcs1v15-sha256)");
}

}  // namespace

struct Signer::Impl {
  PkeyPtr pkey;
  std::string scheme;
};

Signer::Signer(std::unique_ptr<Impl> impl, Key key)
    : impl_(std::move(impl)), key_(std::move(key)), keyid_(key_id(key_)) {}
Signer::~Signer() = default;
Signer::Signer(Signer&&) noexcept = default;
Signer& Signer::operator=(Signer&&) noexcept = default;

Signer Signer::generate(std::string_view scheme) {
  check_scheme(scheme);
  EVP_PKEY* raw = nullptr;
  if (scheme == "ed25519")
    raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  else if (scheme == "ecdsa-sha2-nistp256")
    raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  else
    raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(2048));
  if (!raw) ossl_fail("key generation");
  auto impl = std::make_unique<Impl>();
  impl->pkey.reset(raw);
  impl->scheme = std::string(scheme);
  Key key = public_key_of(raw, scheme);
  return Signer(std::move(impl), std::move(key));
}

Signer Signer::from_private_pem(const std::string& pem, std::string_view scheme) {
  check_scheme(scheme);
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) ossl_fail("BIO_new_mem_buf");
  EVP_PKEY* raw = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  if (!raw) throw kiln::Error(ErrorKind::Format, "not a PEM private key");
  auto impl = std::make_unique<Impl>();
  impl->pkey.reset(raw);
  impl->scheme = std::string(scheme);
  Key key = public_key_of(raw, scheme);
  return Signer(std::move(impl), std::move(key));
}

std::string Signer::sign(std::string_view data) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) ossl_fail("EVP_MD_CTX_new");
  EVP_PKEY_CTX* pctx = nullptr;
  const EVP_MD* md = impl_->scheme == "ed25519" ? nullptr : EVP_sha256();
  if (EVP_DigestSignInit(ctx.get(), &pctx, md, nullptr, impl_->pkey.get()) != 1)
    ossl_fail("EVP_DigestSignInit");
  if (impl_->scheme == "rsassa-pss-sha256") {
    if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
        EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) != 1 ||
        EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) != 1)
      ossl_fail("RSA-PSS parameters");
  } else if (impl_->scheme == "rsa-pkcs1v15-sha256") {
    if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1) ossl_fail("RSA padding");
  }
  std::size_t len = 0;
  const auto* in = reinterpret_cast<const unsigned char*>(data.data());
  if (EVP_DigestSign(ctx.get(), nullptr, &len, in, data.size()) != 1) ossl_fail("EVP_DigestSign");
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, in,
                     data.size()) != 1)
    ossl_fail("EVP_DigestSign");
  sig.resize(len);
  return sig;
}

std::string Signer::private_pem() const {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), impl_->pkey.get(), nullptr, nullptr, 0, nullptr,
                                       nullptr) != 1)
    ossl_fail("PEM_write_bio_PrivateKey");
  return bio_string(bio.get());
}

nlohmann::json key_to_json(const Key& key) {
  return {
      {"keytype", key.keytype}, {"scheme", key.scheme}, {"keyval", {{"public", key.public_value}}}};
}

std::string key_id(const Key& key) {
  return *hex_digest("sha256", canonical_json(key_to_json(key)));
}

std::string sign_metadata(const nlohmann::json& signed_json,
                          const std::vector<const Signer*>& signers) {
  std::string canonical = canonical_json(signed_json);
  nlohmann::json sigs = nlohmann::json::array();
  for (const Signer* s : signers)
    sigs.push_back({{"keyid", s->keyid()}, {"sig", hex_encode(s->sign(canonical))}});
  return nlohmann::json{{"signatures", sigs}, {"signed", signed_json}}.dump(1);
}

}  // namespace kiln::tuf
