#pragma once
// `kiln fetch --device`: which of a release's targets to fetch for a device, and the fallback to
// the next one when a fetch fails. The targets are those the release's pinned index lists
// (offline: the ones compiled in for this kiln's own release), ordered by the loader's
// target-choice rule (target_choice.hpp), fetched best first.
#include <functional>
#include <string>
#include <vector>

#include "fetch/fetch.hpp"

namespace kiln::plan {

struct DeviceFetch {
  fetch::FetchResult result;
  std::string target;  // the target fetched
};

// Fetches the best of `offered` that runs on compute capability `cc` with `fetch_one`, the next
// when one fails (Error{Usage} and Error{Io} are not a target's fault and end the walk). Each
// rejected target and each choice is said through `log`. Throws Error{Unsupported} when none of
// `offered` runs on `cc`, naming `release` and what it offers; when every candidate failed, an
// Error of the first failure's kind naming each target and why.
DeviceFetch fetch_best_target(int cc, const std::vector<std::string>& offered,
                              const std::string& release,
                              const std::function<fetch::FetchResult(const std::string&)>& fetch_one,
                              const std::function<void(const std::string&)>& log);

// fetch_best_target over the release `opts` names: the index is downloaded once (its verified
// bytes go to each fetch_targets of a chosen target into `dest`); offline, the targets compiled
// in when this is kiln's own release.
DeviceFetch fetch_for_device(fetch::FetchOptions opts, int cc, const std::string& dest);

}  // namespace kiln::plan
