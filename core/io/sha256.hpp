#pragma once
// SHA-256 over OpenSSL's EVP interface; OpenSSL stays out of public headers.
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace kiln::io {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, std::size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // Tagged field: "tag\0<len>\0value" so two inputs can never run together into one hash.
  void field(std::string_view tag, std::string_view value);
  std::string hex();  // finishes; the object may not be updated afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(std::string_view data);
// Throws Error{Io} naming the path when the file cannot be read.
std::string sha256_file(const std::filesystem::path& path, std::size_t* size_out = nullptr);
bool is_sha256_hex(std::string_view s);

}  // namespace kiln::io
