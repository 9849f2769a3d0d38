#pragma once
// The loader's reader of a store's manifest.json for one URI at a time (the fast path of get():
// resolver.cpp, DiskStoreFs::scan_for). parse_manifest builds a JSON tree of the whole
// manifest and converts every artifact; a get() needs the header and one artifact's entry.
//
// ManifestEntries::read accepts exactly the texts parse_manifest accepts, with the same values,
// and refuses the others with parse_manifest's own Error (kind and message). A strict reader
// decides the texts kiln writes: it checks the whole text, every artifact included, by the rules
// of manifest_rules.hpp, builds no tree and converts only the header and skipped families.
// It accepts a subset of JSON in which nothing needs decoding: strings of printable ASCII
// without escapes, numbers that are plain non-negative integers, no duplicate keys. Anything
// else, and any text that breaks a rule, goes to parse_manifest, whose answer is the answer:
// the error messages exist once, and the strict reader only has to be right when it accepts
// (docs/decisions.md, "A second manifest reader for the cold get").
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/manifest.hpp"

namespace kiln {

class ManifestEntries {
 public:
  // Throws what parse_manifest(text, origin) throws. Takes `text` only when it returns: after an
  // error the caller's string is as it was (for a message quoting it).
  static std::shared_ptr<const ManifestEntries> read(std::string&& text, const std::string& origin);

  // The text it was read from.
  const std::string& text() const { return text_; }
  // Every field but the artifacts (format_version, versions, target, build time, skipped).
  const Manifest& header() const { return *header_; }
  // A manifest whose find(uri) is what parse_manifest's gives, and whose other fields are
  // header()'s. Read by the strict reader, its only artifact is uri's (none when the manifest
  // does not list uri); otherwise it is parse_manifest's whole manifest. Converted once per URI
  // and shared: the same pointer for the same URI.
  std::shared_ptr<const Manifest> for_uri(const std::string& uri) const;
  // Whether the strict reader decided the text (false: parse_manifest did). For tests.
  bool strict() const { return !full_; }

  ManifestEntries(const ManifestEntries&) = delete;
  ManifestEntries& operator=(const ManifestEntries&) = delete;

 private:
  ManifestEntries() = default;

  // Where one artifact's object is in text_, and its URI inside it.
  struct Span {
    std::size_t uri_pos = 0, uri_len = 0;
    std::size_t begin = 0, end = 0;
    std::string_view uri(const std::string& text) const { return {text.data() + uri_pos, uri_len}; }
  };

  std::string text_;
  std::string origin_;
  std::shared_ptr<const Manifest> header_;  // artifacts empty
  std::vector<Span> spans_;                 // strict: every artifact, sorted by URI
  std::shared_ptr<const Manifest> full_;    // not strict: parse_manifest's
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Manifest>> by_uri_;
};

}  // namespace kiln
