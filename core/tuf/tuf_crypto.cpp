#include "tuf/tuf_crypto.hpp"

#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <vector>

#include "io/artifact_check.hpp"
#include "tuf/tuf_openssl.hpp"

namespace kiln::tuf {

namespace {

const EVP_MD* digest_for(std::string_view algorithm) {
  if (algorithm == "sha224") return EVP_sha224();
  if (algorithm == "sha256") return EVP_sha256();
  if (algorithm == "sha384") return EVP_sha384();
  if (algorithm == "sha512") return EVP_sha512();
  if (algorithm == "blake2b" || algorithm == "blake2b-512") return EVP_blake2b512();
  return nullptr;
}

PkeyPtr load_pem_public_key(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return PkeyPtr(PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
}

[[noreturn]] void unsupported_algorithm(const std::string& what, const std::string& algorithm) {
  throw Error(Attack::Malformed, what + ": unsupported hash algorithm \"" + algorithm + "\"");
}

}  // namespace

std::string hex_encode(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  if (hex.size() % 2) return std::nullopt;
  auto val = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    int hi = val(hex[i]), lo = val(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

bool verify_signature(const Key& key, std::string_view signature, std::string_view data) {
  PkeyPtr pkey;
  const EVP_MD* md = nullptr;
  int padding = 0;
  if (key.keytype == "ed25519" && key.scheme == "ed25519") {
    auto raw = hex_decode(key.public_value);
    if (!raw || raw->size() != 32) return false;
    pkey.reset(EVP_PKEY_new_raw_public_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw->data()), 32));
  } else if ((key.keytype == "ecdsa" || key.keytype == "ecdsa-sha2-nistp256") &&
             key.scheme == "ecdsa-sha2-nistp256") {
    pkey = load_pem_public_key(key.public_value);
    if (!pkey || EVP_PKEY_get_base_id(pkey.get()) != EVP_PKEY_EC) return false;
    char group[64] = {0};
    std::size_t glen = 0;
    if (EVP_PKEY_get_group_name(pkey.get(), group, sizeof group, &glen) != 1 ||
        std::string_view(group) != "prime256v1")
      return false;
    md = EVP_sha256();
  } else if (key.keytype == "rsa" &&
             (key.scheme == "rsassa-pss-sha256" || key.scheme == "rsa-pkcs1v15-sha256")) {
    pkey = load_pem_public_key(key.public_value);
    if (!pkey || EVP_PKEY_get_base_id(pkey.get()) != EVP_PKEY_RSA) return false;
    md = EVP_sha256();
    padding = key.scheme == "rsassa-pss-sha256" ? RSA_PKCS1_PSS_PADDING : RSA_PKCS1_PADDING;
  } else {
    return false;
  }
  if (!pkey) return false;
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) return false;
  EVP_PKEY_CTX* pctx = nullptr;
  if (EVP_DigestVerifyInit(ctx.get(), &pctx, md, nullptr, pkey.get()) != 1) return false;
  if (padding != 0) {
    if (EVP_PKEY_CTX_set_rsa_padding(pctx, padding) != 1) return false;
    if (padding == RSA_PKCS1_PSS_PADDING &&
        (EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_AUTO) != 1 ||
         EVP_PKEY_CTX_set_rsa_mgf1_md(pctx, EVP_sha256()) != 1))
      return false;
  }
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                          data.size()) == 1;
}

std::optional<std::string> hex_digest(std::string_view algorithm, std::string_view data) {
  const EVP_MD* md = digest_for(algorithm);
  if (!md) return std::nullopt;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out, &len, md, nullptr) != 1)
    throw kiln::Error(ErrorKind::Internal, "EVP_Digest failed");
  return hex_encode(std::string_view(reinterpret_cast<const char*>(out), len));
}

struct MultiHasher::Impl {
  std::vector<std::pair<std::string, MdCtxPtr>> ctxs;
};

MultiHasher::MultiHasher(const std::map<std::string, std::string>& expected,
                         const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  for (const auto& [alg, hex] : expected) {
    const EVP_MD* md = digest_for(alg);
    if (!md) unsupported_algorithm(what, alg);
    MdCtxPtr ctx(EVP_MD_CTX_new());
    if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1)
      throw kiln::Error(ErrorKind::Internal, "EVP_DigestInit_ex failed");
    impl_->ctxs.emplace_back(alg, std::move(ctx));
  }
}

MultiHasher::~MultiHasher() = default;

void MultiHasher::update(std::string_view data) {
  for (auto& [alg, ctx] : impl_->ctxs)
    if (EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1)
      throw kiln::Error(ErrorKind::Internal, "EVP_DigestUpdate failed");
}

std::map<std::string, std::string> MultiHasher::finish() {
  std::map<std::string, std::string> out;
  for (auto& [alg, ctx] : impl_->ctxs) {
    unsigned char buf[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx.get(), buf, &len) != 1)
      throw kiln::Error(ErrorKind::Internal, "EVP_DigestFinal_ex failed");
    out[alg] = hex_encode(std::string_view(reinterpret_cast<const char*>(buf), len));
  }
  return out;
}

void verify_length_and_hashes(std::string_view data, std::optional<std::int64_t> expected_length,
                              const std::map<std::string, std::string>& expected_hashes,
                              Attack attack, const std::string& what) {
  // The store path's check and words (io/artifact_check.hpp), for each hash TUF names.
  if (expected_length) {
    if (*expected_length < 0)
      throw Error(attack, what + ": metadata says a length of " +
                              std::to_string(*expected_length) + " bytes");
    if (auto m = io::size_mismatch(data.size(), static_cast<std::uint64_t>(*expected_length)))
      throw Error(attack, m->message(what, "metadata"));
  }
  for (const auto& [alg, want] : expected_hashes) {
    auto got = hex_digest(alg, data);
    if (!got) unsupported_algorithm(what, alg);
    if (auto m = io::digest_mismatch(*got, want)) {
      m->field = alg;
      throw Error(attack, m->message(what, "metadata"));
    }
  }
}

}  // namespace kiln::tuf
