// ManifestEntries::read (core/format/manifest_entry.hpp), the loader's one-entry reader of
// manifest.json, against parse_manifest over any bytes: both refuse with the same kind and
// message, or both accept with the same header and, for every URI, the same entry.
//
// Then ManifestEntries::open, the lookup that reads only the header and the asked objects:
// over a text parse_manifest accepts, it gives nullptr (not laid out as kiln writes it) or the
// same header and, for every URI, the same entry, and nothing for an unlisted one; over any
// other text, it refuses only with kiln::Error and never gives an entry of another URI.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/manifest.hpp"
#include "format/manifest_entry.hpp"
#include "fuzz_util.hpp"

namespace {

// Every field of `m` (artifacts: only `only`, if any), as canonical JSON (params as an object:
// repeated keys folded, so they are compared as a list too).
std::string canonical(kiln::format::Manifest m, const kiln::format::ArtifactEntry* only = nullptr) {
  m.artifacts.clear();
  if (only) m.artifacts.push_back(*only);
  return kiln::format::manifest_to_json(m);
}

// The URIs on the text's artifact object lines as kiln writes them (what open()'s search
// narrows by), at most 8: over a text parse_manifest refuses, the URIs a lookup can still find.
std::vector<std::string> object_line_uris(const std::string& text) {
  static const std::string kLine = "\n    {\n      \"uri\": \"";
  std::vector<std::string> out;
  for (std::size_t at = text.find(kLine); at != std::string::npos && out.size() < 8;
       at = text.find(kLine, at + 1)) {
    const std::size_t begin = at + kLine.size(), end = text.find('"', begin);
    if (end == std::string::npos) break;
    out.push_back(text.substr(begin, end - begin));
  }
  return out;
}

// open(text) asked for `first` first (a get's URI), then for each listed URI (`want`'s, or the
// text's object lines' when parse_manifest refuses it) and one that is not a URI; guided by
// `ranks` when given (any ranks: a hint must never change an answer).
void check_lookup(const std::string& text, const std::string& origin, const std::string& first,
                  const kiln::format::Manifest* want, const kiln::format::UriRanks* ranks = nullptr) {
  using namespace kiln;
  std::shared_ptr<const format::ManifestEntries> got;
  const bool opened = fuzz::refuses_cleanly(
      [&] { got = format::ManifestEntries::open(text, origin, &first, ranks); }, {ErrorKind::Format});
  if (!opened && want) fuzz::finding("open() threw over a text parse_manifest accepts");
  if (!got) return;
  if (want && canonical(got->header()) != canonical(*want))
    fuzz::finding("open() gives a different header: " + canonical(got->header()));
  auto one = [&](const std::string& uri, const format::ArtifactEntry* listed) {
    std::shared_ptr<const format::Manifest> m;
    if (!fuzz::refuses_cleanly([&] { m = got->for_uri(uri, ranks); },
                               {ErrorKind::Format, ErrorKind::Stale, ErrorKind::Limit}, origin)) {
      if (want) fuzz::finding("open()'s for_uri threw over a text parse_manifest accepts");
      return;
    }
    if (m->artifacts.size() > 1 || (m->artifacts.size() == 1 && m->artifacts[0].uri != uri))
      fuzz::finding("open()'s for_uri('" + uri + "') gives another URI's entry");
    if (!want) return;
    const format::ArtifactEntry* e = m->find(uri);
    if (!listed && e) fuzz::finding("open() found an unlisted uri '" + uri + "'");
    if (listed &&
        (!e || canonical(*m, e) != canonical(*want, listed) || e->params != listed->params))
      fuzz::finding("open() gives a different entry for '" + uri + "'");
  };
  one(first, want ? want->find(first) : nullptr);
  if (want)
    for (const auto& a : want->artifacts) one(a.uri, &a);
  else
    for (const auto& uri : object_line_uris(text)) one(uri, nullptr);
  one("\x01 not a uri", nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz-manifest.json";
  const std::string text(fuzz::as_text(data, size));
  std::optional<format::Manifest> want;
  std::optional<Error> want_error;
  try {
    want = format::parse_manifest(text, origin);
  } catch (const Error& e) {
    want_error = e;
  }
  std::shared_ptr<const format::ManifestEntries> got;
  std::optional<Error> got_error;
  try {
    got = format::ManifestEntries::read(std::string(text), origin);
  } catch (const Error& e) {
    got_error = e;
  }
  if (want_error || got_error) {
    if (!want_error)
      fuzz::finding(std::string("refused what parse_manifest accepts: ") + got_error->what());
    if (!got_error)
      fuzz::finding(std::string("accepted what parse_manifest refuses: ") + want_error->what());
    if (got_error->kind() != want_error->kind() ||
        std::string(got_error->what()) != want_error->what())
      fuzz::finding(std::string("refused differently: ") + got_error->what() +
                    " | parse_manifest: " + want_error->what());
    // Whether the error is a documented one is the manifest target's check.
    check_lookup(text, origin, "axpy_dtype_f32", nullptr);
    return 0;
  }
  if (canonical(got->header()) != canonical(*want))
    fuzz::finding("a different header: " + canonical(got->header()));
  for (const auto& a : want->artifacts) {
    auto m = got->for_uri(a.uri);
    const format::ArtifactEntry* e = m->find(a.uri);
    if (!e) fuzz::finding("for_uri misses listed uri '" + a.uri + "'");
    if (canonical(*m, e) != canonical(*want, &a) || e->params != a.params)
      fuzz::finding("a different entry for '" + a.uri + "': " + canonical(*m, e));
  }
  if (got->for_uri("\x01 not a uri")->find("\x01 not a uri"))
    fuzz::finding("for_uri found an unlisted uri");
  const std::string first = want->artifacts.empty() ? "axpy" : want->artifacts.back().uri;
  check_lookup(text, origin, first, &*want);
  // Guided by the manifest's own order (the ranks a description gives), and by ranks made from
  // the input's length (mostly wrong): the same answers.
  const kiln::format::Manifest& listed = *want;
  const kiln::format::UriRanks right{listed.artifacts.size(),
                             [&listed](std::string_view uri) -> std::optional<std::size_t> {
                               for (std::size_t i = 0; i < listed.artifacts.size(); ++i)
                                 if (listed.artifacts[i].uri == uri) return i;
                               return std::nullopt;
                             }};
  check_lookup(text, origin, first, &*want, &right);
  const std::size_t count = listed.artifacts.size() + 1 + size % 5;
  const kiln::format::UriRanks wrong{count, [count, salt = size](std::string_view uri)
                                        -> std::optional<std::size_t> {
                               std::size_t r = std::hash<std::string_view>()(uri) ^ salt;
                               r %= count + 2;
                               if (r >= count) return std::nullopt;
                               return r;
                             }};
  check_lookup(text, origin, first, &*want, &wrong);
  return 0;
}
