#include "io/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "io/file_descriptor.hpp"
#include "kiln/error.hpp"

namespace kiln::io {

namespace {

// Fetched once: with EVP_sha256() every EVP_DigestInit_ex looks the algorithm up in OpenSSL's
// provider registry again (a lock and a table walk), which costs more than hashing a small
// artifact.
const EVP_MD* sha256_md() {
  static const EVP_MD* md = [] {
    const EVP_MD* m = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return m ? m : EVP_sha256();
  }();
  return md;
}

std::string hex_digest(const unsigned char* md) {
  static const char* digits = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    out[2 * i] = digits[md[i] >> 4];
    out[2 * i + 1] = digits[md[i] & 15];
  }
  return out;
}

}  // namespace

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
  bool done = false;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, sha256_md(), nullptr) != 1)
    throw Error(ErrorKind::Internal, "OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, std::size_t size) {
  if (impl_->done) throw Error(ErrorKind::Internal, "SHA-256 updated after it was finished");
  if (size && EVP_DigestUpdate(impl_->ctx, data, size) != 1)
    throw Error(ErrorKind::Internal, "OpenSSL: SHA-256 update failed");
}

void Sha256::field(std::string_view tag, std::string_view value) {
  update(tag);
  update("\0", 1);
  std::string len = std::to_string(value.size());
  update(len);
  update("\0", 1);
  update(value);
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (impl_->done || EVP_DigestFinal_ex(impl_->ctx, md, &n) != 1 || n != 32)
    throw Error(ErrorKind::Internal, "OpenSSL: SHA-256 finish failed");
  impl_->done = true;
  return hex_digest(md);
}

std::string sha256_hex(std::string_view data) {
  // One pass, no context object: the whole buffer is in memory.
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), md, &n, sha256_md(), nullptr) != 1 || n != 32)
    throw Error(ErrorKind::Internal, "OpenSSL: SHA-256 failed");
  return hex_digest(md);
}

std::string sha256_file(const std::filesystem::path& path, std::size_t* size_out) {
  // O_NONBLOCK + fstat: a FIFO or device (also behind a symlink) is refused, never read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) throw Error(ErrorKind::Io, "cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error(ErrorKind::Io, path.string() + ": not a regular file");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  std::size_t total = 0;
  for (;;) {
    ssize_t n = read_full(fd.get(), buf.data(), buf.size());
    if (n < 0) throw Error(ErrorKind::Io, "cannot read " + path.string());
    if (n > 0) h.update(buf.data(), static_cast<std::size_t>(n));
    total += static_cast<std::size_t>(n);
    if (static_cast<std::size_t>(n) < buf.size()) break;
  }
  if (size_out) *size_out = total;
  return h.hex();
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  // A table and no early exit: the 66 digests of a manifest are checked on the cold path.
  static constexpr auto kHex = [] {
    std::array<unsigned char, 256> t{};
    for (int c = '0'; c <= '9'; ++c) t[c] = 1;
    for (int c = 'a'; c <= 'f'; ++c) t[c] = 1;
    return t;
  }();
  unsigned hex = 1;
  for (char c : s) hex &= kHex[static_cast<unsigned char>(c)];
  return hex != 0;
}

}  // namespace kiln::io
