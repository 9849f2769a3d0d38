#pragma once
// Owners of the OpenSSL handles core/tuf holds (the crypto checks and the signer): one deleter
// each, so a handle is freed on every path, thrown ones included. Private to core/tuf: no
// other header carries an OpenSSL type.
#include <openssl/bio.h>
#include <openssl/evp.h>

#include <memory>

namespace kiln::tuf {

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

}  // namespace kiln::tuf
