// TUF metadata of every role over any bytes (core/tuf/tuf_metadata.cpp, tuf_delegation.cpp): what
// a mirror or a bundle serves as root, timestamp, snapshot, targets or a delegated targets role.
// parse_envelope, then each role's parser on its "signed" part whatever its "_type" says (the
// updater asks for a role by file name, not by content), canonical JSON, and the delegation
// rules over the targets a parsed role lists. Refusals are tuf::Errors (Attack::Malformed or
// WrongType); an accepted envelope's canonical bytes are stable, and every path a succinct
// delegation hashes falls into one of its own bins.
#include "fuzz_util.hpp"
#include "tuf/tuf_delegation.hpp"
#include "tuf/tuf_error.hpp"
#include "tuf/tuf_metadata.hpp"

namespace {

using namespace kiln;

// A refusal must be a tuf::Error naming the file; anything else escaping is a finding.
template <class F>
bool parses(F&& f, const std::string& origin) {
  try {
    f();
    return true;
  } catch (const tuf::Error& e) {
    if (e.attack() != tuf::Attack::Malformed && e.attack() != tuf::Attack::WrongType)
      fuzz::finding(std::string("a parser refused with attack ") + tuf::to_string(e.attack()) +
                    ": " + e.what());
    if (std::string_view(e.what()).find(origin) == std::string_view::npos)
      fuzz::finding("the message does not name '" + origin + "': " + e.what());
    return false;
  } catch (const std::exception& e) {
    fuzz::finding(std::string("an exception other than tuf::Error escaped: ") + e.what());
  } catch (...) {
    fuzz::finding("a non-std exception escaped");
  }
}

void check_delegations(const tuf::Targets& t) {
  if (!t.delegations) return;
  std::vector<std::string> paths = {"kiln-kernels-0.1.0-index.json", "a/b/c.tar.zst", "", "*"};
  for (const auto& [path, info] : t.targets) paths.push_back(path);
  for (const auto& role : t.delegations->roles)
    for (const auto& p : paths) {
      (void)tuf::role_delegates_path(role, p);
      if (role.paths)
        for (const auto& pattern : *role.paths) (void)tuf::path_matches_pattern(p, pattern);
    }
  if (const auto& bins = t.delegations->succinct)
    for (const auto& p : paths) {
      std::string bin = tuf::succinct_role_for_target(*bins, p);
      if (!tuf::is_succinct_role(*bins, bin))
        fuzz::finding("target '" + p + "' hashes to bin '" + bin +
                      "', which is not one of its bins");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string origin = "fuzz.targets.json";
  tuf::Envelope env;
  if (!parses([&] { env = tuf::parse_envelope(fuzz::as_text(data, size), origin); }, origin))
    return 0;
  // The canonical form is what signatures cover: the same "signed" value written another way
  // (nlohmann's escapes, in another envelope) must give the same canonical bytes. (OLPC
  // canonical JSON leaves control characters raw: it is not JSON, so it is not read back.)
  const std::string rewritten = "{\"signatures\":[],\"signed\":" + env.signed_json.dump() + "}";
  tuf::Envelope again;
  if (!parses([&] { again = tuf::parse_envelope(rewritten, origin); }, origin))
    fuzz::finding("the signed part of an accepted envelope, written again, is refused");
  if (again.canonical_signed != env.canonical_signed)
    fuzz::finding("canonical_json is not stable:\n" + env.canonical_signed.substr(0, 400));
  (void)parses([&] { tuf::parse_root(env.signed_json, origin); }, origin);
  (void)parses([&] { tuf::parse_timestamp(env.signed_json, origin); }, origin);
  (void)parses([&] { tuf::parse_snapshot(env.signed_json, origin); }, origin);
  tuf::Targets t;
  if (parses([&] { t = tuf::parse_targets(env.signed_json, origin); }, origin))
    check_delegations(t);
  return 0;
}
