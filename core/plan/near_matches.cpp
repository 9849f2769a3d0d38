#include "plan/near_matches.hpp"

#include <algorithm>

namespace kiln::plan {

namespace {
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::vector<std::string> near_matches(const std::string& uri, const std::vector<std::string>& all,
                                      std::size_t max) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  std::string family = uri.substr(0, uri.find('_'));
  for (const auto& u : all) {
    std::size_t d = edit_distance(uri, u);
    bool same_family = !family.empty() && u.rfind(family + "_", 0) == 0;
    if (d <= std::max<std::size_t>(3, uri.size() / 3) || same_family)
      scored.emplace_back(same_family ? d / 2 : d, u);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scored.size() && i < max; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace kiln::plan
