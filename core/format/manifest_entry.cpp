#include "format/manifest_entry.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "format/manifest_rules.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"

namespace kiln::format {

using namespace manifest_rules;
namespace {

// What the strict reader accepts nests 5 levels (root, artifacts, artifact, entries, entry), so
// it never needs the depth check that parse_manifest makes first.
static_assert(io::limits::kMaxJsonDepth >= 5);

// The bytes a string may hold here: printable ASCII but '"' (its end) and '\\' (an escape).
constexpr std::array<bool, 256> kPlainStringByte = [] {
  std::array<bool, 256> plain{};
  for (int c = 0x20; c < 0x7f; ++c) plain[c] = c != '"' && c != '\\';
  return plain;
}();

// JSON's four whitespace bytes (a table: one load per byte of a manifest's indentation, where
// four comparisons were).
constexpr std::array<bool, 256> kJsonSpace = [] {
  std::array<bool, 256> space{};
  space[' '] = space['\n'] = space['\r'] = space['\t'] = true;
  return space;
}();

// Reads the documents parse_manifest accepts, in the subset of JSON described in the header,
// by the rules of manifest_rules.hpp. Every method returns false as soon as the text leaves
// that subset or breaks a rule: the caller then asks parse_manifest. It never throws.
class StrictReader {
 public:
  explicit StrictReader(std::string_view text, std::size_t pos = 0) : t_(text), p_(pos) {}

  std::size_t pos() const { return p_; }
  // Where manifest() found the artifacts array.
  std::size_t artifacts_begin() const { return artifacts_begin_; }
  std::size_t artifacts_end() const { return artifacts_end_; }

  // The whole text: a manifest object and nothing after it but whitespace. Fills m's fields
  // but the artifacts, and one span per artifact.
  template <class Span>
  bool manifest(Manifest& m, std::vector<Span>& spans) {
    if (t_.size() > io::limits::kMaxJsonBytes) return false;
    unsigned seen = 0;
    bool ok = object([&](std::string_view key) {
      auto f = field<RootField>(kRootFields, key, seen);
      if (!f) return false;
      std::string_view s;
      std::uint64_t n = 0;
      switch (*f) {
        case RootField::format:
          return string(s) && s == kMarker;
        case RootField::format_version:
          if (!unsigned_integer(n) || n != static_cast<std::uint64_t>(kManifestFormat))
            return false;
          m.format_version = kManifestFormat;
          return true;
        case RootField::package:
          if (!non_empty(s) || !is_package_name(s)) return false;
          m.package = s;
          return true;
        case RootField::package_version:
          if (!non_empty(s) || !is_package_version(s)) return false;
          m.package_version = s;
          return true;
        case RootField::git_commit:
          if (!string(s)) return false;
          m.git_commit = s;
          return true;
        case RootField::cuda_version:
          if (!non_empty(s) || !is_cuda_version(s)) return false;
          m.cuda_version = s;
          return true;
        case RootField::target:
          if (!non_empty(s) || !canonical_target(s)) return false;
          m.target = s;
          return true;
        case RootField::build_time:
          if (!unsigned_integer(n) || n > std::numeric_limits<std::int64_t>::max()) return false;
          m.build_time = static_cast<std::int64_t>(n);
          return true;
        case RootField::artifacts:
          skip_space();
          artifacts_begin_ = p_;
          if (!artifacts(spans)) return false;
          artifacts_end_ = p_;
          return true;
        case RootField::skipped:
          return skipped(m.skipped);
      }
      return false;
    });
    if (!ok || seen != all_fields(kRootFields)) return false;
    skip_space();
    return p_ == t_.size();
  }

