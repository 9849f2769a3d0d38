// Resolution's JSON form, the one `kiln resolve --explain --json` prints and the Python
// runtime reads.
#include "kiln/resolution.hpp"

#include <nlohmann/json.hpp>

namespace kiln {

std::string Resolution::to_json() const {
  using Json = nlohmann::ordered_json;
  auto cand = [](const Candidate& c, bool with_reason) {
    Json j;
    j["tier"] = c.tier;
    j["target"] = c.target;
    j["path"] = c.path;
    if (with_reason) j["reason"] = c.reason;
    return j;
  };
  Json root;
  root["uri"] = uri;
  root["device"] = device;
  root["driver"] = driver.empty() ? Json(nullptr) : Json(driver);
  root["chosen"] = chosen ? cand(*chosen, true) : Json(nullptr);
  root["rejected"] = Json::array();
  for (const auto& r : rejected) root["rejected"].push_back(cand(r, true));
  return root.dump(2) + "\n";
}

}  // namespace kiln
