#pragma once
// The one check of bytes against what pins them (a manifest entry, an index entry, a digest
// given to install), and the one check of what a list names against what is there. Every path
// that verifies an artifact or an archive on the store path (install, verify, the loader's
// load) reports in these words, so they read the same wherever a check fails:
//
//   <where>: size is <N> bytes, <pinned by> says <M>
//   <where>: sha256 is <hex>, <pinned by> says <hex>
//   <where>: artifact <uri> is listed in <listed by> but missing
//   <where>: not listed in <listed by>
//
// Size comes first: bytes of another size are refused without hashing them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::io {

// What a manifest or an index pins for one file.
struct ArtifactPin {
  std::uint64_t size = 0;
  std::string sha256;  // lowercase hex
};

// One field on which bytes and their pin disagree, both values as text.
struct PinMismatch {
  std::string field;  // "size" or "sha256"
  std::string actual;
  std::string expected;
  // "<where>: size is N bytes, <pinned_by> says M" or "<where>: sha256 is X, <pinned_by> says Y";
  // without `where`, the sentence alone.
  std::string message(std::string_view where, std::string_view pinned_by) const;
};

// Pure: the size mismatch, or nullopt when they agree.
std::optional<PinMismatch> size_mismatch(std::uint64_t actual, std::uint64_t pinned);
// Pure: the digest mismatch (hex strings compared as given), or nullopt when they agree.
std::optional<PinMismatch> digest_mismatch(std::string_view actual_sha256,
                                           std::string_view pinned_sha256);
// `bytes` against `pin`: size, then SHA-256 (hashed only when the size matches).
std::optional<PinMismatch> pin_mismatch(std::string_view bytes, const ArtifactPin& pin);
// A file's measured size and SHA-256 against `pin`: size first, then the digest.
std::optional<PinMismatch> pin_mismatch(std::uint64_t size, std::string_view sha256,
                                        const ArtifactPin& pin);

// What a list names and what is there, compared by name.
struct Coverage {
  std::vector<std::string> missing;   // listed, not present; in the list's order
  std::vector<std::string> unlisted;  // present, not listed; in the order present
  bool complete() const { return missing.empty() && unlisted.empty(); }
};
// Pure. Names listed twice or present twice count once.
Coverage coverage(const std::vector<std::string>& listed, const std::vector<std::string>& present);
// "<where>: artifact <uri> is listed in <listed_by> but missing"
std::string missing_message(std::string_view where, std::string_view uri,
                            std::string_view listed_by);
// "<where>: not listed in <listed_by>"
std::string unlisted_message(std::string_view where, std::string_view listed_by);

}  // namespace kiln::io