  // One artifact object; `out` (may be null) receives its values.
  bool artifact(ArtifactEntry* out, std::string_view& uri, std::string_view& file) {
    unsigned seen = 0;
    bool ok = object([&](std::string_view key) {
      auto f = field<ArtifactField>(kArtifactFields, key, seen);
      if (!f) return false;
      std::string_view s;
      switch (*f) {
        case ArtifactField::uri:
          if (!non_empty(uri)) return false;
          if (out) out->uri = uri;
          return true;
        case ArtifactField::family:
          if (!non_empty(s)) return false;
          if (out) out->family = s;
          return true;
        case ArtifactField::params:
          return params(out);
        case ArtifactField::entries:
          return entries(out);
        case ArtifactField::source_hash:
          if (!string(s) || !io::is_sha256_hex(s)) return false;
          if (out) out->source_hash = s;
          return true;
        case ArtifactField::flags:
          return array([&] {
            if (!string(s)) return false;
            if (out) out->flags.emplace_back(s);
            return true;
          });
        case ArtifactField::file:
          if (!string(file) || !is_artifact_file_name(file)) return false;
          if (out) out->file = file;
          return true;
        case ArtifactField::size: {
          std::uint64_t n = 0;
          if (!unsigned_integer(n)) return false;
          if (out) out->size = n;
          return true;
        }
        case ArtifactField::sha256:
          if (!string(s) || !io::is_sha256_hex(s)) return false;
          if (out) out->sha256 = s;
          return true;
      }
      return false;
    });
    return ok && seen == all_fields(kArtifactFields);
  }

 private:
  template <std::size_t N>
  static constexpr unsigned all_fields(const std::array<std::string_view, N>&) {
    return (1u << N) - 1;
  }

  // The field `key` names, marked seen; nullopt for an unknown or repeated key (parse_manifest
  // then decides, and refuses a repeated key too, with its message). Kiln writes fields in
  // table order, so the one after the last seen is tried first.
  template <class Field, std::size_t N>
  static std::optional<Field> field(const std::array<std::string_view, N>& fields,
                                    std::string_view key, unsigned& seen) {
    std::size_t next = 0;
    while (next < N && (seen >> next)) ++next;
    std::optional<std::size_t> i;
    if (next < N && fields[next] == key)
      i = next;
    else
      i = field_index(fields, key);
    if (!i || (seen & (1u << *i))) return std::nullopt;
    seen |= 1u << *i;
    return static_cast<Field>(*i);
  }

  template <class Span>
  bool artifacts(std::vector<Span>& spans) {
    std::vector<std::string_view> files;
    bool ok = array([&] {
      skip_space();
      Span s;
      s.begin = p_;
      std::string_view uri, file;
      if (!artifact(nullptr, uri, file)) return false;
      s.end = p_;
      s.uri_pos = static_cast<std::size_t>(uri.data() - t_.data());
      s.uri_len = uri.size();
      // URIs sorted and unique, as parse_manifest requires.
      if (!spans.empty() && !(uri_of(spans.back()) < uri)) return false;
      spans.push_back(s);
      files.push_back(file);
      return true;
    });
    if (!ok) return false;
    // Unique files, as parse_manifest requires.
    std::sort(files.begin(), files.end());
    return std::adjacent_find(files.begin(), files.end()) == files.end();
  }

  template <class Span>
  std::string_view uri_of(const Span& s) const {
    return t_.substr(s.uri_pos, s.uri_len);
  }

  bool params(ArtifactEntry* out) {
    std::vector<std::string_view> keys;
    bool ok = object([&](std::string_view key) {
      std::string_view value;
      if (!string(value)) return false;
      keys.push_back(key);
      if (out) out->params.emplace_back(key, value);
      return true;
    });
    if (!ok) return false;
    std::sort(keys.begin(), keys.end());
    return std::adjacent_find(keys.begin(), keys.end()) == keys.end();
  }

  bool entries(ArtifactEntry* out) {
    std::size_t count = 0;
    bool ok = array([&] {
      ++count;
      unsigned seen = 0;
      std::string_view name, symbol;
      bool entry_ok = object([&](std::string_view key) {
        auto f = field<EntryField>(kEntryFields, key, seen);
        if (!f) return false;
        return non_empty(*f == EntryField::name ? name : symbol);
      });
      if (!entry_ok || seen != all_fields(kEntryFields)) return false;
      if (out) out->entries.push_back({std::string(name), std::string(symbol)});
      return true;
    });
    return ok && count > 0;
  }

  bool skipped(std::vector<SkippedFamily>& out) {
    return array([&] {
      unsigned seen = 0;
      std::string_view family, reason;
      bool ok = object([&](std::string_view key) {
        auto f = field<SkippedField>(kSkippedFields, key, seen);
        if (!f) return false;
        return non_empty(*f == SkippedField::family ? family : reason);
      });
      if (!ok || seen != all_fields(kSkippedFields)) return false;
      out.push_back({std::string(family), std::string(reason)});
      return true;
    });
  }

