#include "format/manifest_entry.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "format/manifest_rules.hpp"
#include "io/limits.hpp"
#include "io/sha256.hpp"
#include "kiln/error.hpp"

namespace kiln {
namespace {

using namespace manifest_rules;

// What the strict reader accepts nests 5 levels (root, artifacts, artifact, entries, entry), so
// it never needs the depth check that parse_manifest makes first.
static_assert(limits::kMaxJsonDepth >= 5);

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
    if (t_.size() > limits::kMaxJsonBytes) return false;
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
          if (!string(s) || !is_sha256_hex(s)) return false;
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
          if (!string(s) || !is_sha256_hex(s)) return false;
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
  // keeps a repeated key's last value: not this reader's business). Kiln writes fields in table
  // order, so the one after the last seen is tried first.
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
      spans.push_back(s);
      files.push_back(file);
      return true;
    });
    if (!ok) return false;
    // Unique URIs and files, as parse_manifest requires.
    std::sort(spans.begin(), spans.end(),
              [&](const Span& a, const Span& b) { return uri_of(a) < uri_of(b); });
    for (std::size_t i = 1; i < spans.size(); ++i)
      if (uri_of(spans[i - 1]) == uri_of(spans[i])) return false;
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

std::shared_ptr<const ManifestEntries> ManifestEntries::read_with_layout(
    std::size_t size, const std::string& origin, const ManifestLayout& layout,
    ManifestPartReader read_parts, const std::string* first_uri) {
  const std::size_t b = layout.artifacts_begin, e = layout.artifacts_end;
  // No genuine layout exists for a text the strict reader does not take whole (limits.hpp).
  if (size > limits::kMaxJsonBytes) return nullptr;
  if (!(b < e && e <= size && layout.uris.size() == layout.spans.size())) return nullptr;
  for (std::size_t i = 0; i < layout.spans.size(); ++i) {
    const ArtifactSpan& s = layout.spans[i];
    // Inside the array, its URI inside it (and no sum that could wrap), the URI's length.
    if (!(b < s.begin && s.begin < s.end && s.end < e && s.begin < s.uri_pos &&
          s.uri_pos < s.end && s.uri_len > 0 && s.uri_len < s.end - s.uri_pos &&
          layout.uris[i].size() == s.uri_len))
      return nullptr;
    // Sorted by URI, each once: for_uri's binary search.
    if (i > 0 && !(layout.uris[i - 1] < layout.uris[i])) return nullptr;
  }
  // The header: the bytes up to the array's '[' and from its ']', and first_uri's object.
  std::vector<std::pair<std::size_t, std::size_t>> ranges = {{0, b + 1}, {e - 1, size}};
  std::optional<std::size_t> first;
  if (first_uri) {
    auto it = std::lower_bound(layout.uris.begin(), layout.uris.end(), *first_uri);
    if (it != layout.uris.end() && *it == *first_uri) {
      first = static_cast<std::size_t>(it - layout.uris.begin());
      ranges.emplace_back(layout.spans[*first].begin, layout.spans[*first].end);
    }
  }
  std::optional<std::vector<std::string>> parts = read_parts(ranges);
  if (!parts || parts->size() != ranges.size()) return nullptr;
  std::string& prefix = (*parts)[0];
  const std::string& suffix = (*parts)[1];
  if (prefix.size() != b + 1 || prefix.back() != '[' || suffix.size() != size - (e - 1) ||
      suffix.front() != ']')
    return nullptr;
  // "...[" + "]...": the header with an empty artifacts array, read by the same strict rules.
  prefix += suffix;
  auto header = std::make_shared<Manifest>();
  std::vector<Span> none;
  StrictReader reader(prefix);
  // ...and the empty array is the root's "artifacts" (not, say, "skipped"'s brackets): a
  // string holds no '"', so no other '[' of the text can stand where the root key's value is.
  if (!reader.manifest(*header, none) || reader.artifacts_begin() != b ||
      reader.artifacts_end() != b + 2)
    return nullptr;
  std::shared_ptr<ManifestEntries> m(new ManifestEntries());
  m->origin_ = origin;
  m->spans_ = layout.spans;
  m->uris_ = layout.uris;
  m->artifacts_begin_ = b;
  m->artifacts_end_ = e;
  m->from_layout_ = true;
  m->size_ = size;
  m->read_parts_ = std::move(read_parts);
  if (first) m->preread_.emplace(*first, std::move((*parts)[2]));
  m->text_ = std::move(prefix);
  m->header_ = std::move(header);
  return m;
}

