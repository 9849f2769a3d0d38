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
//
// ManifestEntries::open does not read the text whole: it finds the header and an asked URI's
// object by the lines kiln writes, so that a get costs the same for 10 artifacts or 20,000
// (docs/decisions.md, "Manifests looked up, not read"). It checks the header and each object it
// reads by the same strict rules, and leaves any text not laid out as kiln writes it to read().
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "format/manifest.hpp"

namespace kiln::format {

// Where one artifact's object lies in a manifest's text, and its URI inside it (offsets).
struct ArtifactSpan {
  std::size_t uri_pos = 0, uri_len = 0;
  std::size_t begin = 0, end = 0;
  std::string_view uri(std::string_view text) const { return text.substr(uri_pos, uri_len); }
};

// An artifact object's first line in a manifest's text: where it starts (its '\n') and the URI
// on it. What ManifestEntries::open's binary search narrows by.
struct ManifestObjectLine {
  std::size_t at = 0;
  std::string uri;
};

// One manifest file opened for lookups (ManifestEntries::open): byte ranges read from the same
// open file, and whether it is still the file that was opened once they are read. The file the
// first lookup opened serves every later one of the same ManifestEntries, so both may be called
// from several threads at once.
class ManifestFile {
 public:
  virtual ~ManifestFile() = default;
  // Bytes [begin, end) of the file; nullopt when they cannot be read whole.
  virtual std::optional<std::string> read(std::size_t begin, std::size_t end) = 0;
  // Still the file that was opened (not rewritten, replaced or grown while read).
  virtual bool unchanged() = 0;
};
// Opens the manifest; nullptr when it is no longer the file looked at (another identity) or
// cannot be opened.
using ManifestOpener = std::function<std::unique_ptr<ManifestFile>()>;

// Where URIs stand in the sorted list a manifest's URIs come from (the package description's
// kernel table): a lookup that knows it guesses where a URI's object lies and corrects by the
// URIs it reads, in a few reads whatever the number of artifacts, before halving what is left
// (docs/decisions.md, "Loading cost independent of package size"). Only a hint: a wrong rank
// costs reads, never a different answer.
struct UriRanks {
  std::size_t count = 0;  // URIs in the list
  // uri's index in the list; nullopt when it is not there. Called from several threads.
  std::function<std::optional<std::size_t>(std::string_view uri)> rank;
};

class ManifestEntries {
 public:
  // Throws what parse_manifest(text, origin) throws. Takes `text` only when it returns: after an
  // error the caller's string is as it was (for a message quoting it).
  static std::shared_ptr<const ManifestEntries> read(std::string&& text, const std::string& origin);

  // A file of `size` bytes read as kiln writes manifests (manifest_to_json: one key per line,
  // 2 spaces per level), without reading it whole: the header's bytes (up to the artifacts
  // array's '[' and from its ']', found by their lines at either end), read strictly with an
  // empty array between, and each asked URI's object, found by a binary search over the sorted
  // artifacts' lines (a few 4 KiB reads however many artifacts there are) and read strictly; it
  // must carry the URI. `first_uri`'s object is looked up in the same open as the header.
  // nullptr when the text is not laid out so (the caller then reads it whole) or the file is no
  // longer the one opened. What this does not check is the artifacts that are not asked for:
  // install checked them all (docs/decisions.md, "Manifests looked up, not read"). A URI whose
  // search meets a text not laid out as kiln writes it, or whose object does not read as its
  // URI's, makes for_uri read the whole file as read() does, whose answer (or error) is the
  // answer; a file that is no longer the opened one when for_uri reads it is an Error{Io}.
  // `ranks` (may be null) guides the searches (UriRanks).
  static std::shared_ptr<const ManifestEntries> open(std::size_t size, const std::string& origin,
                                                     ManifestOpener opener,
                                                     const std::string* first_uri,
                                                     const UriRanks* ranks = nullptr);
  // The same over a text in memory (tests, the fuzz target); `text` is only read.
  static std::shared_ptr<const ManifestEntries> open(const std::string& text,
                                                     const std::string& origin,
                                                     const std::string* first_uri,
                                                     const UriRanks* ranks = nullptr);
  // Whether it was opened (open()) rather than read. For tests.
  bool searched() const { return static_cast<bool>(file_); }

  // The text it was read from (open(): the header's bytes, the array left empty).
  const std::string& text() const { return text_; }
  // Every field but the artifacts (format_version, versions, target, build time, skipped).
  const Manifest& header() const { return *header_; }
  // A manifest whose find(uri) is what parse_manifest's gives, and whose other fields are
  // header()'s. Its only artifact is uri's (none when the manifest does not list uri), whichever
  // reader decided the text: never another URI's entry, whatever the bytes. Converted once per
  // URI and shared: the same pointer for the same URI. `ranks` (may be null) guides a search.
  std::shared_ptr<const Manifest> for_uri(const std::string& uri,
                                          const UriRanks* ranks = nullptr) const;
  // Whether the strict reader decided the text (false: parse_manifest did). For tests.
  bool strict() const { return !full_; }

  ManifestEntries(const ManifestEntries&) = delete;
  ManifestEntries& operator=(const ManifestEntries&) = delete;

 private:
  ManifestEntries() = default;
  std::shared_ptr<const Manifest> for_uri_by_search(const std::string& uri,
                                                    const UriRanks* ranks) const;
  // uri's entry from the opened file (nullptr: the file must decide whole), header_ when absent.
  std::shared_ptr<const Manifest> search(ManifestFile& file, const std::string& uri,
                                         const UriRanks* ranks) const;
  std::shared_ptr<const Manifest> whole_file_decides(ManifestFile& file,
                                                     const std::string& uri) const;
  std::shared_ptr<const Manifest> only_uri_of_full(const std::string& uri) const;

  using Span = ArtifactSpan;

  std::string text_;
  std::string origin_;
  std::shared_ptr<const Manifest> header_;  // artifacts empty
  std::vector<Span> spans_;                 // strict: every artifact, sorted by URI
  std::shared_ptr<const Manifest> full_;    // not strict: parse_manifest's (for_uri trims it)
  std::size_t artifacts_begin_ = 0, artifacts_end_ = 0;  // strict: the artifacts array
  std::size_t size_ = 0;
  // open(): objects found by searching the file of size_ bytes, the one open() opened, kept open
  // (one descriptor per manifest remembered: a later lookup makes no open and close of its
  // own); the windows earlier searches read, by [from, to) (guarded by mu_).
  std::shared_ptr<ManifestFile> file_;
  mutable std::map<std::pair<std::size_t, std::size_t>, std::vector<ManifestObjectLine>> windows_;
  // open(): the file read whole, once a search or an object did not read as kiln writes it.
  mutable std::shared_ptr<const ManifestEntries> whole_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Manifest>> by_uri_;
};

}  // namespace kiln::format