  // '{' [key ':' value (',' key ':' value)*] '}'; member(key) reads the value.
  template <class Member>
  bool object(Member&& member) {
    if (!next_is('{')) return false;
    if (next_is('}')) return true;
    do {
      std::string_view key;
      if (!string(key) || !next_is(':') || !member(key)) return false;
    } while (next_is(','));
    return next_is('}');
  }

  // '[' [value (',' value)*] ']'; element() reads one value.
  template <class Element>
  bool array(Element&& element) {
    if (!next_is('[')) return false;
    if (next_is(']')) return true;
    do {
      if (!element()) return false;
    } while (next_is(','));
    return next_is(']');
  }

  void skip_space() {
    while (p_ < t_.size() && kJsonSpace[static_cast<unsigned char>(t_[p_])]) ++p_;
  }

  bool next_is(char c) {
    skip_space();
    if (p_ >= t_.size() || t_[p_] != c) return false;
    ++p_;
    return true;
  }

  // A string of printable ASCII without escapes: its bytes are its value.
  bool string(std::string_view& out) {
    if (!next_is('"')) return false;
    std::size_t begin = p_;
    while (p_ < t_.size() && kPlainStringByte[static_cast<unsigned char>(t_[p_])]) ++p_;
    if (p_ == t_.size() || t_[p_] != '"') return false;
    out = t_.substr(begin, p_ - begin);
    ++p_;
    return true;
  }

  bool non_empty(std::string_view& out) { return string(out) && !out.empty(); }

  // 0 or [1-9][0-9]*, at most 19 digits (below 2^64), not followed by a fraction or exponent.
  bool unsigned_integer(std::uint64_t& out) {
    skip_space();
    std::size_t begin = p_;
    std::uint64_t v = 0;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') v = v * 10 + (t_[p_++] - '0');
    std::size_t digits = p_ - begin;
    if (digits == 0 || digits > 19 || (digits > 1 && t_[begin] == '0')) return false;
    if (p_ < t_.size() && (t_[p_] == '.' || t_[p_] == 'e' || t_[p_] == 'E')) return false;
    out = v;
    return true;
  }

