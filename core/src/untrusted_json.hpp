#pragma once
// The one entry point for JSON from untrusted bytes (index, manifest, JIT sidecar, anything a
// mirror, archive or store hands us). Size and nesting depth are checked on the raw text
// before nlohmann builds a tree: its tree, destructor and dump() recurse once per level, so a
// 100k-deep document would overflow the stack. Limits: limits.hpp.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kiln/error.hpp"
#include "limits.hpp"

namespace kiln {

// Pure: the byte offset of the first '[' or '{' (outside strings) that opens level
// max_depth + 1, or nullopt when the text never nests deeper than max_depth.
std::optional<std::size_t> find_excess_nesting(std::string_view text, int max_depth);

// Throws Error{Limit} naming `origin` when text is larger than max_bytes or nests deeper than
// max_depth.
void check_json_bounds(std::string_view text, const std::string& origin,
                       std::size_t max_bytes = limits::kMaxJsonBytes,
                       int max_depth = limits::kMaxJsonDepth);

// check_json_bounds, then parse. Malformed JSON (including numbers out of range such as
// 1e999) throws Error{Format} naming `origin`.
template <typename JsonT>
JsonT parse_untrusted_json(std::string_view text, const std::string& origin,
                           std::size_t max_bytes = limits::kMaxJsonBytes) {
  check_json_bounds(text, origin, max_bytes);
  try {
    return JsonT::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Format, origin + ": not valid JSON: " + e.what());
  }
}

// A value from untrusted JSON as quoted in an error message: scalars dumped and cut to
// limits::kMaxQuotedChars, containers described ("an array of 3 elements"), never dumped whole.
template <typename JsonT>
std::string quote_json(const JsonT& v) {
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " fields";
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " elements";
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > limits::kMaxQuotedChars) s = s.substr(0, limits::kMaxQuotedChars) + "...";
  return s;
}

}  // namespace kiln