std::shared_ptr<const ManifestEntries> ManifestEntries::read_with_layout(
    const std::string& text, const std::string& origin, const ManifestLayout& layout) {
  // Its own copy: the result may read other objects after `text` is gone.
  auto copy = std::make_shared<const std::string>(text);
  ManifestPartReader in_memory = [copy](const std::vector<std::pair<std::size_t, std::size_t>>&
                                            ranges) -> std::optional<std::vector<std::string>> {
    std::vector<std::string> out;
    for (const auto& [begin, end] : ranges) {
      if (begin > end || end > copy->size()) return std::nullopt;
      out.push_back(copy->substr(begin, end - begin));
    }
    return out;
  };
  return read_with_layout(text.size(), origin, layout, std::move(in_memory), nullptr);
}

std::optional<ManifestLayout> ManifestEntries::layout() const {
  if (full_ || from_layout_) return std::nullopt;
  ManifestLayout out{artifacts_begin_, artifacts_end_, spans_, {}};
  out.uris.reserve(spans_.size());
  for (const Span& s : spans_) out.uris.emplace_back(s.uri(text_));
  return out;
}

std::shared_ptr<const Manifest> ManifestEntries::for_uri(const std::string& uri) const {
  if (full_) return full_;
  if (from_layout_) return for_uri_from_layout(uri);
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

std::shared_ptr<const Manifest> ManifestEntries::for_uri_from_layout(const std::string& uri) const {
  auto it = std::lower_bound(uris_.begin(), uris_.end(), uri);
  if (it == uris_.end() || *it != uri) {
    std::lock_guard<std::mutex> lock(mu_);
    return whole_ ? whole_->for_uri(uri) : header_;
  }
  const std::size_t i = static_cast<std::size_t>(it - uris_.begin());
  const Span& span = spans_[i];
  std::string object;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (whole_) return whole_->for_uri(uri);
    auto slot = by_uri_.find(uri);
    if (slot != by_uri_.end()) return slot->second;
    if (preread_ && preread_->first == i) {
      object = std::move(preread_->second);
      preread_.reset();
    }
  }
  // The file is read outside the lock: gets of other URIs of this manifest do not wait on it.
  if (object.empty()) {
    auto parts = read_parts_({{span.begin, span.end}});
    if (!parts || parts->size() != 1)
      throw Error(ErrorKind::Io, origin_ + ": changed or unreadable while read (for " + uri + ")");
    object = std::move((*parts)[0]);
  }
  // The object alone, by the rules it was checked with, and it must be this URI's.
  ArtifactEntry a;
  std::string_view u, file;
  StrictReader r(object);
  if (!object.empty() && object.front() == '{' && r.artifact(&a, u, file) &&
      r.pos() == object.size() && u == uri) {
    auto m = std::make_shared<Manifest>(*header_);
    m->artifacts.push_back(std::move(a));
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = by_uri_[uri];
    if (!slot) slot = std::move(m);  // a get on another thread may have been first: one pointer
    return slot;
  }
  // A layout that does not fit this file after all (a record written for other bytes with the
  // same identity, or forged): the whole file decides, as read() does.
  auto whole = read_parts_({{0, size_}});
  if (!whole || whole->size() != 1)
    throw Error(ErrorKind::Io, origin_ + ": changed or unreadable while read (for " + uri + ")");
  auto decided = read(std::move((*whole)[0]), origin_);
  std::lock_guard<std::mutex> lock(mu_);
  if (!whole_) whole_ = std::move(decided);
  return whole_->for_uri(uri);
}

}  // namespace kiln
