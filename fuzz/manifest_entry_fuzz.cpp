// ManifestEntries::read (core/format/manifest_entry.hpp), the loader's one-entry reader of
// manifest.json, against parse_manifest over any bytes: both refuse with the same kind and
// message, or both accept with the same header and, for every URI, the same entry.
#include <memory>
#include <optional>

#include "format/manifest.hpp"
#include "format/manifest_entry.hpp"
#include "fuzz_util.hpp"

namespace {

// Every field of `m` (artifacts: only `only`, if any), as canonical JSON (params as an object:
// repeated keys folded, so they are compared as a list too).
std::string canonical(kiln::Manifest m, const kiln::ArtifactEntry* only = nullptr) {
  m.artifacts.clear();
  if (only) m.artifacts.push_back(*only);
  return kiln::manifest_to_json(m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kiln;
  const std::string origin = "fuzz-manifest.json";
  const std::string text(fuzz::as_text(data, size));
  std::optional<Manifest> want;
  std::optional<Error> want_error;
  try {
    want = parse_manifest(text, origin);
  } catch (const Error& e) {
    want_error = e;
  }
  std::shared_ptr<const ManifestEntries> got;
  std::optional<Error> got_error;
  try {
    got = ManifestEntries::read(std::string(text), origin);
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
    return 0;  // whether the error is a documented one is the manifest target's check
  }
  if (canonical(got->header()) != canonical(*want))
    fuzz::finding("a different header: " + canonical(got->header()));
  for (const auto& a : want->artifacts) {
    auto m = got->for_uri(a.uri);
    const ArtifactEntry* e = m->find(a.uri);
    if (!e) fuzz::finding("for_uri misses listed uri '" + a.uri + "'");
    if (canonical(*m, e) != canonical(*want, &a) || e->params != a.params)
      fuzz::finding("a different entry for '" + a.uri + "': " + canonical(*m, e));
  }
  if (got->for_uri("\x01 not a uri")->find("\x01 not a uri"))
    fuzz::finding("for_uri found an unlisted uri");
  return 0;
}
