#include "io/artifact_check.hpp"

#include <set>

#include "io/sha256.hpp"

namespace kiln::io {

std::string PinMismatch::message(std::string_view where, std::string_view pinned_by) const {
  std::string out;
  if (!where.empty()) out.append(where).append(": ");
  out += field + " is " + actual;
  if (field == "size") out += " bytes";
  out.append(", ").append(pinned_by).append(" says ").append(expected);
  return out;
}

std::optional<PinMismatch> size_mismatch(std::uint64_t actual, std::uint64_t pinned) {
  if (actual == pinned) return std::nullopt;
  return PinMismatch{"size", std::to_string(actual), std::to_string(pinned)};
}

std::optional<PinMismatch> digest_mismatch(std::string_view actual_sha256,
                                           std::string_view pinned_sha256) {
  if (actual_sha256 == pinned_sha256) return std::nullopt;
  return PinMismatch{"sha256", std::string(actual_sha256), std::string(pinned_sha256)};
}

std::optional<PinMismatch> pin_mismatch(std::uint64_t size, std::string_view sha256,
                                        const ArtifactPin& pin) {
  if (auto m = size_mismatch(size, pin.size)) return m;
  return digest_mismatch(sha256, pin.sha256);
}

std::optional<PinMismatch> pin_mismatch(std::string_view bytes, const ArtifactPin& pin) {
  if (auto m = size_mismatch(bytes.size(), pin.size)) return m;
  return digest_mismatch(sha256_hex(bytes), pin.sha256);
}

Coverage coverage(const std::vector<std::string>& listed, const std::vector<std::string>& present) {
  Coverage out;
  const std::set<std::string> in_list(listed.begin(), listed.end());
  const std::set<std::string> there(present.begin(), present.end());
  std::set<std::string> seen;
  for (const auto& name : listed)
    if (!there.count(name) && seen.insert(name).second) out.missing.push_back(name);
  seen.clear();
  for (const auto& name : present)
    if (!in_list.count(name) && seen.insert(name).second) out.unlisted.push_back(name);
  return out;
}

std::string missing_message(std::string_view where, std::string_view uri,
                            std::string_view listed_by) {
  std::string out(where);
  out.append(": artifact ").append(uri).append(" is listed in ").append(listed_by);
  return out + " but missing";
}

std::string unlisted_message(std::string_view where, std::string_view listed_by) {
  std::string out(where);
  return out.append(": not listed in ").append(listed_by);
}

}  // namespace kiln::io
