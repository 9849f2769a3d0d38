#pragma once
// The loader's reader of a store's manifest.json for one URI at a time (the fast path of get():
// resolver.cpp, StoreScanner::scan_for). parse_manifest builds a JSON tree of the whole
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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/manifest.hpp"

namespace kiln {

// Where one artifact's object lies in a manifest's text, and its URI inside it (offsets).
struct ArtifactSpan {
  std::size_t uri_pos = 0, uri_len = 0;
  std::size_t begin = 0, end = 0;
  std::string_view uri(std::string_view text) const { return text.substr(uri_pos, uri_len); }
  bool operator==(const ArtifactSpan& o) const {
    return uri_pos == o.uri_pos && uri_len == o.uri_len && begin == o.begin && end == o.end;
  }
};

// What the strict reader found in a text it accepted whole: where the artifacts array lies
// ('[' at artifacts_begin, ']' just before artifacts_end), each artifact's span sorted by URI,
// and those URIs. Kept on disk by the scan record (scan_record.hpp) so that a later process can
// read the same unchanged file without reading or checking every artifact again.
struct ManifestLayout {
  std::size_t artifacts_begin = 0, artifacts_end = 0;
  std::vector<ArtifactSpan> spans;
  std::vector<std::string> uris;  // uris[i]: spans[i]'s URI (what read_with_layout looks up)
  bool operator==(const ManifestLayout& o) const {
    return artifacts_begin == o.artifacts_begin && artifacts_end == o.artifacts_end &&
           spans == o.spans && uris == o.uris;
  }
};

// Reads byte ranges [first, second) of the file a layout was made for, in one go: each range's
// bytes, in order; nullopt when the file is no longer the one the layout was made for (another
// identity) or cannot be read.
using ManifestPartReader = std::function<std::optional<std::vector<std::string>>(
    const std::vector<std::pair<std::size_t, std::size_t>>& ranges)>;

class ManifestEntries {
 public:
  // Throws what parse_manifest(text, origin) throws. Takes `text` only when it returns: after an
  // error the caller's string is as it was (for a message quoting it).
  static std::shared_ptr<const ManifestEntries> read(std::string&& text, const std::string& origin);

  // A file of `size` bytes read with a layout that an earlier strict read of the same bytes
  // produced (layout()), without reading or checking every artifact again: only the header (the
  // bytes before and after the artifacts array, read strictly with an empty array between) and
  // the objects of the URIs asked for are read, through `read_parts`; `first_uri`'s object is
  // read with the header. The layout only says where things are; every value comes from the
  // file. nullptr when the layout does not fit: URIs not sorted and unique, spans outside the
  // array, no '[' and ']' where the array should be, a header the strict reader refuses, or the
  // file unreadable. An artifact whose object then does not read as its URI's makes for_uri read
  // the whole file as read() does, whose answer (or error) is the answer; a file that is no
  // longer the layout's when for_uri reads it is an Error{Io}.
  static std::shared_ptr<const ManifestEntries> read_with_layout(std::size_t size,
                                                                 const std::string& origin,
                                                                 const ManifestLayout& layout,
                                                                 ManifestPartReader read_parts,
                                                                 const std::string* first_uri);
  // The same over a text in memory (tests, the fuzz target); `text` is only read.
  static std::shared_ptr<const ManifestEntries> read_with_layout(const std::string& text,
                                                                 const std::string& origin,
                                                                 const ManifestLayout& layout);

  // What the strict reader found; nullopt when parse_manifest decided the text or when it was
  // read with a layout (a layout is taken only from a text checked whole).
  std::optional<ManifestLayout> layout() const;

  // The text it was read from (read_with_layout: the header's bytes, the array left empty).
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
  std::shared_ptr<const Manifest> for_uri_from_layout(const std::string& uri) const;

  using Span = ArtifactSpan;

  std::string text_;
  std::string origin_;
  std::shared_ptr<const Manifest> header_;  // artifacts empty
  std::vector<Span> spans_;                 // strict: every artifact, sorted by URI
  std::shared_ptr<const Manifest> full_;    // not strict: parse_manifest's
  std::size_t artifacts_begin_ = 0, artifacts_end_ = 0;  // strict: the artifacts array
  // read_with_layout: artifacts not checked here; uris_[i] is spans_[i]'s URI, objects are read
  // through read_parts_ from the file of size_ bytes when asked for.
  bool from_layout_ = false;
  std::vector<std::string> uris_;
  std::size_t size_ = 0;
  ManifestPartReader read_parts_;
  mutable std::optional<std::pair<std::size_t, std::string>> preread_;  // first_uri's object
  // from_layout_: the file read whole, once an object did not read as its URI's.
  mutable std::shared_ptr<const ManifestEntries> whole_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Manifest>> by_uri_;
};

}  // namespace kiln