  std::string_view t_;
  std::size_t p_;
  std::size_t artifacts_begin_ = 0, artifacts_end_ = 0;
};

// The header of a text whose artifacts array's '[' is at `b`: `prefix` is the text through it,
// `suffix` the text from the array's ']' on; read strictly with an empty array between, and that
// array must be the root's "artifacts" (not, say, "skipped"'s brackets: a string holds no '"',
// so no other '[' of the text can stand where the root key's value is). `prefix` becomes the
// header's text. nullptr when it is not such a header.
std::shared_ptr<Manifest> read_header(std::string& prefix, const std::string& suffix,
                                      std::size_t b) {
  if (prefix.size() != b + 1 || prefix.back() != '[' || suffix.empty() || suffix.front() != ']')
    return nullptr;
  prefix += suffix;
  auto header = std::make_shared<Manifest>();
  std::vector<ArtifactSpan> none;
  StrictReader reader(prefix);
  if (!reader.manifest(*header, none) || reader.artifacts_begin() != b ||
      reader.artifacts_end() != b + 2)
    return nullptr;
  return header;
}

// The lines manifest_to_json writes (nlohmann's dump(2)): root keys indented by 2, each
// artifact object by 4, its keys by 6. A JSON string holds no raw newline, so a newline and
// this indentation never lie inside a string, and "\n    }" closes an artifact's object only.
constexpr std::string_view kArtifactsLine = "\n  \"artifacts\": [";
constexpr std::string_view kSkippedLine = "\n  \"skipped\": ";
constexpr std::string_view kObjectLines = "\n    {\n      \"uri\": \"";
constexpr std::size_t kObjectBrace = 5;  // '{' of kObjectLines
constexpr std::string_view kObjectClose = "\n    }";
// A lookup reads this many bytes at a time; an object's URI may run this far past a window.
constexpr std::size_t kSearchWindow = 4096;
// A step of the binary search reads this much from the middle of what is left: enough to hold
// an object's first line (kiln's objects take 0.8-1 KiB), and the next as much again when it
// does not. Each step costs one pread whatever its size; less to copy and scan is what it saves.
constexpr std::size_t kProbeWindow = 1024;
// Every window is read this far past its end, so that an object whose first line starts in it
// is read whole by the same pread (kiln's objects take 0.8-1 KiB): a lookup whose guess lands
// reads the manifest once, not again for the object (a second place in the file, a second
// disk read when the page cache no longer holds it).
constexpr std::size_t kObjectReach = 2048;
constexpr std::size_t kSearchUriSlack = 256;
constexpr std::size_t kMaxSearchedUri = std::size_t{64} << 10;
// Windows a remembered manifest keeps for later lookups (their top levels are the same).
constexpr std::size_t kMaxRememberedWindows = 1024;
// Past these the text is read whole instead: the header's landmarks from either end, and one
// artifact's object (or a stretch of the array without an object's first line).
constexpr std::size_t kMaxSearchedHeader = std::size_t{1} << 20;
constexpr std::size_t kMaxSearchedObject = std::size_t{1} << 20;

// Appends the object first lines that start in [from, to) to `out`; false: read the text whole.
// `remember`: a window the next lookups are likely to read again (the binary search's).
using WindowReader = std::function<bool(std::size_t from, std::size_t to, bool remember,
                                        std::vector<ManifestObjectLine>& out)>;
// Reads a rank-guided lookup makes before the binary search takes over (find_object).
constexpr int kMaxGuesses = 4;

// Where the header's landmarks lie in a file laid out as kiln writes it.
struct ArrayBounds {
  std::size_t begin = 0, end = 0;  // the artifacts array's '[' and one past its ']'
  std::string prefix, suffix;      // the text through '[' and from ']'
};

// The artifacts array of a file of `size` bytes, found from its first and last bytes: the
// "artifacts" line near the start, with the first object's first line (or ']') right after its
// '['; the "skipped" line near the end, with the array's ']' and ',' just before it and the
// last object's closing line (or '[') before that. nullopt when they are not there within
// kMaxSearchedHeader: a text laid out otherwise is read whole.
std::optional<ArrayBounds> find_array(ManifestFile& file, std::size_t size) {
  constexpr std::string_view kLastClose = "\n    }\n  ";  // then "],\n  \"skipped\": "
  ArrayBounds a;
  for (std::size_t n = std::min(size, kSearchWindow);; n = std::min(size, n * 4)) {
    std::optional<std::string> head = file.read(0, n);
    if (!head) return std::nullopt;
    const std::size_t at = head->find(kArtifactsLine);
    const std::size_t after = at + kArtifactsLine.size();
    if (at != std::string::npos && head->size() - after >= kObjectLines.size()) {
      const std::string_view rest = std::string_view(*head).substr(after);
      if (rest.substr(0, kObjectLines.size()) != kObjectLines && rest.front() != ']')
        return std::nullopt;
      a.begin = after - 1;
      a.prefix = head->substr(0, after);
      break;
    }
    if (n == size || n >= kMaxSearchedHeader) return std::nullopt;
  }
  for (std::size_t n = std::min(size, kSearchWindow);; n = std::min(size, n * 4)) {
    std::optional<std::string> tail = file.read(size - n, size);
    if (!tail) return std::nullopt;
    const std::size_t at = tail->rfind(kSkippedLine);
    if (at != std::string::npos && at >= 2 + kLastClose.size()) {
      const std::size_t close = at - 2;  // the array's ']'
      if ((*tail)[close] != ']' || (*tail)[close + 1] != ',') return std::nullopt;
      if ((*tail)[close - 1] != '[' &&
          tail->compare(close - kLastClose.size(), kLastClose.size(), kLastClose) != 0)
        return std::nullopt;
      a.end = size - n + close + 1;
      a.suffix = tail->substr(close);
      break;
    }
    if (n == size || n >= kMaxSearchedHeader) return std::nullopt;
  }
  if (!(a.begin + 1 < a.end)) return std::nullopt;
  return a;
}

// The first object first line (kObjectLines) in `bytes` at or after `pos`, npos if none: found by
// its '{', a byte an object holds two or three of, where kObjectLines' leading '\n' comes every
// 30 bytes or so (a read holds several objects).
std::size_t find_object_line(std::string_view bytes, std::size_t pos) {
  for (std::size_t b = bytes.find('{', pos + kObjectBrace); b != std::string_view::npos;
       b = bytes.find('{', b + 1))
    if (bytes.compare(b - kObjectBrace, kObjectLines.size(), kObjectLines) == 0)
      return b - kObjectBrace;
  return std::string_view::npos;
}

// Bytes of the file read last, from `from` on: what the object at a line just found is taken
// from without reading again (object_at).
struct ReadBytes {
  std::size_t from = 0;
  std::string bytes;
};

// The object first lines that start in [from, to), read at once with what their URIs need and
// kObjectReach more (never past `limit`, the array's ']'); a URI cut by the end of the read is
// read again on its own. false when a URI does not end within kMaxSearchedUri. `last` receives
// the bytes read.
bool object_lines(ManifestFile& file, std::size_t from, std::size_t to, std::size_t limit,
                  std::vector<ManifestObjectLine>& out, ReadBytes& last) {
  const std::size_t read_to =
      std::min(limit, to + std::max(kObjectLines.size() + kSearchUriSlack, kObjectReach));
  std::optional<std::string> read = file.read(from, read_to);
  if (!read) return false;
  last.from = from;
  last.bytes = std::move(*read);
  const std::string& bytes = last.bytes;
  for (std::size_t q = find_object_line(bytes, 0); q != std::string::npos && from + q < to;
       q = find_object_line(bytes, q + 1)) {
    const std::size_t uri_at = q + kObjectLines.size();
    std::size_t close = bytes.find('"', uri_at);
    if (close != std::string::npos) {
      out.push_back({from + q, bytes.substr(uri_at, close - uri_at)});
      continue;
    }
    const std::size_t line_end = std::min(limit, from + uri_at + kMaxSearchedUri);
    std::optional<std::string> line = file.read(from + uri_at, line_end);
    if (!line || (close = line->find('"')) == std::string::npos) return false;
    out.push_back({from + q, line->substr(0, close)});
  }
  return true;
}

enum class Found { yes, no, read_whole, narrowed };

// What is left to search: the objects whose first line starts in [lo, hi).
struct Bracket {
  std::size_t lo = 0, hi = 0;
};

// One step of a lookup: reads the object lines from `from` on, `window` bytes at a time until one
// is seen (or hi is reached), and narrows `br` by them: yes (`at` is uri's object), no (uri is
// not in the array), narrowed, or read_whole (lines out of order, an over-long URI, a stretch
// without any object). `seen` receives the lines read.
Found probe(const WindowReader& lines, std::size_t from, std::size_t window, bool remember,
            const std::string& uri, Bracket& br, std::vector<ManifestObjectLine>& seen,
            std::size_t& at) {
  seen.clear();
  for (std::size_t to = from; seen.empty() && to < br.hi;) {
    const std::size_t next = std::min(br.hi, to + window);
    if (!lines(to, next, remember, seen)) return Found::read_whole;
    to = next;
    if (to - from > kMaxSearchedObject) return Found::read_whole;
  }
  for (std::size_t i = 1; i < seen.size(); ++i)
    if (!(seen[i - 1].uri < seen[i].uri)) return Found::read_whole;
  if (seen.empty() || uri < seen.front().uri) {
    if (from == br.lo) return Found::no;
    br.hi = from;
  } else if (uri > seen.back().uri) {
    br.lo = seen.back().at + 1;
  } else {
    for (const ManifestObjectLine& line : seen)
      if (line.uri == uri) {
        at = line.at;
        return Found::yes;
      }
    return Found::no;
  }
  return Found::narrowed;
}

// Up to kMaxGuesses steps that read where uri's object would start if the bracket's objects
// were of one size, placed by uri's rank among the ranks of the URIs at the bracket's ends (the
// array's ends at first), and half a probe before it so that its first line falls inside (the
// read goes kObjectReach further: the object itself, when its line is there). Each
// step narrows the bracket as a binary search step does, so the search that follows starts
// from what is left; a URI without a rank ends the guesses.
Found guess_object(const WindowReader& lines, const UriRanks& ranks, const std::string& uri,
                   Bracket& br, std::size_t& at) {
  const std::optional<std::size_t> target = ranks.rank(uri);
  if (!target || *target >= ranks.count) return Found::narrowed;
  // Ranks of the bracket's ends: before the first URI and after the last at first.
  double rank_lo = -1, rank_hi = static_cast<double>(ranks.count);
  std::vector<ManifestObjectLine> seen;
  for (int step = 0; step < kMaxGuesses && br.hi - br.lo > 2 * kSearchWindow; ++step) {
    const double share = (static_cast<double>(*target) - rank_lo) / (rank_hi - rank_lo);
    if (!(share > 0 && share < 1)) return Found::narrowed;
    std::size_t from = br.lo + static_cast<std::size_t>(share * static_cast<double>(br.hi - br.lo));
    from = from > br.lo + kProbeWindow / 2 ? from - kProbeWindow / 2 : br.lo;
    const Bracket before = br;
    Found f = probe(lines, std::min(from, br.hi - 1), kProbeWindow, /*remember=*/false, uri, br,
                    seen, at);
    if (f != Found::narrowed) return f;
    // The URI now at the end that moved, as a rank; none (the end moved to where no line was
    // seen, or the URI is not in the list) ends the guesses.
    std::optional<std::size_t> r;
    if (br.lo != before.lo) {
      r = ranks.rank(seen.back().uri);
      if (r) rank_lo = static_cast<double>(*r);
    } else if (!seen.empty()) {
      r = ranks.rank(seen.front().uri);
      if (r) rank_hi = static_cast<double>(*r);
    }
    if (!r) return Found::narrowed;
  }
  return Found::narrowed;
}

// Binary search of the artifact objects of the array (b, e) for `uri`, over byte offsets: each
// step reads one window from the middle of what is left (through `lines`, which may remember
// windows) and narrows by the URIs whose first line starts in it; with `ranks`, guesses first
// (guess_object). Lines out of order, an over-long URI or a stretch without any object make the
// whole text decide (read_whole).
Found find_object(const WindowReader& lines, std::size_t b, std::size_t e, const std::string& uri,
                  const UriRanks* ranks, std::size_t& at) {
  Bracket br{b + 1, e - 1};
  if (ranks && ranks->rank && br.lo < br.hi) {
    Found f = guess_object(lines, *ranks, uri, br, at);
    if (f != Found::narrowed) return f;
  }
  std::vector<ManifestObjectLine> seen;
  for (int step = 0; step < 128; ++step) {
    if (br.lo >= br.hi) return Found::no;
    const bool last = br.hi - br.lo <= 2 * kSearchWindow;
    const std::size_t from = last ? br.lo : br.lo + (br.hi - br.lo) / 2;
    Found f = probe(lines, from, last ? br.hi - br.lo : kProbeWindow, /*remember=*/!last, uri, br,
                    seen, at);
    if (f != Found::narrowed) return f;
  }
  return Found::read_whole;
}

// The object whose first line is at `at`: from its '{' through the "\n    }" that closes it.
// What `last` holds of it (the bytes the search read last, which found the line) is not read
// again: when they hold it whole, nothing is read.
std::optional<std::string> object_at(ManifestFile& file, std::size_t at, std::size_t e,
                                     const ReadBytes& last) {
  std::string object;
  std::size_t from = at + kObjectBrace;
  if (last.from <= from && from < last.from + last.bytes.size()) {
    object = last.bytes.substr(from - last.from);
    const std::size_t close = object.find(kObjectClose);
    if (close != std::string::npos) {
      object.resize(close + kObjectClose.size());
      return object;
    }
    from = last.from + last.bytes.size();
  }
  for (; from < e && object.size() <= kMaxSearchedObject;) {
    const std::size_t to = std::min(e, from + kSearchWindow);
    std::optional<std::string> bytes = file.read(from, to);
    if (!bytes) return std::nullopt;
    const std::size_t keep =
        object.size() < kObjectClose.size() ? object.size() : kObjectClose.size();
    object += *bytes;
    const std::size_t close = object.find(kObjectClose, object.size() - bytes->size() - keep);
    if (close != std::string::npos) {
      object.resize(close + kObjectClose.size());
      return object;
    }
    from = to;
  }
  return std::nullopt;
}

// A text in memory as a ManifestFile.
class TextFile : public ManifestFile {
 public:
  explicit TextFile(std::shared_ptr<const std::string> text) : text_(std::move(text)) {}
  std::optional<std::string> read(std::size_t begin, std::size_t end) override {
    if (begin > end || end > text_->size()) return std::nullopt;
    return text_->substr(begin, end - begin);
  }
  bool unchanged() override { return true; }

