// The archive of a release for a device: the best target first, the next on failure
// (device_fetch.hpp).
#include "plan/device_fetch.hpp"

#include <optional>

#include "format/target.hpp"
#include "kiln/error.hpp"
#include "plan/target_choice.hpp"

namespace kiln::plan {

DeviceFetch fetch_best_target(int cc, const std::vector<std::string>& offered,
                              const std::string& release,
                              const std::function<fetch::FetchResult(const std::string&)>& fetch_one,
                              const std::function<void(const std::string&)>& log) {
  NamedChoice choice = choose_named_targets(cc, offered);
  auto say = [&](const std::string& m) {
    if (log) log(m);
  };
  for (const auto& [t, why] : choice.rejected) say("not " + t + ": " + why);
  if (choice.candidates.empty()) {
    std::string all;
    for (const auto& t : offered) all += (all.empty() ? "" : ", ") + t;
    throw Error(ErrorKind::Unsupported, "no archive of release " + release + " can run on CC " +
                                            cc_string(cc) + " (it offers " +
                                            (all.empty() ? "none" : all) + ")");
  }
  std::string failures;
  std::optional<ErrorKind> kind;
  for (const auto& [t, why] : choice.candidates) {
    say("for CC " + cc_string(cc) + ": " + t + " (" + why + ")");
    try {
      return {fetch_one(t), t};
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Usage || e.kind() == ErrorKind::Io) throw;
      say(t + " failed, trying the next target that can run: " + e.what());
      failures += "\n" + t + ": " + e.what();
      if (!kind) kind = e.kind();
    }
  }
  throw Error(*kind, "no archive of release " + release + " that can run on CC " + cc_string(cc) +
                         " could be fetched:" + failures);
}

DeviceFetch fetch_for_device(fetch::FetchOptions opts, int cc, const std::string& dest) {
  const std::string release = opts.package + " " + opts.version;
  // Offline, the targets compiled in as the release's, when this is that release.
  std::optional<std::vector<std::string>> compiled =
      compiled_release_targets(opts.package, opts.version);
  std::vector<std::string> offered;
  if (opts.offline && compiled) {
    offered = *compiled;
  } else {
    opts.index = fetch::fetch_release_index(opts);
    offered = opts.index->targets;
  }
  return fetch_best_target(
      cc, offered, release, [&](const std::string& t) { return fetch::fetch_targets(opts, {t}, dest); },
      opts.log);
}

}  // namespace kiln::plan
