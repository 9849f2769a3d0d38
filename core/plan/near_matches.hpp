#pragma once
// Error wording: the registry URIs a mistyped one may have meant, for "no kernel X" messages.
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::plan {

// Pure: up to `max` registry URIs close to `uri` (edit distance, shared family prefix).
std::vector<std::string> near_matches(const std::string& uri, const std::vector<std::string>& all,
                                      std::size_t max = 5);

}  // namespace kiln::plan