 private:
  std::shared_ptr<const std::string> text_;
};

}  // namespace

std::shared_ptr<const ManifestEntries> ManifestEntries::read(std::string&& text,
                                                             const std::string& origin) {
  std::shared_ptr<ManifestEntries> e(new ManifestEntries());
  e->origin_ = origin;
  auto header = std::make_shared<Manifest>();
  StrictReader reader(text);
  if (reader.manifest(*header, e->spans_)) {
    e->artifacts_begin_ = reader.artifacts_begin();
    e->artifacts_end_ = reader.artifacts_end();
  } else {
    // Outside the strict reader's subset, or refused: parse_manifest decides, and its error is
    // the error.
    e->spans_.clear();
    e->full_ = std::make_shared<const Manifest>(parse_manifest(text, origin));
    *header = *e->full_;
    header->artifacts.clear();
  }
  // Spans are offsets: they stay valid in the moved string.
  e->text_ = std::move(text);
  e->header_ = std::move(header);
  return e;
}

std::shared_ptr<const ManifestEntries> ManifestEntries::open(std::size_t size,
                                                             const std::string& origin,
                                                             ManifestOpener opener,
                                                             const std::string* first_uri,
                                                             const UriRanks* ranks) {
  // No text past the limit is taken by the strict reader whole, so none is looked up either.
  if (size > io::limits::kMaxJsonBytes) return nullptr;
  std::shared_ptr<ManifestFile> file = opener();
  if (!file) return nullptr;
  std::optional<ArrayBounds> array = find_array(*file, size);
  if (!array) return nullptr;
  std::shared_ptr<Manifest> header = read_header(array->prefix, array->suffix, array->begin);
  if (!header) return nullptr;
  std::shared_ptr<ManifestEntries> m(new ManifestEntries());
  m->origin_ = origin;
  m->artifacts_begin_ = array->begin;
  m->artifacts_end_ = array->end;
  m->size_ = size;
  m->text_ = std::move(array->prefix);
  m->header_ = std::move(header);
  if (first_uri) {
    std::shared_ptr<const Manifest> first = m->search(*file, *first_uri, ranks);
    if (!first) return nullptr;  // the text read whole decides, once, for every URI
    m->by_uri_[*first_uri] = std::move(first);
  }
  if (!file->unchanged()) return nullptr;
  m->file_ = std::move(file);
  return m;
}

std::shared_ptr<const ManifestEntries> ManifestEntries::open(const std::string& text,
                                                             const std::string& origin,
                                                             const std::string* first_uri,
                                                             const UriRanks* ranks) {
  // Its own copy: the result may read other objects after `text` is gone.
  auto copy = std::make_shared<const std::string>(text);
  return open(
      text.size(), origin, [copy] { return std::make_unique<TextFile>(copy); }, first_uri, ranks);
}

std::shared_ptr<const Manifest> ManifestEntries::search(ManifestFile& file, const std::string& uri,
                                                        const UriRanks* ranks) const {
  // Windows of the top of the search are the same for every URI: remembered (with the file's
  // identity, which every open checks), so later lookups read only the levels below.
  ReadBytes last;
  WindowReader lines = [&](std::size_t from, std::size_t to, bool remember,
                           std::vector<ManifestObjectLine>& out) {
    if (remember) {
      std::lock_guard<std::mutex> lock(mu_);
      auto hit = windows_.find({from, to});
      if (hit != windows_.end()) {
        out.insert(out.end(), hit->second.begin(), hit->second.end());
        return true;
      }
    }
    const std::size_t before = out.size();
    if (!object_lines(file, from, to, artifacts_end_, out, last)) return false;
    if (!remember) return true;
    std::lock_guard<std::mutex> lock(mu_);
    if (windows_.size() < kMaxRememberedWindows)
      windows_.emplace(std::make_pair(from, to),
                       std::vector<ManifestObjectLine>(out.begin() + before, out.end()));
    return true;
  };
  std::size_t at = 0;
  switch (find_object(lines, artifacts_begin_, artifacts_end_, uri, ranks, at)) {
    case Found::no:
      return header_;
    case Found::read_whole:
    case Found::narrowed:  // not an answer find_object gives
      return nullptr;
    case Found::yes:
      break;
  }
  std::optional<std::string> object = object_at(file, at, artifacts_end_, last);
  if (!object) return nullptr;
  // The object alone, by the rules the whole text is read with, and it must be this URI's.
  ArtifactEntry a;
  std::string_view u, name;
  StrictReader r(*object);
  if (!r.artifact(&a, u, name) || r.pos() != object->size() || u != uri) return nullptr;
  auto m = std::make_shared<Manifest>(*header_);
  m->artifacts.push_back(std::move(a));
  return m;
}

std::shared_ptr<const Manifest> ManifestEntries::for_uri_by_search(const std::string& uri,
                                                                  const UriRanks* ranks) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (whole_) return whole_->for_uri(uri);
    auto slot = by_uri_.find(uri);
    if (slot != by_uri_.end()) return slot->second;
  }
  // The file is read outside the lock: gets of other URIs of this manifest do not wait on it.
  // It is the one open() opened: whoever asks has just found the path's identity to be the one
  // it was opened with (resolver.cpp, manifest_source), and unchanged() below checks it again.
  ManifestFile* file = file_.get();
  std::shared_ptr<const Manifest> found = search(*file, uri, ranks);
  if (!found) return whole_file_decides(*file, uri);
  if (!file->unchanged())
    throw Error(ErrorKind::Io, origin_ + ": changed while read (for " + uri + ")");
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = by_uri_[uri];
  if (!slot) slot = std::move(found);  // a get on another thread may have been first: one pointer
  return slot;
}

// parse_manifest decided the text: the header and uri's entry from its manifest, nothing else
// (another URI's entry is never an answer for this one, whatever the text).
std::shared_ptr<const Manifest> ManifestEntries::only_uri_of_full(const std::string& uri) const {
  const ArtifactEntry* a = full_->find(uri);
  if (!a) return header_;
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = by_uri_[uri];
  if (!slot) {
    auto m = std::make_shared<Manifest>(*header_);
    m->artifacts.push_back(*a);
    slot = std::move(m);
  }
  return slot;
}

// A text that is not laid out as kiln writes it where a search went, or an object that does not
// read as its URI's: the whole text decides, as read() does (its answer, or its error).
std::shared_ptr<const Manifest> ManifestEntries::whole_file_decides(ManifestFile& file,
                                                                    const std::string& uri) const {
  std::optional<std::string> whole = file.read(0, size_);
  if (!whole || !file.unchanged())
    throw Error(ErrorKind::Io, origin_ + ": changed or unreadable while read (for " + uri + ")");
  auto decided = read(std::move(*whole), origin_);
  std::lock_guard<std::mutex> lock(mu_);
  if (!whole_) whole_ = std::move(decided);
  return whole_->for_uri(uri);
}

std::shared_ptr<const Manifest> ManifestEntries::for_uri(const std::string& uri,
                                                         const UriRanks* ranks) const {
  if (full_) return only_uri_of_full(uri);
  if (file_) return for_uri_by_search(uri, ranks);
  auto it = std::lower_bound(spans_.begin(), spans_.end(), std::string_view(uri),
                             [&](const Span& s, std::string_view u) { return s.uri(text_) < u; });
  if (it == spans_.end() || it->uri(text_) != uri) return header_;
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = by_uri_[uri];
  if (!slot) {
    auto m = std::make_shared<Manifest>(*header_);
    ArtifactEntry a;
    std::string_view u, file;
    StrictReader r(text_, it->begin);
    // The text was accepted whole: reading one of its artifacts again cannot fail.
    if (!r.artifact(&a, u, file) || r.pos() != it->end)
      throw Error(ErrorKind::Internal, origin_ + ": artifact " + uri + " read differently twice");
    m->artifacts.push_back(std::move(a));
    slot = std::move(m);
  }
  return slot;
}

}  // namespace kiln::format
